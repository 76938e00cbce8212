package persistence_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// Benchmarks on stores seeded with months of history by
// persistencetest.Seed (through DB.Import), an external test package
// because this package's internal tests cannot import persistencetest.

// benchSeeded opens a database seeded with messages and tasks, once per
// benchmark.
func benchSeeded(b *testing.B, messages, tasks int) *persistence.DB {
	b.Helper()
	db := persistencetest.MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), persistence.Options{})
	if err := persistencetest.Seed(context.Background(), db, persistencetest.SeedOptions{Messages: messages, Tasks: tasks}); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkListTasksVisible: an agent's list_tasks page (50, newest
// first, caller or target) on 20,000 tasks.
func BenchmarkListTasksVisible(b *testing.B) {
	ctx := context.Background()
	db := benchSeeded(b, 0, 20000)
	agents := model.CoreAgents()
	i := 0
	start := persistence.CPUTime()
	for b.Loop() {
		ts, err := db.ListTasks(ctx, model.TaskFilter{Visible: agents[i%len(agents)], Limit: 50})
		if err != nil || len(ts) != 50 {
			b.Fatal(len(ts), err)
		}
		i++
	}
	persistence.ReportCPU(b, start)
}

// BenchmarkShowTask: a task with its events and verdicts, as relay tasks
// show reads it, on 20,000 tasks.
func BenchmarkShowTask(b *testing.B) {
	ctx := context.Background()
	db := benchSeeded(b, 0, 20000)
	i := 0
	start := persistence.CPUTime()
	for b.Loop() {
		id := persistencetest.SeedTaskID(int64(1 + (i*7919)%20000))
		if _, err := db.GetTask(ctx, id); err != nil {
			b.Fatal(err)
		}
		if _, err := db.TaskEvents(ctx, id); err != nil {
			b.Fatal(err)
		}
		if _, err := db.TaskVerdicts(ctx, id); err != nil {
			b.Fatal(err)
		}
		i++
	}
	persistence.ReportCPU(b, start)
}

// BenchmarkInboxPoll: check_inbox with nothing unread (the common poll),
// answered from a read snapshot, on 100,000 messages.
func BenchmarkInboxPoll(b *testing.B) {
	ctx := context.Background()
	db := benchSeeded(b, 100000, 0)
	agents := model.CoreAgents()
	for _, a := range agents { // read everything first
		for {
			ms, _, err := db.Inbox(ctx, a, true, model.MaxPageSize)
			if err != nil {
				b.Fatal(err)
			}
			if len(ms) == 0 {
				break
			}
		}
	}
	i := 0
	start := persistence.CPUTime()
	for b.Loop() {
		if _, _, err := db.Inbox(ctx, agents[i%len(agents)], true, 50); err != nil {
			b.Fatal(err)
		}
		i++
	}
	persistence.ReportCPU(b, start)
}

// BenchmarkInboxRead50: check_inbox's default call when 50 or more
// messages are unread: the page is read, its 50 messages marked read with
// 50 audit rows, in one write (FULL), on 100,000+ messages.
func BenchmarkInboxRead50(b *testing.B) {
	ctx := context.Background()
	db := benchSeeded(b, 0, 0)
	agents := model.CoreAgents()
	// Enough unread for every call: 50 per call, the calls spread over
	// the agents (the seed's recipients go round them too).
	unread := 50 * (b.N + len(agents)) * 2
	if err := persistencetest.Seed(ctx, db, persistencetest.SeedOptions{Messages: 100000 + unread, Unread: unread}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := persistence.CPUTime()
	for i := 0; i < b.N; i++ {
		ms, _, err := db.Inbox(ctx, agents[i%len(agents)], true, 50)
		if err != nil || len(ms) != 50 {
			b.Fatal(len(ms), err)
		}
	}
	persistence.ReportCPU(b, start)
}
