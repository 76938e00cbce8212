package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// The fixed statements of the hot paths. They are prepared once per pool
// at Open (see prepareAll), which saves SQLite's parse and plan on every
// call; dynamic queries (filters, id lists) are prepared per call.
const (
	qAuditHead       = `SELECT seq, hash FROM audit_head WHERE id = 1`
	qAuditHeadUpdate = `UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1`
	qAuditInsert     = `INSERT INTO audit_log (seq, at, kind, actor, task_id, message_id, data, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

	qTaskByID   = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`
	qTaskByIdem = `SELECT ` + taskColumns + ` FROM tasks WHERE caller = ? AND idempotency_key = ?`
	qTaskState  = `SELECT state FROM tasks WHERE id = ?`
	qTaskExists = `SELECT 1 FROM tasks WHERE id = ?`
	// qTransition and qTransitionResult are the compare-and-set writes.
	qTransition = `UPDATE tasks SET state = ?, code = ?, message = ?, updated_at = ?
		WHERE id = ? AND state = ? RETURNING ` + taskColumns
	qTransitionResult = `UPDATE tasks SET state = ?, code = ?, message = ?, updated_at = ?,
		result = ?, stop_reason = ?, session_mode = ?, tool_calls = ?
		WHERE id = ? AND state = ? RETURNING ` + taskColumns
	// Events and verdicts are numbered per task: n = max + 1, found on
	// the primary key's prefix. ?1 is the task id.
	qEventInsert = `INSERT INTO task_events (task_id, n, from_state, to_state, trigger_name, code, message, actor, at)
		VALUES (?1, (SELECT IFNULL(MAX(n), 0) + 1 FROM task_events WHERE task_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8)`
	qVerdictInsert = `INSERT INTO task_verdicts (task_id, n, gate, passed, code, message, detail, at)
		VALUES (?1, (SELECT IFNULL(MAX(n), 0) + 1 FROM task_verdicts WHERE task_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7)`
	qDenial = `UPDATE tasks SET denied_permissions = denied_permissions + 1, updated_at = ?
		WHERE id = ? AND state = ? RETURNING target, denied_permissions`
	qTaskEvents = `SELECT task_id, from_state, to_state, trigger_name, code, message, actor, at
		FROM task_events WHERE task_id = ? ORDER BY n`
	qTaskVerdicts = `SELECT gate, passed, code, message, detail, at
		FROM task_verdicts WHERE task_id = ? ORDER BY n`

	qMessageInsert = `INSERT INTO messages (seq, id, from_agent, to_agent, body, context_id, reply_to, artifacts, state, created_at)
		VALUES ((SELECT IFNULL(MAX(seq), 0) + 1 FROM messages), ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qInbox = `SELECT ` + messageColumns + ` FROM messages
		WHERE to_agent = ? AND state IN (?, ?) ORDER BY seq LIMIT ?`
	qMarkRead    = `UPDATE messages SET state = ?, read_at = ? WHERE id = ? AND state = ?`
	qUnreadCount = `SELECT COUNT(*) FROM messages WHERE to_agent = ? AND state = ?`
	qAckOne      = `UPDATE messages SET state = ?, acked_at = ?, read_at = IFNULL(read_at, ?) WHERE id = ?`
)

// writerQueries and readerQueries are prepared at Open on each pool.
var (
	writerQueries = []string{qAuditHead, qAuditHeadUpdate, qAuditInsert, qTaskByIdem, qTaskState,
		insertTask, qTransition, qTransitionResult, qEventInsert, qVerdictInsert, qDenial,
		qMessageInsert, qInbox, qMarkRead, qUnreadCount, qAckOne}
	readerQueries = []string{qAuditHead, qTaskByID, qTaskExists, qTaskEvents, qTaskVerdicts}
)

// stmtCache holds statements prepared on one pool, by query text. It is
// filled at Open and read-only afterwards, so it needs no lock.
type stmtCache map[string]*sql.Stmt

// prepareAll prepares queries on db. With the writer's single connection
// this must run while no transaction holds it.
func prepareAll(ctx context.Context, db *sql.DB, queries []string) (stmtCache, error) {
	c := make(stmtCache, len(queries))
	for _, q := range queries {
		if _, ok := c[q]; ok {
			continue
		}
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			_ = c.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		c[q] = s
	}
	return c, nil
}

// close closes every statement.
func (c stmtCache) close() error {
	var errs []error
	for _, s := range c {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// readQuerier runs queries on the reader pool, through prepared statements
// when the query is one of readerQueries.
type readQuerier struct {
	db    *sql.DB
	stmts stmtCache
}

func (r readQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s, ok := r.stmts[q]; ok {
		return s.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, q, args...)
}

func (r readQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s, ok := r.stmts[q]; ok {
		return s.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, q, args...)
}

func (r readQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s, ok := r.stmts[q]; ok {
		return s.ExecContext(ctx, args...)
	}
	return r.db.ExecContext(ctx, q, args...)
}

// txQuerier runs queries in one transaction, through the pool's prepared
// statements where the query is one of them.
type txQuerier struct {
	tx    *sql.Tx
	stmts stmtCache
}

// stmt returns the transaction's handle on a prepared statement, or nil.
func (t txQuerier) stmt(ctx context.Context, q string) *sql.Stmt {
	if s, ok := t.stmts[q]; ok {
		return t.tx.StmtContext(ctx, s)
	}
	return nil
}

func (t txQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s := t.stmt(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, q, args...)
}

func (t txQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, q, args...)
}

func (t txQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, q, args...)
}

// readTx runs fn in a read-only transaction on the reader pool, so that
// the queries it makes see one snapshot.
func (db *DB) readTx(ctx context.Context, fn func(ctx context.Context, q querier) error) error {
	return db.reader.RunInTx(ctx, &sql.TxOptions{ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		return fn(ctx, txQuerier{tx: tx.Tx, stmts: db.rq.stmts})
	})
}

// writeTx is one transaction on the single writer connection, with the
// audit chain appender that rides on it.
type writeTx struct {
	txQuerier

	headLoaded bool
	headDirty  bool
	headSeq    int64
	headHash   string
}

// write runs fn in an IMMEDIATE transaction (_txlock=immediate) on the
// writer. Audit rows that fn appends are chained from audit_head, which is
// updated before commit; if fn fails, nothing of it (rows or head) is
// committed.
func (db *DB) write(ctx context.Context, fn func(ctx context.Context, w *writeTx) error) error {
	return db.writer.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		w := &writeTx{txQuerier: txQuerier{tx: tx.Tx, stmts: db.wstmts}}
		if err := fn(ctx, w); err != nil {
			return err
		}
		return w.flushAudit(ctx)
	})
}
