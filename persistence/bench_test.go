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
	// Every message goes to one recipient: with a quota it would be full
	// after DefaultInboxMessages. BenchmarkCreateMessageQuota checks it.
	benchCreateMessage(b, Options{InboxMessages: NoLimit, InboxBytes: NoLimit})
}

// BenchmarkCreateMessageQuota is BenchmarkCreateMessage with the inbox
// quota checked at every insert (a quota too large to be reached): the
// check's own cost.
func BenchmarkCreateMessageQuota(b *testing.B) {
	benchCreateMessage(b, Options{InboxMessages: 1 << 30, InboxBytes: 1 << 50})
}

// BenchmarkCreateMessageNoAutoVacuum is BenchmarkCreateMessage on a
// database made as the relay made them before auto_vacuum=INCREMENTAL
// (which keeps a pointer map up to date at every write): that pointer
// map's cost.
func BenchmarkCreateMessageNoAutoVacuum(b *testing.B) {
	path := filepath.Join(b.TempDir(), "relay.db")
	raw := rawOpen(b, path)
	mustExec(b, raw, "PRAGMA journal_mode = WAL")
	raw.Close()
	benchCreateMessageAt(b, path, Options{InboxMessages: NoLimit, InboxBytes: NoLimit})
}

func benchCreateMessage(b *testing.B, o Options) {
	benchCreateMessageAt(b, filepath.Join(b.TempDir(), "relay.db"), o)
}

func benchCreateMessageAt(b *testing.B, path string, o Options) {
	ctx := context.Background()
	db := MustOpen(b, path, o)
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
