package persistence_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
)

// Concurrent write benchmarks (an external test package: the floor is
// persistencetest's, which this package's internal tests cannot import): writers goroutines call the store at once,
// as the daemon's request handlers do, so the writer can group their
// commits. Each reports its rate next to a floor measured in the same run:
//
//	go test -run '^$' -bench Concurrent -benchtime 3000x ./persistence

// writers is how many goroutines write at once (8 facades, as in the benchmark suite).
const writers = 8

// benchBody is a ~64-byte message body.
const benchBody = "a short passive message of about sixty-four bytes, give or take."

// runConcurrent runs op(i) for i in [0, n) from writers goroutines and
// returns each call's latency.
func runConcurrent(b *testing.B, n int, op func(i int) error) []time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	lat := make([]time.Duration, n)
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return lat
}

// reportLatency reports the p50 and p99 of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	s := slices.Clone(lat)
	slices.Sort(s)
	q := func(f float64) float64 {
		return float64(s[min(len(s)-1, int(math.Ceil(f*float64(len(s))))-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// floorInserts measures persistencetest.InsertFloor with n rows (at least 500, so the
// floor is not dominated by noise) and returns rows/s.
func floorInserts(b *testing.B, sync string, n int) float64 {
	b.Helper()
	n = max(n, 500)
	res, err := persistencetest.InsertFloor(context.Background(), filepath.Join(b.TempDir(), "floor.db"), sync, n, benchBody)
	if err != nil {
		b.Fatal(err)
	}
	return res.PerSecond()
}

// benchCreateMessageConcurrent: CreateMessage from 8 goroutines, against
// single-transaction inserts with the same synchronous mode.
func benchCreateMessageConcurrent(b *testing.B, sync string) {
	ctx := context.Background()
	// One recipient for every message: no quota (it would be full).
	db := persistencetest.MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), persistence.Options{Synchronous: sync,
		InboxMessages: persistence.NoLimit, InboxBytes: persistence.NoLimit})
	b.ResetTimer()
	start := persistence.CPUTime()
	lat := runConcurrent(b, b.N, func(i int) error {
		_, err := db.CreateMessage(ctx, model.Message{ID: persistence.SeqID("m", i), From: "codex", To: "claude", Body: benchBody})
		return err
	})
	b.StopTimer()
	cpu := persistence.CPUTime() - start
	rate := float64(b.N) / b.Elapsed().Seconds()
	floor := floorInserts(b, sync, b.N)
	reportBatch(b, db)
	reportLatency(b, lat)
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(floor, "floor-rows/s")
	b.ReportMetric(rate/floor, "ratio")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// reportBatch reports the mean group-commit size.
func reportBatch(b *testing.B, db *persistence.DB) {
	st := db.WriterStats()
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Requests)/float64(st.Batches), "reqs/batch")
	}
}

func BenchmarkConcurrentCreateMessageFull(b *testing.B) {
	benchCreateMessageConcurrent(b, persistence.SyncFull)
}

func BenchmarkConcurrentCreateMessageNormal(b *testing.B) {
	benchCreateMessageConcurrent(b, persistence.SyncNormal)
}

// benchTransitionsConcurrent: submitted → authorized transitions (CAS
// update, event row, audit row) from 8 goroutines, each on its own task.
func benchTransitionsConcurrent(b *testing.B, sync string) {
	ctx := context.Background()
	db := persistencetest.MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), persistence.Options{Synchronous: sync})
	runConcurrent(b, b.N, func(i int) error {
		_, _, err := db.CreateTask(ctx, persistence.NewTask(persistence.SeqID("T", i)))
		return err
	})
	b.ResetTimer()
	start := persistence.CPUTime()
	lat := runConcurrent(b, b.N, func(i int) error {
		_, err := db.Transition(ctx, model.Transition{TaskID: persistence.SeqID("T", i), From: model.StateSubmitted,
			To: model.StateAuthorized, Trigger: model.TriggerAuthorize, Actor: "relay"})
		return err
	})
	b.StopTimer()
	cpu := persistence.CPUTime() - start
	rate := float64(b.N) / b.Elapsed().Seconds()
	floor := floorInserts(b, sync, b.N)
	reportBatch(b, db)
	reportLatency(b, lat)
	b.ReportMetric(rate, "transitions/s")
	b.ReportMetric(floor, "floor-rows/s")
	b.ReportMetric(rate/floor, "ratio")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

func BenchmarkConcurrentTransitionFull(b *testing.B) {
	benchTransitionsConcurrent(b, persistence.SyncFull)
}

func BenchmarkConcurrentTransitionNormal(b *testing.B) {
	benchTransitionsConcurrent(b, persistence.SyncNormal)
}
