package persistencetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the driver the store uses

	"github.com/hai-relay/relay/persistence"
)

// FloorResult is what InsertFloor measured.
type FloorResult struct {
	// Rows is the number of rows inserted, each in its own transaction.
	Rows int
	// Elapsed is the wall time of all the inserts (open and schema excluded).
	Elapsed time.Duration
	// Latencies holds each insert's BEGIN…COMMIT time, in order.
	Latencies []time.Duration
}

// PerSecond returns Rows/Elapsed.
func (r FloorResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Elapsed.Seconds()
}

// InsertFloor is a benchmark floor, not part of the store: it measures what
// durability costs without group commit. It creates a fresh database at
// path (which must not exist), in WAL mode with the given synchronous mode
// (persistence.SyncFull or SyncNormal), with one table shaped like messages
// (id, from, to, body, created_at), and inserts n rows with the given body
// one after the other, each in its own BEGIN IMMEDIATE … COMMIT on one
// connection, through one prepared statement. With SyncFull every row
// costs one fsync of the WAL: this is the "single-transaction FULL inserts"
// floor that group commit is measured against (relay-bench,
// BENCHMARKS.md). The database is left at path for the caller to remove.
func InsertFloor(ctx context.Context, path, synchronous string, n int, body string) (FloorResult, error) {
	syncMode := strings.ToUpper(strings.TrimSpace(synchronous))
	switch syncMode {
	case "":
		syncMode = persistence.SyncFull
	case persistence.SyncFull, persistence.SyncNormal:
	default:
		return FloorResult{}, fmt.Errorf("floor: synchronous must be %q or %q, not %q", persistence.SyncNormal, persistence.SyncFull, synchronous)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return FloorResult{}, err
	}
	// The store's connection settings: busy timeout, WAL, the synchronous
	// mode, IMMEDIATE transactions.
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(persistence.DefaultBusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Set("_txlock", "immediate")
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String()
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return FloorResult{}, err
	}
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(1)
	if _, err := sqldb.ExecContext(ctx, `CREATE TABLE floor (
		seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, from_agent TEXT NOT NULL,
		to_agent TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL)`); err != nil {
		return FloorResult{}, fmt.Errorf("floor: %w", err)
	}
	stmt, err := sqldb.PrepareContext(ctx, `INSERT INTO floor (id, from_agent, to_agent, body, created_at) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return FloorResult{}, fmt.Errorf("floor: %w", err)
	}
	defer stmt.Close()
	res := FloorResult{Rows: n, Latencies: make([]time.Duration, 0, n)}
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		tx, err := sqldb.BeginTx(ctx, nil)
		if err != nil {
			return FloorResult{}, fmt.Errorf("floor: %w", err)
		}
		_, err = tx.StmtContext(ctx, stmt).ExecContext(ctx, "F-"+strconv.Itoa(i), "codex", "claude", body, t0.UTC().Format(time.RFC3339Nano))
		if err != nil {
			return FloorResult{}, errors.Join(fmt.Errorf("floor: %w", err), tx.Rollback())
		}
		if err := tx.Commit(); err != nil {
			return FloorResult{}, fmt.Errorf("floor: %w", err)
		}
		res.Latencies = append(res.Latencies, time.Since(t0))
	}
	res.Elapsed = time.Since(start)
	return res, nil
}
