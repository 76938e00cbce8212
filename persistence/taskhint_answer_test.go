package persistence

import (
	"context"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// A task listing keeps room for the hint of every task with a code, which
// the service fills in after the page is cut (spec.TaskHint, at most
// model.MaxTaskHintBytes as JSON): with every hint at its bound, the page
// is still within the answer bound.
func TestTaskListingsReserveTheHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const bound = 16 << 10
	db := MustOpen(t, t.TempDir()+"/relay.db", Options{AnswerBytes: bound})
	for i := range 12 {
		task := newTask(seqID("t", i))
		task.Prompt = strings.Repeat("p", 1000)
		task.Caller, task.Target = "codex", "claude"
		mustCreate(t, db, task)
		if _, err := db.Transition(ctx, model.Transition{TaskID: task.ID, From: model.StateSubmitted, To: model.StateRejected,
			Trigger: model.TriggerReject, Code: model.CodeMissingMissionID, Message: "the task has no mission ID"}); err != nil {
			t.Fatal(err)
		}
	}
	seen := 0
	for before := ""; ; {
		ts, err := db.ListTasks(ctx, model.TaskFilter{Limit: 1000, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 0 {
			break
		}
		for i := range ts {
			ts[i].Hint = strings.Repeat("h", model.MaxTaskHintBytes-2) // the quotes make the bound
		}
		if n := answerLen(t, map[string]any{"tasks": ts}); n > bound {
			t.Errorf("a page of %d tasks, their hints filled, encodes to %d bytes, over %d", len(ts), n, bound)
		}
		seen += len(ts)
		before = ts[len(ts)-1].ID
	}
	if seen != 12 {
		t.Errorf("%d tasks listed, want 12", seen)
	}
}
