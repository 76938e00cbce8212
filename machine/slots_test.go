package machine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

// states lists the tasks' states, in order, as "a,b,c".
func states(t *testing.T, r *rig, tasks ...model.Task) string {
	t.Helper()
	var s []string
	for _, task := range tasks {
		got, err := r.eng.Get(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		s = append(s, string(got.State))
	}
	return strings.Join(s, ",")
}

// One caller cannot hold every dispatch slot: with three slots and the
// default share (all but one), codex's tasks take two and wait for the
// rest, while gemini's first task takes the third at once. A freed slot
// goes to the oldest waiting task whose caller is under its share, so
// among such callers the order is the submission order, and a caller at
// its share is passed over, not served.
func TestDispatchShareLeavesSlotsForOtherCallers(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, MaxDispatch: 3})
	ctx := context.Background()
	var codex []model.Task
	for range 4 {
		codex = append(codex, r.submit(t, model.SubmitRequest{}))
	}
	settle(t, r.eng, codex[0].ID)
	settle(t, r.eng, codex[1].ID)
	if got := states(t, r, codex...); got != "authorized,authorized,submitted,submitted" {
		t.Fatalf("codex's tasks: %s, want two authorized and two waiting (its share is 2 of 3)", got)
	}
	g1 := settle(t, r.eng, r.submitAs(t, "gemini", model.SubmitRequest{}).ID)
	if g1.State != model.StateAuthorized {
		t.Fatalf("gemini's task is %s while codex waits at its share; want the free slot", g1.State)
	}
	g2 := r.submitAs(t, "gemini", model.SubmitRequest{})
	if held, waiting := r.eng.Slots(); held != 3 || waiting != 3 {
		t.Fatalf("slots held=%d waiting=%d, want 3 and 3", held, waiting)
	}

	// codex's first task ends: codex is under its share again, and its
	// oldest waiting task is older than gemini's.
	if _, err := r.eng.Cancel(ctx, codex[0].ID, model.CodeCanceledBySubmitter, "codex"); err != nil {
		t.Fatal(err)
	}
	settle(t, r.eng, codex[2].ID)
	if got := states(t, r, append(codex, g1, g2)...); got != "canceled,authorized,authorized,submitted,authorized,submitted" {
		t.Fatalf("after codex's first task: %s", got)
	}
	// gemini's task ends: the oldest waiting task is codex's fourth, but
	// codex holds its share, so gemini's second gets the slot.
	if _, err := r.eng.Cancel(ctx, g1.ID, model.CodeCanceledBySubmitter, "gemini"); err != nil {
		t.Fatal(err)
	}
	settle(t, r.eng, g2.ID)
	if got := states(t, r, append(codex, g1, g2)...); got != "canceled,authorized,authorized,submitted,canceled,authorized" {
		t.Fatalf("after gemini's first task: %s", got)
	}
	// One dispatch per authorized task (each runs on entry to
	// authorized, just after the state is stored).
	eventually(t, "five dispatches", func() bool { return r.disp.total() == 5 })
	for _, task := range append(codex, g1, g2) {
		if n := r.disp.count(task.ID); n > 1 {
			t.Fatalf("task %s dispatched %d times", task.ID, n)
		}
	}
}

// A freed slot is handed to the waiting task before the release returns:
// a task submitted right after cannot take it, and waits behind.
func TestFreedSlotIsHandedToTheOldestWaitingTask(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, MaxDispatch: 1})
	ctx := context.Background()
	for i := range 20 {
		first := r.submitSettled(t, model.SubmitRequest{Prompt: fmt.Sprint("first ", i)})
		waiting := r.submitAs(t, "gemini", model.SubmitRequest{Prompt: fmt.Sprint("waiting ", i)})
		if _, err := r.eng.Cancel(ctx, first.ID, model.CodeCanceledBySubmitter, "codex"); err != nil {
			t.Fatal(err)
		}
		late := r.submitAs(t, "opencode", model.SubmitRequest{Prompt: fmt.Sprint("late ", i)})
		settle(t, r.eng, waiting.ID)
		if got := states(t, r, first, waiting, late); got != "canceled,authorized,submitted" {
			t.Fatalf("round %d: %s, want the waiting task authorized and the late one waiting", i, got)
		}
		// Clear the slot for the next round.
		if _, err := r.eng.Cancel(ctx, late.ID, model.CodeCanceledBySubmitter, "opencode"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.Cancel(ctx, waiting.ID, model.CodeCanceledBySubmitter, "gemini"); err != nil {
			t.Fatal(err)
		}
		if held, queued := r.eng.Slots(); held != 0 || queued != 0 {
			t.Fatalf("round %d: slots held=%d waiting=%d after every task ended, want 0 and 0", i, held, queued)
		}
	}
}

// A share larger than the global limit is the global limit; a share of
// one serves one task per caller at a time, whatever the limit.
func TestDispatchShareOfOne(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, MaxDispatch: 4, MaxDispatchPerCaller: 1})
	a := r.submitSettled(t, model.SubmitRequest{})
	b := r.submit(t, model.SubmitRequest{})
	c := settle(t, r.eng, r.submitAs(t, "gemini", model.SubmitRequest{}).ID)
	if got := states(t, r, a, b, c); got != "authorized,submitted,authorized" {
		t.Fatalf("states %s, want codex's second task waiting for codex's slot", got)
	}
	if got := machine.DefaultMaxDispatchPerCaller(4); got != 3 {
		t.Errorf("default share of 4 slots = %d, want 3", got)
	}
	if got := machine.DefaultMaxDispatchPerCaller(1); got != 1 {
		t.Errorf("default share of 1 slot = %d, want 1", got)
	}
}
