package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

// An idempotency_key names one request: a retry with the
// same key and the very same parameters returns the first task, stored
// once; the same key with any parameter changed is refused with
// idempotency_conflict and stores nothing, instead of silently answering
// with a task that is not what was asked for. Keys are per caller.
func TestReliabilityIdempotencyConflict(t *testing.T) {
	t.Parallel()
	home := newHome(t, "") // no authority: tasks end blocked, nothing runs
	launchDaemon(t, home)
	c := apiClient(home)
	db := openRO(t, home)
	cwd, otherCwd := t.TempDir(), t.TempDir()

	ref := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
		"target": "claude", "prompt": "an earlier task", "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
	if ref.status != 200 {
		t.Fatalf("submit: %d %s", ref.status, ref.body)
	}
	refID := ref.str("task_id")
	first := func() map[string]any {
		return map[string]any{"target": "claude", "prompt": "review parser.go", "mission_id": "M-1", "lease_id": "S-1",
			"mode": "read_only", "cwd": cwd, "reference_task_ids": []string{refID},
			"artifacts":       []map[string]any{{"uri": "file:///repo/parser.go", "name": "parser.go", "media_type": "text/x-go"}},
			"idempotency_key": "k-1"}
	}
	a := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, first()))
	if a.status != 200 {
		t.Fatalf("first submit: %d %s", a.status, a.body)
	}
	id := a.str("task_id")
	// The submit answered before the gates ran: take the count once both
	// tasks have ended (their notices are written in the same transaction).
	for _, tid := range []string{refID, id} {
		eventually(t, "task "+tid+" ended", 30*time.Second, func() bool {
			return model.State(apiDo(t, c, "GET", "/v1/tasks/"+tid, "codex", nil).str("state")).Terminal()
		})
	}
	rows := boundsRows(t, db)

	// The very same request, again (a retry after a lost answer): the first
	// task, nothing stored. The default mode spelled out or left out is
	// the same request.
	again := first()
	delete(again, "mode")
	for _, req := range []map[string]any{first(), again} {
		r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, req))
		if r.status != 200 || r.str("task_id") != id {
			t.Fatalf("retry: %d %s, want task %s", r.status, r.body, id)
		}
	}
	if now := boundsRows(t, db); now != rows {
		t.Fatalf("a retry stored something: tasks, messages, audit rows %v → %v", rows, now)
	}

	// Any parameter changed: refused, nothing stored.
	for field, v := range map[string]any{
		"target":             "gemini",
		"prompt":             "review lexer.go",
		"mission_id":         "M-2",
		"lease_id":           "S-2",
		"mode":               "state_changing",
		"context_id":         "C-other",
		"cwd":                otherCwd,
		"reference_task_ids": []string{},
		"artifacts":          []map[string]any{{"uri": "file:///repo/lexer.go"}},
	} {
		req := first()
		req[field] = v
		r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, req))
		if r.status != socketapi.Status(model.CodeIdempotencyConflict) || r.code() != string(model.CodeIdempotencyConflict) ||
			r.str("message") == "" || r.str("hint") == "" {
			t.Errorf("same key, %s changed: %d %s; want %d %s with a message and a hint", field, r.status, r.body,
				socketapi.Status(model.CodeIdempotencyConflict), model.CodeIdempotencyConflict)
		}
		if now := boundsRows(t, db); now != rows {
			t.Fatalf("same key, %s changed: tasks, messages, audit rows %v → %v; a refused request stores nothing", field, rows, now)
		}
	}
	// A field left out that the first request gave is a change too.
	noRefs := first()
	delete(noRefs, "reference_task_ids")
	if r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, noRefs)); r.code() != string(model.CodeIdempotencyConflict) {
		t.Errorf("same key without reference_task_ids: %d %s, want idempotency_conflict", r.status, r.body)
	}

	// The key is the caller's: another caller's same key is another task.
	if r := apiDo(t, c, "POST", "/v1/tasks", "gemini", mustJSON(t, first())); r.status != http.StatusOK || r.str("task_id") == id {
		t.Errorf("another caller, same key: %d %s, want a new task", r.status, r.body)
	}
	auditVerify(t, home)
}
