package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// A graceful stop with every dispatch slot busy: the
// running task is stopped and fails dispatch_interrupted, but the slot it
// frees is not given to a queued task — nothing is authorized while the
// daemon stops. The queued tasks stay submitted, with no event, verdict or
// failure written for them, and run to completion after the restart.
func TestReliabilityGracefulStopKeepsQueuedTasks(t *testing.T) {
	t.Parallel()
	agentLog := filepath.Join(t.TempDir(), "agent.log")
	env := []string{"FAKEAGENT_LOG=" + agentLog}
	home := newHome(t, fullConfig(t, "allow-guarded", "[limits]\nmax_dispatch = 1\n"))
	d := launchDaemonEnv(t, home, env)
	c := apiClient(home)
	cwd := t.TempDir()
	running := submitGated(t, c, "hang until stopped", cwd)
	awaitWorking(t, c, running)
	queued := []string{submitGated(t, c, "echo first queued", cwd), submitGated(t, c, "echo second queued", cwd)}
	for _, id := range queued {
		if s := stateOf(t, c, id); s != "submitted" {
			t.Fatalf("task %s is %s with the only slot busy, want submitted", id, s)
		}
	}

	d.stop(t, syscall.SIGTERM)

	db := openRO(t, home)
	var st, code string
	if err := db.QueryRow(`SELECT state, code FROM tasks WHERE id = ?`, running).Scan(&st, &code); err != nil {
		t.Fatal(err)
	}
	if st != "failed" || code != string(model.CodeDispatchInterrupted) {
		t.Errorf("running task after SIGTERM: %s/%s, want failed/dispatch_interrupted", st, code)
	}
	for _, id := range queued {
		var events, verdicts int
		if err := db.QueryRow(`SELECT state, code FROM tasks WHERE id = ?`, id).Scan(&st, &code); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT count(*) FROM task_events WHERE task_id = ? AND to_state <> 'submitted'`, id).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT count(*) FROM task_verdicts WHERE task_id = ?`, id).Scan(&verdicts); err != nil {
			t.Fatal(err)
		}
		if st != "submitted" || code != "" || events != 0 || verdicts != 0 {
			t.Errorf("queued task %s after SIGTERM: %s/%s with %d transitions and %d verdicts, want submitted and untouched",
				id, st, code, events, verdicts)
		}
	}
	if n := len(agentStarts(t, agentLog)); n != 1 {
		t.Errorf("%d agents started before the restart, want 1 (the running task's)", n)
	}
	auditVerify(t, home)

	launchDaemonEnv(t, home, env)
	c = apiClient(home)
	for _, id := range queued {
		eventually(t, "queued task "+id+" completed after the restart", 60*time.Second, func() bool {
			s := stateOf(t, c, id)
			if model.State(s).Terminal() && s != "completed" {
				t.Fatalf("queued task %s ended %s after the restart, want completed", id, s)
			}
			return s == "completed"
		})
	}
	if s := stateOf(t, c, running); s != "failed" {
		t.Errorf("the interrupted task is %s after the restart, want it left failed", s)
	}
	auditVerify(t, home)
}
