package persistence

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// benchTransitions measures one committed transition: the compare-and-set
// update with its event row, audit row and audit_head update, in one
// transaction. Tasks are created outside the timer; each is moved
// submitted → authorized once.
func benchTransitions(b *testing.B, sync string, verdicts int) {
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{Synchronous: sync})
	vs := make([]model.Verdict, verdicts)
	for i := range vs {
		vs[i] = model.Verdict{Gate: model.AllGates()[i%4], Passed: true}
	}
	// Create in batches, out of the timed region (and of the CPU count).
	const batch = 2000
	i := 0
	var cpu, mark time.Duration
	for b.Loop() {
		if i%batch == 0 {
			b.StopTimer()
			if i > 0 {
				cpu += cpuTime() - mark
			}
			for j := i; j < i+batch; j++ {
				if _, _, err := db.CreateTask(ctx, newTask(seqID("T", j))); err != nil {
					b.Fatal(err)
				}
			}
			mark = cpuTime()
			b.StartTimer()
		}
		if _, err := db.Transition(ctx, model.Transition{TaskID: seqID("T", i), From: model.StateSubmitted,
			To: model.StateAuthorized, Trigger: model.TriggerAuthorize, Actor: "relay", Verdicts: vs}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu += cpuTime() - mark
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

func BenchmarkTransitionNormal(b *testing.B)          { benchTransitions(b, SyncNormal, 0) }
func BenchmarkTransitionFull(b *testing.B)            { benchTransitions(b, SyncFull, 0) }
func BenchmarkTransitionNormal4Verdicts(b *testing.B) { benchTransitions(b, SyncNormal, 4) }

func BenchmarkCreateMessage(b *testing.B) {
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{})
	i := 0
	start := cpuTime()
	for b.Loop() {
		if _, err := db.CreateMessage(ctx, model.Message{ID: seqID("m", i), From: "codex", To: "claude",
			Body: "a short passive message of about sixty-four bytes, give or take."}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "messages/s")
	reportCPU(b, start)
}

func BenchmarkGetTask(b *testing.B) {
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{})
	mustCreate(b, db, newTask("T-1"))
	start := cpuTime()
	for b.Loop() {
		if _, err := db.GetTask(ctx, "T-1"); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

// benchSeeded opens a database seeded with messages and tasks, once per
// benchmark.
func benchSeeded(b *testing.B, messages, tasks int) *DB {
	b.Helper()
	db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{})
	if err := db.Seed(context.Background(), SeedOptions{Messages: messages, Tasks: tasks}); err != nil {
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
	start := cpuTime()
	for b.Loop() {
		ts, err := db.ListTasks(ctx, model.TaskFilter{Visible: agents[i%len(agents)], Limit: 50})
		if err != nil || len(ts) != 50 {
			b.Fatal(len(ts), err)
		}
		i++
	}
	reportCPU(b, start)
}

// BenchmarkShowTask: a task with its events and verdicts, as relay tasks
// show reads it, on 20,000 tasks.
func BenchmarkShowTask(b *testing.B) {
	ctx := context.Background()
	db := benchSeeded(b, 0, 20000)
	i := 0
	start := cpuTime()
	for b.Loop() {
		id := SeedTaskID(int64(1 + (i*7919)%20000))
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
	reportCPU(b, start)
}

// BenchmarkInboxPoll: check_inbox with nothing unread (the common poll),
// answered from a read snapshot, on 100,000 messages.
func BenchmarkInboxPoll(b *testing.B) {
	ctx := context.Background()
	db := benchSeeded(b, 100000, 0)
	agents := model.CoreAgents()
	for _, a := range agents { // read everything first
		for {
			ms, _, err := db.Inbox(ctx, a, true, MaxLimit)
			if err != nil {
				b.Fatal(err)
			}
			if len(ms) == 0 {
				break
			}
		}
	}
	i := 0
	start := cpuTime()
	for b.Loop() {
		if _, _, err := db.Inbox(ctx, agents[i%len(agents)], true, 50); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportCPU(b, start)
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
	if err := db.Seed(ctx, SeedOptions{Messages: 100000 + unread, Unread: unread}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		ms, _, err := db.Inbox(ctx, agents[i%len(agents)], true, 50)
		if err != nil || len(ms) != 50 {
			b.Fatal(len(ms), err)
		}
	}
	reportCPU(b, start)
}
