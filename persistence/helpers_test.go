package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// t0 is a fixed instant for deterministic rows.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// newTask returns a minimal valid task to create.
func newTask(id string) model.Task {
	return model.Task{
		ID:        id,
		Caller:    "codex",
		Target:    "claude",
		Mode:      model.ModeReadOnly,
		MissionID: "M-1",
		LeaseID:   "S-1",
		Prompt:    "say hi",
		CreatedAt: t0,
	}
}

// mustCreate creates a task or fails the test.
func mustCreate(t testing.TB, db *DB, task model.Task) model.Task {
	t.Helper()
	got, existed, err := db.CreateTask(context.Background(), task)
	if err != nil || existed {
		t.Fatalf("CreateTask(%s) = existed %v, err %v", task.ID, existed, err)
	}
	return got
}

// count returns the number of rows in table (optionally filtered).
func count(t testing.TB, db *DB, table, where string, args ...any) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := db.reader.DB.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// rawOpen opens the database file with a plain database/sql handle, as a
// tool (or an attacker) with file access would.
func rawOpen(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// mustExec runs statements on q or fails the test.
func mustExec(t testing.TB, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) sql.Result {
	t.Helper()
	res, err := q.ExecContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return res
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code model.Code) {
	t.Helper()
	if got := model.ErrorCode(err); got != code {
		t.Fatalf("error code = %q, want %q (err: %v)", got, code, err)
	}
}

// ids returns the ids of tasks, for compact comparisons.
func taskIDs(ts []model.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func messageIDs(ms []model.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// seqID formats a numbered id.
func seqID(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i) }
