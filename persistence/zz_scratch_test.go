package persistence

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hai-relay/relay/model"
)

func benchStep(b *testing.B, level int) {
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{})
	for j := 0; j < b.N; j++ {
		if _, _, err := db.CreateTask(ctx, newTask(seqID("T", j))); err != nil {
			b.Fatal(err)
		}
	}
	start := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := seqID("T", i)
		err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
			if level == 0 {
				return nil
			}
			if level == 1 {
				_, err := w.ExecContext(ctx, `UPDATE tasks SET state = ?, code = ?, message = ?, updated_at = ? WHERE id = ? AND state = ?`,
					"authorized", "", "", "2026", id, "submitted")
				return err
			}
			got, err := db.queryTasks(ctx, w, qTransition, "authorized", "", "", "2026-01-01T00:00:00Z", id, "submitted")
			if err != nil || len(got) != 1 {
				b.Fatal(err)
			}
			if level == 2 {
				return nil
			}
			if _, err := w.ExecContext(ctx, qEventInsert, id, "submitted", "authorized", "authorize", "", "", "", "2026-01-01T00:00:00Z"); err != nil {
				return err
			}
			if level == 3 {
				return nil
			}
			return w.audit(ctx, model.AuditEvent{At: t0, Kind: "task.transition", TaskID: id,
				Data: map[string]string{"from": "submitted", "to": "authorized", "trigger": "authorize", "code": "", "message": ""}})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

func BenchmarkScratch0Empty(b *testing.B)     { benchStep(b, 0) }
func BenchmarkScratch1Update(b *testing.B)    { benchStep(b, 1) }
func BenchmarkScratch2Returning(b *testing.B) { benchStep(b, 2) }
func BenchmarkScratch3Event(b *testing.B)     { benchStep(b, 3) }
func BenchmarkScratch4Audit(b *testing.B)     { benchStep(b, 4) }
