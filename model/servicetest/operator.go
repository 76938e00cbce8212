package servicetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// taskIDs lists the ids of ts, in order.
func taskIDs(ts []model.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// messageIDs lists the ids of ms, in order.
func messageIDs(ms []model.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// auditRows is the audit log's length; the chain must verify.
func (f Fixture) auditRows(t *testing.T) int64 {
	t.Helper()
	rep, err := f.Operator.VerifyAudit(context.Background())
	if err != nil || !rep.OK || rep.BadSeq != 0 || rep.Head == "" {
		t.Fatalf("verify audit: %+v, %v; want a chain that verifies", rep, err)
	}
	return rep.Rows
}

// A transport connection is on record: each one adds to the audit log,
// and the chain still verifies.
func connectionsAreAudited(t *testing.T, f Fixture) {
	ctx := context.Background()
	a := f.Agents[0]
	before := f.auditRows(t)
	if err := f.As(a).Connected(ctx, model.Conn{Agent: a, PID: 1, UID: 1, Kind: "mcp"}); err != nil {
		t.Fatalf("%s connects: %v", a, err)
	}
	after := f.auditRows(t)
	if after <= before {
		t.Errorf("a connection left the audit log at %d rows (was %d)", after, before)
	}
	// The same process connecting again changes nothing, and writes nothing.
	for range 50 {
		if err := f.As(a).Connected(ctx, model.Conn{Agent: a, PID: 1, UID: 1, Kind: "mcp"}); err != nil {
			t.Fatalf("%s connects again: %v", a, err)
		}
	}
	if again := f.auditRows(t); again != after {
		t.Errorf("50 more connections of one process took the audit log from %d to %d rows", after, again)
	}
}

// The operator sees every agent's tasks, newest first, filtered by state,
// agent (caller or target), caller and target, in pages; a filter that
// names no agent is unknown_agent, not an empty list; a bad state, a
// limit out of 1..MaxPageSize and a cursor naming no task are refused.
func operatorListsEveryTask(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	ab := f.submit(t, a, model.SubmitRequest{Target: b})
	bc := f.submit(t, b, model.SubmitRequest{Target: c})
	ca := f.submit(t, c, model.SubmitRequest{Target: a})
	op := f.Operator
	list := func(what string, tf model.TaskFilter) []string {
		t.Helper()
		return taskIDs(must[[]model.Task](t, what)(op.Tasks(ctx, tf)))
	}
	for _, w := range []struct {
		what string
		f    model.TaskFilter
		want []string
	}{
		{"every task", model.TaskFilter{}, []string{ca.ID, bc.ID, ab.ID}},
		{"agent " + a, model.TaskFilter{Agent: a}, []string{ca.ID, ab.ID}},
		{"caller " + a, model.TaskFilter{Caller: a}, []string{ab.ID}},
		{"target " + a, model.TaskFilter{Target: a}, []string{ca.ID}},
		{"caller " + b + " and target " + c, model.TaskFilter{Caller: b, Target: c}, []string{bc.ID}},
		{"caller " + b + " and target " + a, model.TaskFilter{Caller: b, Target: a}, []string{}},
	} {
		if got := list(w.what, w.f); !slices.Equal(got, w.want) {
			t.Errorf("the operator lists %s: %v, want %v", w.what, got, w.want)
		}
	}
	must[model.Task](t, "cancel")(f.As(b).CancelTask(ctx, b, bc.ID))
	if got := list("canceled", model.TaskFilter{State: model.StateCanceled}); !slices.Equal(got, []string{bc.ID}) {
		t.Errorf("canceled tasks: %v, want %v", got, []string{bc.ID})
	}
	if got := must[[]model.Task](t, "completed")(op.Tasks(ctx, model.TaskFilter{State: model.StateCompleted})); got == nil || len(got) != 0 {
		t.Errorf("completed tasks: %#v, want an empty list", got)
	}
	// Pages of one, newest first, down to nothing before the oldest.
	var paged []string
	before := ""
	for range 4 {
		page := list("a page", model.TaskFilter{Limit: 1, Before: before})
		if len(page) == 0 {
			break
		}
		if len(page) != 1 {
			t.Fatalf("a page of one holds %v", page)
		}
		paged, before = append(paged, page...), page[0]
	}
	if want := []string{ca.ID, bc.ID, ab.ID}; !slices.Equal(paged, want) {
		t.Errorf("pages of one: %v, want %v", paged, want)
	}
	for _, r := range []struct {
		what string
		f    model.TaskFilter
		code model.Code
	}{
		{"an unknown agent", model.TaskFilter{Agent: "no-such-agent"}, model.CodeUnknownAgent},
		{"an unknown caller", model.TaskFilter{Caller: "no-such-agent"}, model.CodeUnknownAgent},
		{"an unknown target", model.TaskFilter{Target: "no-such-agent"}, model.CodeUnknownAgent},
		{"an unknown state", model.TaskFilter{State: "running"}, model.CodeInvalidArgs},
		{"a limit over the maximum", model.TaskFilter{Limit: model.MaxPageSize + 1}, model.CodeInvalidArgs},
		{"a negative limit", model.TaskFilter{Limit: -1}, model.CodeInvalidArgs},
		{"a cursor naming no task", model.TaskFilter{Before: sibling(ab.ID)}, model.CodeNotFound},
	} {
		_, err := op.Tasks(ctx, r.f)
		wantCode(t, "the operator lists tasks with "+r.what, err, r.code)
	}
	if got := list("the maximum page", model.TaskFilter{Limit: model.MaxPageSize}); len(got) != 3 {
		t.Errorf("a page of %d: %v", model.MaxPageSize, got)
	}
}

// ShowTask is any agent's task with its timeline (every transition and
// verdict, never null); a task that does not exist, or an id of another
// shape, is not_found, with the same answer apart from the id.
func operatorShowsATasksTimeline(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b := f.Agents[0], f.Agents[1]
	task := f.submit(t, a, model.SubmitRequest{Target: b, Prompt: "show me"})
	d := must[model.TaskDetail](t, "show")(f.Operator.ShowTask(ctx, task.ID))
	if d.ID != task.ID || d.Caller != a || d.Target != b || d.Prompt != "show me" || d.Events == nil || d.Verdicts == nil {
		t.Fatalf("show %s: %+v", task.ID, d)
	}
	missing := sibling(task.ID)
	_, errMissing := f.Operator.ShowTask(ctx, missing)
	wantCode(t, "show a task that does not exist", errMissing, model.CodeNotFound)
	_, errShape := f.Operator.ShowTask(ctx, "T-nope")
	wantCode(t, "show a malformed task id", errShape, model.CodeNotFound)
	if got, want := public(t, errShape, "T-nope"), public(t, errMissing, missing); got != want {
		t.Errorf("a malformed id answers\n  %s\nbut a well-formed one that names nothing\n  %s", got, want)
	}
}

// The operator cancels any agent's non-terminal task: canceled_by_operator,
// seen so by its submitter and its target, on record as the operator's
// (the task's timeline and the audit log, whose chain still verifies); a
// second cancel is task_not_cancelable, a task that does not exist
// not_found.
func operatorCancelsAnyTask(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b := f.Agents[0], f.Agents[1]
	task := f.submit(t, a, model.SubmitRequest{Target: b})
	before := f.auditRows(t)
	got, err := f.Operator.CancelTaskAsOperator(ctx, task.ID)
	if err != nil || got.ID != task.ID || got.State != model.StateCanceled || got.Code != model.CodeCanceledByOperator {
		t.Fatalf("the operator cancels: %+v, %v", got, err)
	}
	for _, who := range []string{a, b} {
		if seen := must[model.Task](t, who+" gets")(f.As(who).GetTask(ctx, who, task.ID)); seen.State != model.StateCanceled || seen.Code != model.CodeCanceledByOperator {
			t.Errorf("%s sees %s %s, want canceled by the operator", who, seen.State, seen.Code)
		}
	}
	d := must[model.TaskDetail](t, "show")(f.Operator.ShowTask(ctx, task.ID))
	if len(d.Events) == 0 {
		t.Fatalf("a canceled task with no events: %+v", d)
	}
	if last := d.Events[len(d.Events)-1]; last.To != model.StateCanceled || last.Trigger != model.TriggerCancel ||
		last.Code != model.CodeCanceledByOperator || last.Actor != "operator" {
		t.Errorf("the cancel is on record as %+v; want a cancel to canceled by the operator", last)
	}
	if after := f.auditRows(t); after <= before {
		t.Errorf("the operator's cancel left the audit log at %d rows (was %d)", after, before)
	}
	_, err = f.Operator.CancelTaskAsOperator(ctx, task.ID)
	wantCode(t, "a second cancel", err, model.CodeTaskNotCancelable)
	if model.Public(err).Hint == "" {
		t.Error("task_not_cancelable without a hint")
	}
	_, err = f.Operator.CancelTaskAsOperator(ctx, sibling(task.ID))
	wantCode(t, "cancel a task that does not exist", err, model.CodeNotFound)
	_, err = f.Operator.CancelTaskAsOperator(ctx, "T-nope")
	wantCode(t, "cancel a malformed task id", err, model.CodeNotFound)
}

// The operator sees every agent's messages, newest first, filtered by
// recipient, sender and unread, in pages of DefaultPageSize unless it
// asks for another size; listing marks nothing read.
func operatorListsEveryMessage(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	ab := f.send(t, a, b, "one")
	bc := f.send(t, b, c, "two")
	ca := f.send(t, c, a, "three")
	op := f.Operator
	list := func(what string, mf model.MessageFilter) []string {
		t.Helper()
		return messageIDs(must[[]model.Message](t, what)(op.Messages(ctx, mf)))
	}
	f.inbox(t, b) // b reads ab
	for _, w := range []struct {
		what string
		f    model.MessageFilter
		want []string
	}{
		{"every message", model.MessageFilter{}, []string{ca.ID, bc.ID, ab.ID}},
		{"to " + b, model.MessageFilter{To: b}, []string{ab.ID}},
		{"from " + b, model.MessageFilter{From: b}, []string{bc.ID}},
		{"from " + a + " to " + c, model.MessageFilter{From: a, To: c}, []string{}},
		{"unread", model.MessageFilter{UnreadOnly: true}, []string{ca.ID, bc.ID}},
		{"a page of one", model.MessageFilter{Limit: 1}, []string{ca.ID}},
		{"a page of one before the newest", model.MessageFilter{Limit: 1, Before: ca.ID}, []string{bc.ID}},
		{"before the oldest", model.MessageFilter{Before: ab.ID}, []string{}},
	} {
		if got := list(w.what, w.f); !slices.Equal(got, w.want) {
			t.Errorf("the operator lists %s: %v, want %v", w.what, got, w.want)
		}
	}
	if in := must[model.Inbox](t, "unread inbox")(f.As(c).CheckInbox(ctx, c, true, 0)); len(in.Messages) != 1 || in.Messages[0].ID != bc.ID {
		t.Errorf("after the operator's listings %s's unread inbox holds %v, want %s", c, messageIDs(in.Messages), bc.ID)
	}
	for _, r := range []struct {
		what string
		f    model.MessageFilter
		code model.Code
	}{
		{"an unknown recipient", model.MessageFilter{To: "no-such-agent"}, model.CodeUnknownAgent},
		{"an unknown sender", model.MessageFilter{From: "no-such-agent"}, model.CodeUnknownAgent},
		{"a limit over the maximum", model.MessageFilter{Limit: model.MaxPageSize + 1}, model.CodeInvalidArgs},
		{"a negative limit", model.MessageFilter{Limit: -1}, model.CodeInvalidArgs},
	} {
		_, err := op.Messages(ctx, r.f)
		wantCode(t, "the operator lists messages with "+r.what, err, r.code)
	}
	// The default page.
	for i := range model.DefaultPageSize {
		f.send(t, a, c, fmt.Sprint("bulk ", i))
	}
	if got := list("the default page", model.MessageFilter{}); len(got) != model.DefaultPageSize {
		t.Errorf("the default page holds %d messages, want %d", len(got), model.DefaultPageSize)
	}
	if got := list("a larger page", model.MessageFilter{Limit: model.DefaultPageSize + 3}); len(got) != model.DefaultPageSize+3 {
		t.Errorf("a page of %d holds %d messages", model.DefaultPageSize+3, len(got))
	}
}

// The operator's agents are the agents' list_agents, every fixture agent
// among them.
func operatorAgents(t *testing.T, f Fixture) {
	ctx := context.Background()
	names := func(as []model.AgentInfo) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Name)
		}
		return out
	}
	op := names(must[[]model.AgentInfo](t, "agents")(f.Operator.Agents(ctx)))
	ag := names(must[[]model.AgentInfo](t, "list agents")(f.As(f.Agents[0]).ListAgents(ctx)))
	if !slices.Equal(op, ag) {
		t.Errorf("the operator's agents %v, an agent's %v", op, ag)
	}
	for _, n := range f.Agents {
		if !slices.Contains(op, n) {
			t.Errorf("the operator's agents lack %s: %v", n, op)
		}
	}
}

