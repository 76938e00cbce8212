package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/uptrace/bun"
)

// maxCachedStmts bounds each pool's statement cache. The store's query
// shapes are finite (each filter combination is one text; an id list is
// one text per length), and rarely more than a few dozen are in use; a
// query beyond the bound runs unprepared.
const maxCachedStmts = 128

// stmtCache holds statements prepared on one pool, by query text: the hot
// ones prepared at Open, any other on its first use. Preparing costs
// SQLite's parse and plan, a few hundred microseconds for a compound
// listing query; a prepared statement costs none of it again.
//
// A query that is not prepared yet runs unprepared once, and is prepared
// outside the caller's transaction: preparing on the pool from inside a
// transaction could wait forever for a connection (the writer has only
// one, held by that transaction). The reader pool's cache prepares it on a
// goroutine of its own; the writer's, between two batches (prepareWanted).
type stmtCache struct {
	db    *sql.DB
	async bool

	mu     sync.Mutex
	m      map[string]*sql.Stmt // nil value: failed to prepare, not retried
	want   map[string]bool
	closed bool
	wg     sync.WaitGroup
}

// prepareAll returns a cache on db holding queries prepared now. With the
// writer's single connection this must run while no transaction holds it.
// async says whether later misses are prepared in the background (the
// reader pool) or by prepareWanted (the writer).
func prepareAll(ctx context.Context, db *sql.DB, queries []string, async bool) (*stmtCache, error) {
	c := &stmtCache{db: db, async: async, m: make(map[string]*sql.Stmt, len(queries)), want: map[string]bool{}}
	for _, q := range queries {
		if _, ok := c.m[q]; ok {
			continue
		}
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			_ = c.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		c.m[q] = s
	}
	return c, nil
}

// lookup returns q's prepared statement, or nil: then q runs unprepared
// this time, and is queued to be prepared for the next calls.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[q]; ok {
		return s
	}
	if c.closed || c.want[q] || len(c.m)+len(c.want) >= maxCachedStmts {
		return nil
	}
	c.want[q] = true
	if c.async {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.prepare(q)
		}()
	}
	return nil
}

// prepare prepares one wanted query on the pool and caches it.
func (c *stmtCache) prepare(q string) {
	s, err := c.db.PrepareContext(context.Background(), q)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.want, q)
	switch {
	case err != nil:
		c.m[q] = nil // it will fail unprepared too; do not try again
	case c.closed:
		_ = s.Close()
	default:
		c.m[q] = s
	}
}

// prepareWanted prepares the queries that missed since the last call. The
// writer calls it between batches, when its connection is free.
func (c *stmtCache) prepareWanted() {
	if c == nil {
		return
	}
	c.mu.Lock()
	var qs []string
	for q := range c.want {
		qs = append(qs, q)
	}
	c.mu.Unlock()
	for _, q := range qs {
		c.prepare(q)
	}
}

// close waits for background preparations, then closes every statement.
// The pool must still be open.
func (c *stmtCache) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, s := range c.m {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	clear(c.m)
	return errors.Join(errs...)
}

// readQuerier runs queries on the reader pool, through prepared statements.
type readQuerier struct {
	db    *sql.DB
	stmts *stmtCache
}

func (r readQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := r.stmts.lookup(q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, q, args...)
}

func (r readQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := r.stmts.lookup(q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, q, args...)
}

func (r readQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s := r.stmts.lookup(q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return r.db.ExecContext(ctx, q, args...)
}

// txQuerier runs queries in one transaction, through the pool's prepared
// statements where the query is one of them.
type txQuerier struct {
	tx    *sql.Tx
	stmts *stmtCache
}

// stmt returns the transaction's handle on a prepared statement, or nil.
func (t txQuerier) stmt(ctx context.Context, q string) *sql.Stmt {
	if s := t.stmts.lookup(q); s != nil {
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
// audit chain appender that rides on it. In a group commit one writeTx
// carries every request of the batch, so the chain is appended in batch
// order and audit_head is written once per batch.
type writeTx struct {
	txQuerier
	head auditHead
}

// auditHead is the writer's view of the chain's head within a transaction:
// loaded from audit_head on the first append, moved by each append, and
// written back before commit. It is a value, so a request rolled back to
// its savepoint restores the head it started from.
type auditHead struct {
	loaded bool
	dirty  bool
	seq    int64
	hash   string
}

// write runs fn through the group-commit writer: in an IMMEDIATE
// transaction (_txlock=immediate) on the writer connection, possibly
// shared with other requests queued at the same moment, and returns once
// that transaction has committed (nil) or fn's own error, or the batch's
// failure. Audit rows that fn appends are chained from audit_head, which
// is updated before commit; if fn fails, nothing of it (rows or head) is
// committed, and the other requests of its batch are unaffected. A write
// that found no room on disk fails with CodeStorageFull.
func (db *DB) write(ctx context.Context, fn func(ctx context.Context, w *writeTx) error) error {
	if db.gw == nil {
		return ErrClosed
	}
	return storageFull(db.path, db.gw.write(ctx, fn))
}
