package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// An agent that never answers initialize, or session/new, is killed when
// the start-up deadline passes — long before the task timeout — and the
// task fails agent_start_timeout naming where it stuck; the agent's
// process is dead when the run reports. An agent that starts in time is
// not touched by the deadline, however long its turn then runs.
func TestStartDeadline(t *testing.T) {
	t.Parallel()
	const deadline = 700 * time.Millisecond
	e := newEnv(t, func(o *dispatch.Options) { o.StartTimeout = deadline; o.TaskTimeout = time.Minute })
	for _, c := range []struct{ agent, stuck string }{
		{"hanginit", "had not answered initialize"},
		{"hangnew", "had not answered session/new"},
	} {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			out, r := e.run(t, e.task(c.agent, "echo x", model.ModeReadOnly))
			took := time.Since(began)
			wantOutcome(t, out, model.StateFailed, model.CodeAgentStartTimeout)
			if !strings.Contains(out.Message, c.stuck) || !strings.Contains(out.Message, "start_timeout") {
				t.Errorf("message %q, want it to say the agent %s within start_timeout", out.Message, c.stuck)
			}
			if took < deadline || took > deadline+10*time.Second {
				t.Errorf("the run ended after %v; the start-up deadline is %v and the task timeout a minute", took, deadline)
			}
			if calls, _, _ := r.snapshot(); len(calls) != 1 {
				t.Errorf("reports %v, want only finished (never working)", calls)
			}
		})
	}
	t.Run("a turn longer than the deadline", func(t *testing.T) {
		t.Parallel()
		// The fake ends its turn only when canceled: cancel it well after
		// the start-up deadline.
		task := e.task("fake", "hang", model.ModeReadOnly)
		r := newRecorder()
		if err := e.d.Dispatch(t.Context(), task, r); err != nil {
			t.Fatal(err)
		}
		r.waitStarted(t)
		time.Sleep(2 * deadline)
		e.d.Cancel(task.ID)
		wantOutcome(t, r.waitFinished(t), model.StateCanceled, model.CodeCanceledBySubmitter)
	})
}
