package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// submitFor submits a task from caller to target over the socket API, with
// a mission and a lease (its gates pass with an allowing authority), and
// returns its id.
func submitFor(t *testing.T, c *http.Client, caller, target, prompt, cwd string) string {
	t.Helper()
	r := apiDo(t, c, "POST", "/v1/tasks", caller, mustJSON(t, map[string]any{
		"target": target, "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
	if r.status != 200 || r.str("task_id") == "" {
		t.Fatalf("submit %q as %s: %d %s", prompt, caller, r.status, r.body)
	}
	return r.str("task_id")
}

// operatorState is a task's state as the operator sees it.
func operatorState(t *testing.T, c *http.Client, id string) string {
	t.Helper()
	return apiDo(t, c, "GET", "/v1/operator/tasks/"+id, "", nil).str("state")
}

// One caller cannot hold every dispatch slot. With the default limits (4
// slots, a caller's share all but one), codex's four hanging tasks take
// three slots and the fourth waits in submitted; gemini's task, submitted
// after them, runs in the free slot and completes while codex's still
// hang (on a relay without a share it waited for the task timeout, 30
// minutes by default). When one of codex's tasks ends, its waiting task
// gets the slot: a caller at its share is held back, never starved.
func TestReliabilityOneCallerCannotHoldEverySlot(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	cwd := t.TempDir()

	var hanging []string
	for range 4 {
		hanging = append(hanging, submitFor(t, c, "codex", "claude", "hang until canceled", cwd))
	}
	for _, id := range hanging[:3] {
		awaitWorking(t, c, id)
	}
	if s := operatorState(t, c, hanging[3]); s != "submitted" {
		t.Fatalf("codex's fourth hanging task is %s, want submitted: codex's share is 3 of 4 slots", s)
	}

	other := submitFor(t, c, "gemini", "claude", "echo served beside the hanging ones", cwd)
	r := taskEnded(t, c, other)
	if r.str("state") != "completed" {
		t.Fatalf("gemini's task ended %s/%s (%s), want completed", r.str("state"), r.str("code"), r.str("message"))
	}
	for _, id := range hanging[:3] {
		if s := operatorState(t, c, id); s != "working" {
			t.Fatalf("codex's task %s is %s after gemini's completed, want still working", id, s)
		}
	}
	if s := operatorState(t, c, hanging[3]); s != "submitted" {
		t.Fatalf("codex's fourth task is %s while codex holds its share, want submitted", s)
	}

	// One of codex's tasks ends: its waiting one takes the slot.
	if r := apiDo(t, c, "POST", "/v1/tasks/"+hanging[0]+"/cancel", "codex", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	awaitWorking(t, c, hanging[3])
	eventually(t, "the canceled task ended", 30*time.Second, func() bool {
		return model.State(operatorState(t, c, hanging[0])) == model.StateCanceled
	})
	auditVerify(t, home)
}