// A probe or a verification of a known agent is an answer about that
// agent, even when it fails; of a name no agent has, unknown_agent.
func probeAndVerifyKnownAgentsOnly(t *testing.T, f Fixture) {
	ctx := context.Background()
	for _, n := range f.Agents {
		info, err := f.Operator.ProbeAgent(ctx, n, 5*time.Second)
		if err != nil || info.Name != n {
			t.Errorf("probe %s: %+v, %v; want an answer about %s", n, info, err, n)
		}
		v, err := f.Operator.VerifyAgent(ctx, n, 5*time.Second)
		if err != nil || v.Agent != n || v.Status == "" {
			t.Errorf("verify %s: %+v, %v; want a report on %s", n, v, err, n)
		}
	}
	_, err := f.Operator.ProbeAgent(ctx, "no-such-agent", 5*time.Second)
	wantCode(t, "probe an unknown agent", err, model.CodeUnknownAgent)
	_, err = f.Operator.VerifyAgent(ctx, "no-such-agent", 5*time.Second)
	wantCode(t, "verify an unknown agent", err, model.CodeUnknownAgent)
}

// A follower (relay tasks watch) starts from now, is woken by the next
// commit (well under the service's 2 s safety net), reads a task's
// history, and follows it to its end, each event after its cursor.
func watchFollowsATask(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b := f.Agents[0], f.Agents[1]
	start := must[model.EventBatch](t, "watch from now")(f.Operator.WatchEvents(ctx, model.EventFilter{After: model.AfterNow}))
	if len(start.Events) != 0 || start.Cursor < 0 {
		t.Fatalf("from now: %+v; want no event and the log's head", start)
	}
	type answer struct {
		b   model.EventBatch
		err error
		at  time.Time
	}
	got := make(chan answer, 1)
	go func() {
		b, err := f.Operator.WatchEvents(ctx, model.EventFilter{After: start.Cursor, Wait: 20 * time.Second})
		got <- answer{b, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the poll is waiting
	task := f.submit(t, a, model.SubmitRequest{Target: b})
	submitted := time.Now()
	var first answer
	select {
	case first = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the poll did not answer within 20 s of a submission")
	}
	if first.err != nil || len(first.b.Events) == 0 {
		t.Fatalf("the poll: %+v, %v", first.b, first.err)
	}
	if ev := first.b.Events[0]; ev.Kind != model.WatchSubmitted || ev.TaskID != task.ID || ev.Seq <= start.Cursor {
		t.Fatalf("first event %+v, want the submission of %s after cursor %d", ev, task.ID, start.Cursor)
	}
	if lag := first.at.Sub(submitted); lag > time.Second {
		t.Errorf("the poll answered %s after the commit: not woken by it", lag)
	}

	h := must[model.EventBatch](t, "history")(f.Operator.WatchEvents(ctx, model.EventFilter{TaskID: task.ID, After: model.AfterNow}))
	if h.Task == nil || h.Task.ID != task.ID || len(h.Events) == 0 || h.Events[0].Kind != model.WatchSubmitted || h.Cursor < first.b.Events[0].Seq {
		t.Fatalf("the history of %s: %+v (task %+v)", task.ID, h.Events, h.Task)
	}
	must[model.Task](t, "cancel")(f.Operator.CancelTaskAsOperator(ctx, task.ID))
	cursor := h.Cursor
	deadline := time.Now().Add(30 * time.Second)
	for end := false; !end; {
		if time.Now().After(deadline) {
			t.Fatalf("no terminal event of %s after cursor %d", task.ID, h.Cursor)
		}
		next := must[model.EventBatch](t, "follow")(f.Operator.WatchEvents(ctx, model.EventFilter{TaskID: task.ID, After: cursor, Wait: 5 * time.Second}))
		for _, ev := range next.Events {
			if ev.Seq <= cursor || ev.TaskID != task.ID {
				t.Fatalf("event %+v at or before the cursor %d, or of another task", ev, cursor)
			}
			cursor = ev.Seq
			if ev.Terminal() {
				end = true
				if ev.To != model.StateCanceled || ev.Code != model.CodeCanceledByOperator || ev.Actor != "operator" {
					t.Errorf("the end is %+v; want canceled by the operator", ev)
				}
			}
		}
		cursor = max(cursor, next.Cursor)
	}
}

// What a watch refuses: a task that does not exist (from now or after a
// cursor), a cursor that is none, a wait over model.MaxWatchWait.
func watchRefusals(t *testing.T, f Fixture) {
	ctx := context.Background()
	task := f.submit(t, f.Agents[0], model.SubmitRequest{})
	for _, c := range []struct {
		what string
		f    model.EventFilter
		code model.Code
	}{
		{"a task that does not exist, from now", model.EventFilter{TaskID: sibling(task.ID), After: model.AfterNow}, model.CodeNotFound},
		{"a task that does not exist, after 0", model.EventFilter{TaskID: sibling(task.ID)}, model.CodeNotFound},
		{"a malformed task id", model.EventFilter{TaskID: "nonsense"}, model.CodeNotFound},
		{"a cursor that is none", model.EventFilter{After: -2}, model.CodeInvalidArgs},
		{"a wait over the bound", model.EventFilter{Wait: model.MaxWatchWait + time.Second}, model.CodeInvalidArgs},
	} {
		_, err := f.Operator.WatchEvents(ctx, c.f)
		wantCode(t, "a watch of "+c.what, err, c.code)
		if model.Public(err).Hint == "" {
			t.Errorf("a watch of %s: %v has no hint", c.what, err)
		}
	}
}
