package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// get_task with wait_seconds, through the real facade and daemon: a task
// that ends after about a second is answered at its end, well before a
// 30 s wait is over and within a small margin of the end; a task that
// does not end is answered, as it is, when the wait has passed; a wait
// out of range is refused with invalid_args and a hint.
func TestE2EGetTaskWaitsForTheEnd(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	codex := startFacade(t, home, "codex", "--no-autostart")
	cwd := t.TempDir()
	submit := func(prompt string) string {
		return mustOK(t, codex, "submit_task", map[string]any{"target": "claude", "prompt": prompt,
			"mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}).str("task_id")
	}

	id := submit("sleep 1")
	asked := time.Now()
	r := mustOK(t, codex, "get_task", map[string]any{"task_id": id, "wait_seconds": 30})
	answered := time.Now()
	if r.str("state") != string(model.StateCompleted) || r.str("result") != "slept" {
		t.Fatalf("the wait answered %s %q, want the task completed", r.str("state"), r.str("result"))
	}
	ended, err := time.Parse(time.RFC3339Nano, r.str("updated_at"))
	if err != nil {
		t.Fatal(err)
	}
	if !ended.After(asked) {
		t.Fatalf("the task ended at %s, before the wait began at %s: nothing was waited for", ended, asked)
	}
	if lag := answered.Sub(ended); lag > time.Second {
		t.Errorf("the wait answered %s after the task ended; want it at the end", lag)
	}
	if took := answered.Sub(asked); took > 15*time.Second {
		t.Errorf("the wait took %s for a task of about a second", took)
	}
	t.Logf("wait_seconds 30 on a task of 1 s: answered %s after asking, %s after the task ended",
		answered.Sub(asked).Round(time.Millisecond), answered.Sub(ended).Round(time.Millisecond))

	hang := submit("hang")
	asked = time.Now()
	r = mustOK(t, codex, "get_task", map[string]any{"task_id": hang, "wait_seconds": 2})
	took := time.Since(asked)
	if model.State(r.str("state")).Terminal() || took < 2*time.Second || took > 5*time.Second {
		t.Errorf("wait_seconds 2 on a task that does not end: %s after %s; want it as it is, after 2 s", r.str("state"), took)
	}
	mustOK(t, codex, "cancel_task", map[string]any{"task_id": hang})

	for _, w := range []any{51, -1, 1.5, "10"} {
		e := mustCode(t, codex, "get_task", map[string]any{"task_id": id, "wait_seconds": w}, "invalid_args")
		if !strings.Contains(e.str("hint"), "wait_seconds") {
			t.Errorf("wait_seconds %v: hint %q does not name wait_seconds", w, e.str("hint"))
		}
	}
}
