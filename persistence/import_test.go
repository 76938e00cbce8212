package persistence

import (
	"context"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	mustCreate(t, db, newTask("T-live"))
	read, acked := t0.Add(time.Minute), t0.Add(2*time.Minute)
	done := model.TaskDetail{
		Task: model.Task{ID: "T-old", State: model.StateCompleted, Caller: "codex", Target: "claude",
			Prompt: "review", Result: "ok", StopReason: "end_turn", CreatedAt: t0, UpdatedAt: acked},
		Events: []model.Event{
			{From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize, Actor: model.RelayAgent, At: t0},
			{From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart, Actor: model.RelayAgent, At: read},
			{From: model.StateWorking, To: model.StateCompleted, Trigger: model.TriggerComplete, Actor: model.RelayAgent, At: acked},
		},
		Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Passed: true, At: t0}, {Gate: model.GateAuthority, Passed: true,
			Detail: map[string]string{"elapsed": "1ms"}}},
	}
	err := db.Import(ctx, History{
		Messages: []model.Message{
			{ID: "MSG-1", From: "codex", To: "claude", Body: "one", CreatedAt: t0},
			{ID: "MSG-2", From: "claude", To: "codex", Body: "two", State: model.MessageRead, ReadAt: &read, CreatedAt: t0},
			{ID: "MSG-3", From: "claude", To: "codex", Body: "three", State: model.MessageAcked, ReadAt: &read, AckedAt: &acked},
		},
		Tasks: []model.TaskDetail{done},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := db.GetMessage(ctx, "MSG-2")
	if err != nil || m.State != model.MessageRead || m.ReadAt == nil || !m.ReadAt.Equal(read) {
		t.Errorf("MSG-2 = %+v, %v", m, err)
	}
	if m, err := db.GetMessage(ctx, "MSG-3"); err != nil || m.CreatedAt.IsZero() || m.AckedAt == nil {
		t.Errorf("MSG-3 (stamped) = %+v, %v", m, err)
	}
	got, err := db.GetTask(ctx, "T-old")
	if err != nil || got.State != model.StateCompleted || got.Mode != model.ModeReadOnly || got.Result != "ok" || !got.UpdatedAt.Equal(acked) {
		t.Errorf("T-old = %+v, %v", got, err)
	}
	evs, err := db.TaskEvents(ctx, "T-old")
	if err != nil || len(evs) != 3 || evs[2].To != model.StateCompleted || evs[2].TaskID != "T-old" {
		t.Errorf("events = %+v, %v", evs, err)
	}
	vs, err := db.TaskVerdicts(ctx, "T-old")
	if err != nil || len(vs) != 2 || vs[1].Detail["elapsed"] != "1ms" || !vs[1].At.Equal(t0) {
		t.Errorf("verdicts = %+v, %v", vs, err)
	}
	// The imported rows follow the live ones, and each envelope is audited.
	if n := count(t, db, "messages", "seq = 3 AND id = 'MSG-3'"); n != 1 {
		t.Errorf("MSG-3 is not the third message")
	}
	if n := count(t, db, "tasks", "seq = 2 AND id = 'T-old'"); n != 1 {
		t.Errorf("T-old is not the second task")
	}
	if n := count(t, db, "audit_log", "kind = 'message.stored'"); n != 3 {
		t.Errorf("message.stored rows = %d", n)
	}
	verifyOK(t, db, 1+3+1)
	// A live write after an import goes on from there.
	if _, err := db.CreateMessage(ctx, model.Message{ID: "MSG-4", From: "codex", To: "claude", Body: "four"}); err != nil {
		t.Fatal(err)
	}
	verifyOK(t, db, 1+3+1+1)
}

func TestImportRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	mustCreate(t, db, newTask("T-1"))
	read := t0
	for name, h := range map[string]History{
		"message without id":   {Messages: []model.Message{{From: "a", To: "b"}}},
		"read without read_at": {Messages: []model.Message{{ID: "M", From: "a", To: "b", State: model.MessageRead}}},
		"stored with read_at":  {Messages: []model.Message{{ID: "M", From: "a", To: "b", ReadAt: &read}}},
		"unknown state":        {Messages: []model.Message{{ID: "M", From: "a", To: "b", State: "gone"}}},
		"task without caller":  {Tasks: []model.TaskDetail{{Task: model.Task{ID: "T", Target: "b"}}}},
		"unknown task state":   {Tasks: []model.TaskDetail{{Task: model.Task{ID: "T", Caller: "a", Target: "b", State: "done"}}}},
		"unknown mode":         {Tasks: []model.TaskDetail{{Task: model.Task{ID: "T", Caller: "a", Target: "b", Mode: "root"}}}},
		"another task's event": {Tasks: []model.TaskDetail{{Task: model.Task{ID: "T", Caller: "a", Target: "b"},
			Events: []model.Event{{TaskID: "T-1"}}}}},
		// A duplicate rolls the whole batch back.
		"duplicate id": {Messages: []model.Message{{ID: "M-new", From: "a", To: "b"}},
			Tasks: []model.TaskDetail{{Task: model.Task{ID: "T-1", Caller: "a", Target: "b"}}}},
	} {
		if err := db.Import(ctx, h); model.ErrorCode(err) != model.CodeInvalidArgs {
			t.Errorf("%s: Import = %v, want invalid_args", name, err)
		}
		if n := count(t, db, "messages", ""); n != 0 {
			t.Fatalf("%s: %d messages stored", name, n)
		}
	}
	verifyOK(t, db, 1)
}
