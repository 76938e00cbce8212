package persistence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// The events of watching come in commit order across tasks, by the audit
// log's seq; a task filter keeps one task's; a page that stops at its
// limit leaves the cursor at its last event, and one that reads to the
// head moves it there, past rows that are not task events; a task's
// history and the head are one snapshot.
func TestEventsAfterAndTaskHistory(t *testing.T) {
	t.Parallel()
	db := persistencetest.MustOpenTemp(t)
	ctx := context.Background()
	head0, err := db.EventsHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 2 {
		id := fmt.Sprintf("T-WATCH%021d", i)
		ids = append(ids, id)
		if _, _, err := db.CreateTask(ctx, model.Task{ID: id, Caller: "codex", Target: "claude", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	// Task 0 is authorized with a verdict; then task 1 is rejected.
	if _, err := db.Transition(ctx, model.Transition{TaskID: ids[0], From: model.StateSubmitted, To: model.StateAuthorized,
		Trigger: model.TriggerAuthorize, Actor: "relay", At: at.Add(time.Second),
		Verdicts: []model.Verdict{{Gate: model.GateAuthority, Passed: true, Message: "ok", Detail: map[string]string{"exit_code": "0"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Transition(ctx, model.Transition{TaskID: ids[1], From: model.StateSubmitted, To: model.StateRejected,
		Trigger: model.TriggerReject, Code: model.CodeAuthorityDenied, Message: "no", Actor: "relay", At: at.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// An audit row that is not a task event moves the head, not the events.
	if err := db.Audit(ctx, model.AuditEvent{Kind: "conn.opened", Actor: "codex"}); err != nil {
		t.Fatal(err)
	}

	evs, cursor, err := db.EventsAfter(ctx, "", head0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.TaskID[len(ev.TaskID)-1:]+":"+ev.Kind+":"+string(ev.To)+string(ev.Gate))
	}
	want := "[0:submitted:submitted 1:submitted:submitted 0:verdict:authority 0:transition:authorized 1:transition:rejected]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s", got, want)
	}
	head, _ := db.EventsHead(ctx)
	if cursor != head || cursor <= evs[len(evs)-1].Seq {
		t.Errorf("cursor %d after reading to the head %d (last event %d)", cursor, head, evs[len(evs)-1].Seq)
	}
	if v := evs[2]; v.Passed == nil || !*v.Passed || v.Detail["exit_code"] != "0" || v.Message != "ok" {
		t.Errorf("verdict event %+v", v)
	}
	if r := evs[4]; r.From != model.StateSubmitted || r.Trigger != model.TriggerReject || r.Code != model.CodeAuthorityDenied || r.Message != "no" {
		t.Errorf("transition event %+v", r)
	}

	page, pc, err := db.EventsAfter(ctx, "", head0, 2)
	if err != nil || len(page) != 2 || pc != page[1].Seq {
		t.Fatalf("a page of 2: %d events, cursor %d, %v", len(page), pc, err)
	}
	one, _, err := db.EventsAfter(ctx, ids[1], head0, 100)
	if err != nil || len(one) != 2 || one[0].TaskID != ids[1] || one[1].To != model.StateRejected {
		t.Fatalf("task 1's events: %+v, %v", one, err)
	}
	if none, c, err := db.EventsAfter(ctx, "", cursor, 100); err != nil || len(none) != 0 || c != cursor {
		t.Fatalf("after the head: %+v, cursor %d, %v", none, c, err)
	}

	task, hist, hc, err := db.TaskHistory(ctx, ids[0])
	if err != nil || task.State != model.StateAuthorized || hc != head || len(hist) != 3 {
		t.Fatalf("history: %+v %+v %d %v", task, hist, hc, err)
	}
	if hist[0].Kind != model.WatchSubmitted || hist[1].Gate != model.GateAuthority || hist[2].To != model.StateAuthorized {
		t.Errorf("history %+v, want submission, verdict, transition", hist)
	}
	if _, _, _, err := db.TaskHistory(ctx, "T-NOPE"); model.ErrorCode(err) != model.CodeNotFound {
		t.Errorf("history of an unknown task: %v", err)
	}
}

// A task stored with a delegation chain keeps its parent and its chain
// (listings and reads return them), its audit row records both, and its
// submission, followed live or read as history, reads as the whole path
// from the top-level caller; a top-level task's reads as before.
func TestDelegatedTaskKeepsItsChain(t *testing.T) {
	t.Parallel()
	db := persistencetest.MustOpenTemp(t)
	ctx := context.Background()
	head, err := db.EventsHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	top, child := "T-CHAIN000000000000000000001", "T-CHAIN000000000000000000002"
	chain := []model.Hop{{TaskID: top, Caller: "codex", Target: "gemini"}}
	if _, _, err := db.CreateTask(ctx, model.Task{ID: top, Caller: "codex", Target: "gemini"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreateTask(ctx, model.Task{ID: child, Caller: "gemini", Target: "claude", ParentTaskID: top, Chain: chain}); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetTask(ctx, child)
	if err != nil || got.ParentTaskID != top || fmt.Sprint(got.Chain) != fmt.Sprint(chain) {
		t.Fatalf("GetTask = parent %q chain %v, %v", got.ParentTaskID, got.Chain, err)
	}
	if ts, err := db.ListTasks(ctx, model.TaskFilter{}); err != nil || len(ts) != 2 || ts[0].ParentTaskID != top || len(ts[1].Chain) != 0 || ts[1].Chain == nil {
		t.Fatalf("ListTasks = %+v, %v", ts, err)
	}
	evs, _, err := db.EventsAfter(ctx, "", head, 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("EventsAfter = %+v, %v", evs, err)
	}
	if evs[0].Message != "codex → gemini" || evs[1].Message != "codex → gemini → claude" {
		t.Errorf("submissions followed live read %q and %q", evs[0].Message, evs[1].Message)
	}
	if _, hist, _, err := db.TaskHistory(ctx, child); err != nil || hist[0].Message != "codex → gemini → claude" {
		t.Errorf("the child's history begins %+v, %v", hist, err)
	}
	if n := persistence.CountRows(t, db, "audit_log", "kind = 'task.submitted' AND task_id = ? AND json_extract(data, '$.parent_task_id') = ? AND json_extract(data, '$.chain') = ?",
		child, top, `[{"task_id":"`+top+`","caller":"codex","target":"gemini"}]`); n != 1 {
		t.Errorf("%d audit rows of the child's submission hold its parent and chain, want 1", n)
	}
	if n := persistence.CountRows(t, db, "audit_log", "kind = 'task.submitted' AND task_id = ? AND json_extract(data, '$.chain') IS NULL", top); n != 1 {
		t.Errorf("%d audit rows of the top-level submission have no chain, want 1", n)
	}
}
