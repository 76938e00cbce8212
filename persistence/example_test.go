package persistence_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
)

// Example opens a database, submits a task, moves it through a
// compare-and-set transition with its gate verdicts, and verifies the
// audit chain that recorded both.
func Example() {
	dir, err := os.MkdirTemp("", "relay-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	db, err := persistence.Open(ctx, filepath.Join(dir, "relay.db"), persistence.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	task, _, err := db.CreateTask(ctx, model.Task{ID: "T-1", Caller: "codex", Target: "claude",
		Prompt: "summarize README.md", CreatedAt: at})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.ID, task.State, task.Mode)

	task, err = db.Transition(ctx, model.Transition{
		TaskID: "T-1", From: model.StateSubmitted, To: model.StateRejected,
		Trigger: model.TriggerReject, Code: model.CodeMissingLeaseID, Actor: "relay",
		Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Code: model.CodeMissingLeaseID}},
		At:       at.Add(time.Second),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.State, task.Code)

	// The same write again loses the compare-and-set.
	_, err = db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateSubmitted,
		To: model.StateAuthorized, Trigger: model.TriggerAuthorize})
	fmt.Println(model.ErrorCode(err))

	rep, err := db.VerifyAudit(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.OK, rep.Rows)
	// Output:
	// T-1 submitted read_only
	// rejected missing_lease_id
	// stale_state
	// true 3
}

// ExampleDB_Inbox shows the passive message cycle: stored, read by the
// recipient's inbox, then acknowledged.
func ExampleDB_Inbox() {
	dir, err := os.MkdirTemp("", "relay-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	db, err := persistence.Open(ctx, filepath.Join(dir, "relay.db"), persistence.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	for _, id := range []string{"m-1", "m-2"} {
		if _, err := db.CreateMessage(ctx, model.Message{ID: id, From: "codex", To: "claude", Body: "ping"}); err != nil {
			log.Fatal(err)
		}
	}
	msgs, unread, err := db.Inbox(ctx, "claude", true, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(msgs[0].ID, msgs[0].State, "unread left:", unread)

	n, err := db.Ack(ctx, "claude", []string{"m-1", "m-2"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acked:", n)
	// Output:
	// m-1 read unread left: 1
	// acked: 2
}
