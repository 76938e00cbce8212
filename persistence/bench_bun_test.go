package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// The store reads tasks and messages with database/sql's rows.Scan into
// the models' fields (scanner), and builds its listing queries itself,
// instead of bun's ScanRows and select builder. These benchmarks measure
// what the two would cost on a 50-row page, the listings' default.

// BenchmarkPageScan reads 50 tasks (or messages) of a 20,000-row store
// and converts them to model types, scanned each way.
func BenchmarkPageScan(b *testing.B) {
	ctx := context.Background()
	db := importSeeded(b, 20000)
	qTasks := `SELECT ` + taskCols + ` FROM tasks ORDER BY seq DESC LIMIT 50`
	qMessages := `SELECT ` + messageCols + ` FROM messages ORDER BY seq DESC LIMIT 50`
	query := func(b *testing.B, q string) *sql.Rows {
		rows, err := db.rq.QueryContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return rows
	}
	b.Run("tasks/rows.Scan", func(b *testing.B) {
		start := cpuTime()
		for b.Loop() {
			if ts, err := db.queryTasks(ctx, db.rq, qTasks); err != nil || len(ts) != 50 {
				b.Fatal(len(ts), err)
			}
		}
		reportCPU(b, start)
	})
	b.Run("tasks/bun.ScanRows", func(b *testing.B) {
		start := cpuTime()
		for b.Loop() {
			var rs []taskRow
			if err := sqlgen().ScanRows(ctx, query(b, qTasks), &rs); err != nil || len(rs) != 50 {
				b.Fatal(len(rs), err)
			}
			out := make([]model.Task, 0, len(rs))
			for _, r := range rs {
				t, err := r.task()
				if err != nil {
					b.Fatal(err)
				}
				out = append(out, t)
			}
			if len(out) != 50 {
				b.Fatal(len(out))
			}
		}
		reportCPU(b, start)
	})
	b.Run("messages/rows.Scan", func(b *testing.B) {
		start := cpuTime()
		for b.Loop() {
			if ms, err := db.queryMessages(ctx, db.rq, qMessages); err != nil || len(ms) != 50 {
				b.Fatal(len(ms), err)
			}
		}
		reportCPU(b, start)
	})
	b.Run("messages/bun.ScanRows", func(b *testing.B) {
		start := cpuTime()
		for b.Loop() {
			var rs []messageRow
			if err := sqlgen().ScanRows(ctx, query(b, qMessages), &rs); err != nil || len(rs) != 50 {
				b.Fatal(len(rs), err)
			}
			out := make([]model.Message, 0, len(rs))
			for _, r := range rs {
				m, err := r.message()
				if err != nil {
					b.Fatal(err)
				}
				out = append(out, m)
			}
			if len(out) != 50 {
				b.Fatal(len(out))
			}
		}
		reportCPU(b, start)
	})
}

// BenchmarkBuildListQuery builds ListTasks's caller-or-target query with
// bun's select builder, and finds it in taskPageQuery's cache.
func BenchmarkBuildListQuery(b *testing.B) {
	buildStatements()
	where := []string{`state = ?`}
	b.Run("bun", func(b *testing.B) {
		for b.Loop() {
			_ = buildTaskPage(where, true)
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			_ = taskPageQuery(where, true)
		}
	})
}

// BenchmarkVerifyAudit: relay audit verify over 20,000 audit rows, read
// and scanned with bun one row at a time.
func BenchmarkVerifyAudit(b *testing.B) {
	ctx := context.Background()
	db := importSeeded(b, 10000) // 10,000 messages and tasks: 20,000 audit rows
	start := cpuTime()
	for b.Loop() {
		if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK || rep.Rows != 20000 {
			b.Fatal(rep, err)
		}
	}
	reportCPU(b, start)
}

// importSeeded opens a store holding n messages and n completed tasks,
// written by Import: this package's internal tests cannot use
// persistencetest.Seed (it imports this package).
func importSeeded(b *testing.B, n int) *DB {
	b.Helper()
	db := MustOpenTemp(b)
	agents := model.CoreAgents()
	var h History
	for i := range n {
		from, to := agents[i%len(agents)], agents[(i+1)%len(agents)]
		at := t0.Add(time.Duration(i) * time.Second)
		h.Messages = append(h.Messages, model.Message{ID: fmt.Sprintf("MSG-B%08d", i), From: from, To: to,
			Body: "a benchmark message of about a hundred bytes, like the ones agents leave each other", CreatedAt: at})
		h.Tasks = append(h.Tasks, model.TaskDetail{Task: model.Task{ID: fmt.Sprintf("T-B%08d", i), State: model.StateCompleted,
			Caller: from, Target: to, Mode: model.ModeReadOnly, MissionID: "M-1", LeaseID: "S-1", Prompt: "review parser.go",
			Result: "done", StopReason: "end_turn", CreatedAt: at, UpdatedAt: at}})
	}
	if err := db.Import(context.Background(), h); err != nil {
		b.Fatal(err)
	}
	return db
}
