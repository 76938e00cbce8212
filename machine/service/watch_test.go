package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/hai-relay/relay/cmd/daemontest"
	"github.com/hai-relay/relay/model"
)

// A long poll is woken by the commit itself (Engine.Changed), not by its
// 2 s re-read: a submission made while it waits is answered at once, and
// the next polls bring the verdicts and the transition in commit order.
func TestWatchEventsWakesOnCommit(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	ctx := context.Background()
	start, err := r.Service.WatchEvents(ctx, model.EventFilter{After: model.AfterNow})
	if err != nil || len(start.Events) != 0 {
		t.Fatalf("from now: %+v, %v; want no event", start, err)
	}
	type answer struct {
		b   model.EventBatch
		err error
		at  time.Time
	}
	got := make(chan answer, 1)
	go func() {
		b, err := r.Service.WatchEvents(ctx, model.EventFilter{After: start.Cursor, Wait: 20 * time.Second})
		got <- answer{b, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the poll is waiting
	task, err := r.Service.SubmitTask(ctx, "codex", model.SubmitRequest{Target: "claude", Prompt: "p", Cwd: r.Cwd, MissionID: "M-w", LeaseID: "S-w"})
	if err != nil {
		t.Fatal(err)
	}
	submitted := time.Now()
	a := <-got
	if a.err != nil || len(a.b.Events) == 0 {
		t.Fatalf("poll: %+v, %v", a.b, a.err)
	}
	if ev := a.b.Events[0]; ev.Kind != model.WatchSubmitted || ev.TaskID != task.ID || ev.Seq <= start.Cursor {
		t.Fatalf("first event %+v, want the submission of %s after cursor %d", ev, task.ID, start.Cursor)
	}
	if d := a.at.Sub(submitted); d > time.Second {
		t.Errorf("the poll answered %v after the commit: not woken by it", d)
	}

	// Follow to authorized (the rig's dispatcher starts nothing).
	cursor, seen := a.b.Cursor, a.b.Events
	deadline := time.Now().Add(30 * time.Second)
	for seen[len(seen)-1].To != model.StateAuthorized {
		if time.Now().After(deadline) {
			t.Fatalf("no authorized event; seen %+v", seen)
		}
		b, err := r.Service.WatchEvents(ctx, model.EventFilter{TaskID: task.ID, After: cursor, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range b.Events {
			if ev.Seq <= cursor {
				t.Fatalf("event %+v at or before the cursor %d", ev, cursor)
			}
			cursor = ev.Seq
		}
		seen, cursor = append(seen, b.Events...), b.Cursor
	}
	verdicts := 0
	for _, ev := range seen[1 : len(seen)-1] {
		if ev.Kind != model.WatchVerdict || ev.Passed == nil || !*ev.Passed {
			t.Errorf("between the submission and authorized: %+v, want passed verdicts", ev)
		}
		verdicts++
	}
	if verdicts == 0 {
		t.Error("no verdict before authorized")
	}

	// The history, read from now, is the same sequence without cursors,
	// and ends where the log is.
	h, err := r.Service.WatchEvents(ctx, model.EventFilter{TaskID: task.ID, After: model.AfterNow})
	if err != nil {
		t.Fatal(err)
	}
	if h.Task == nil || h.Task.State != model.StateAuthorized || len(h.Events) != len(seen) || h.Cursor != cursor {
		t.Fatalf("history %+v (task %+v), want %d events to cursor %d", h.Events, h.Task, len(seen), cursor)
	}
	for i := range seen {
		if h.Events[i].Kind != seen[i].Kind || h.Events[i].To != seen[i].To || h.Events[i].Gate != seen[i].Gate {
			t.Errorf("history event %d is %+v, followed it was %+v", i, h.Events[i], seen[i])
		}
	}
	// Nothing after the cursor: a poll without wait answers empty at once.
	if b, err := r.Service.WatchEvents(ctx, model.EventFilter{TaskID: task.ID, After: cursor}); err != nil || len(b.Events) != 0 || b.Cursor != cursor {
		t.Fatalf("after the last event: %+v, %v", b, err)
	}
}

// What a watch refuses, and a wait that ends with its context.
func TestWatchEventsArguments(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		f    model.EventFilter
		code model.Code
	}{
		{model.EventFilter{TaskID: "T-00000000000000000000000000", After: model.AfterNow}, model.CodeNotFound},
		{model.EventFilter{TaskID: "nonsense", After: 0}, model.CodeNotFound},
		{model.EventFilter{After: -2}, model.CodeInvalidArgs},
		{model.EventFilter{After: 0, Wait: model.MaxWatchWait + time.Second}, model.CodeInvalidArgs},
	} {
		if _, err := r.Service.WatchEvents(ctx, c.f); model.ErrorCode(err) != c.code {
			t.Errorf("%+v: %v, want %s", c.f, err, c.code)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	b, err := r.Service.WatchEvents(cctx, model.EventFilter{After: 0, Wait: 20 * time.Second})
	if err != nil || len(b.Events) != 0 || time.Since(t0) > 5*time.Second {
		t.Fatalf("a wait whose context ends: %+v, %v after %v; want an empty answer at once", b, err, time.Since(t0))
	}
}
