package persistence_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// TestSeed checks the benchmarks' seeder (persistencetest.Seed) against
// the store it fills through DB.Import.
func TestSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := persistencetest.MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), persistence.Options{Synchronous: persistence.SyncNormal})
	persistence.MustCreate(t, db, persistence.NewTask("T-real"))
	if err := persistencetest.Seed(ctx, db, persistencetest.SeedOptions{Messages: 2000, Tasks: 300, Chunk: 700}); err != nil {
		t.Fatal(err)
	}
	// Grow it again: ids and seqs continue.
	if err := persistencetest.Seed(ctx, db, persistencetest.SeedOptions{Messages: 100, Tasks: 10}); err != nil {
		t.Fatal(err)
	}
	count := func(table, where string) int { return persistence.CountRows(t, db, table, where) }
	if n := count("messages", ""); n != 2100 {
		t.Errorf("messages = %d", n)
	}
	if n := count("tasks", ""); n != 311 {
		t.Errorf("tasks = %d", n)
	}
	if n := count("messages", "from_agent = to_agent"); n != 0 {
		t.Errorf("%d messages to their sender", n)
	}
	if n := count("messages", "state = 'stored'"); n != 20+1 {
		t.Errorf("unread = %d, want 21 (1%% of each seed)", n)
	}
	if n := count("tasks", "state IN ('submitted', 'authorized', 'working')"); n != 1 {
		t.Errorf("non-terminal tasks = %d, want only T-real", n)
	}
	if n := count("task_events", ""); n != 270*3+30*1+9*3+1*1 {
		t.Errorf("events = %d", n)
	}
	if _, err := db.GetTask(ctx, persistencetest.SeedTaskID(310)); err != nil {
		t.Errorf("the second seed's last task: %v", err)
	}
	if _, err := db.GetMessage(ctx, persistencetest.SeedMessageID(2100)); err != nil {
		t.Errorf("the second seed's last message: %v", err)
	}
	persistence.VerifyOK(t, db, 1+2000+300+100+10)

	ts, err := db.ListTasks(ctx, model.TaskFilter{Visible: "claude", Limit: 5})
	if err != nil || len(ts) != 5 {
		t.Fatalf("ListTasks = %d, %v", len(ts), err)
	}
	evs, err := db.TaskEvents(ctx, ts[0].ID)
	if err != nil || len(evs) == 0 {
		t.Fatalf("TaskEvents(%s) = %v, %v", ts[0].ID, evs, err)
	}
	ms, unread, err := db.Inbox(ctx, "claude", true, 50)
	if err != nil || len(ms) == 0 || unread < 0 {
		t.Fatalf("Inbox = %d, %d, %v", len(ms), unread, err)
	}
}
