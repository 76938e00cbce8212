package dispatch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// An agent that runs its commands in a sandbox of its own (Codex) cannot
// start it when the task needs the host's /tmp (then read-only in the
// relay's sandbox): every command would fail while the task "completes".
// Such a task is refused before the agent starts, with the reason and its
// fix; the same agent in a cwd out of /tmp runs.
func TestOwnSandboxRefusedInHostTmp(t *testing.T) {
	t.Parallel()
	p := planProfile(true)
	r := p.Rules[model.ModeReadOnly]
	r.OwnSandbox = true
	p.Rules[model.ModeReadOnly] = r
	e := newEnv(t, func(o *dispatch.Options) {
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{
			{Name: "boxed", Command: []string{dispatchtest.BuildFakeAgent(t), "modes"}, Enabled: true, Profiles: []*hardening.Profile{p}},
		}, nil, nil)
	})
	inTmp, err := os.MkdirTemp("/tmp", "relay-own-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(inTmp) })

	task := e.task("boxed", "echo hello", model.ModeReadOnly)
	task.Cwd = inTmp
	err = e.d.Dispatch(context.Background(), task, newRecorder())
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeAgentSandboxUnavailable {
		t.Fatalf("dispatch = %v; want %s", err, model.CodeAgentSandboxUnavailable)
	}
	if !strings.Contains(me.Message, "sandbox of its own") || !strings.Contains(me.Message, inTmp) {
		t.Errorf("message %q: want the reason and the path in /tmp", me.Message)
	}
	if !strings.Contains(me.Hint, "out of /tmp") {
		t.Errorf("hint %q: want the fix", me.Hint)
	}
	if n := len(e.events(t, "start")); n != 0 {
		t.Fatalf("the agent started %d times", n)
	}
	if left, _ := filepath.Glob(filepath.Join(e.home, "profiles", "sandbox-*")); len(left) != 0 {
		t.Errorf("sandbox directories left: %v", left)
	}

	out, _ := e.run(t, e.task("boxed", "echo hello", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
}
