package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Group commit. Every write method hands its transaction body (a func on a
// *writeTx) to one writer goroutine, which runs the bodies queued at that
// moment in one SQLite transaction, commits once (one fsync with
// synchronous=FULL) and only then answers each caller. See the package
// documentation for the guarantees; the mechanics are here.

// DefaultMaxBatch is the most write requests one group commit holds when
// Options.MaxBatch is 0.
const DefaultMaxBatch = 64

// ErrClosed is returned (wrapped) by a write on a closed DB.
var ErrClosed = errors.New("persistence: database is closed")

// Request states. A request is queued until the writer takes it or its
// caller abandons it (context done), whichever happens first.
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// writeReq is one write request: a transaction body and where its result
// goes.
type writeReq struct {
	ctx   context.Context
	fn    func(ctx context.Context, w *writeTx) error
	state atomic.Int32
	done  chan error // buffered: the writer never blocks on a caller
}

var reqPool = sync.Pool{New: func() any { return &writeReq{done: make(chan error, 1)} }}

// WriterStats counts the writer's work since Open.
type WriterStats struct {
	// Batches is the number of transactions the writer committed or rolled
	// back; Requests the number of requests they carried (abandoned ones
	// excluded). Requests/Batches is the mean group size.
	Batches, Requests int64
	// MaxBatch is the largest group seen.
	MaxBatch int64
	// Checkpoints counts the checkpointer's runs beside the writer;
	// CatchUps the writer's own, when the WAL outgrew walCatchUpFrames.
	Checkpoints, CatchUps int64
}

// groupWriter owns the writer pool's one connection between Open and
// Close.
type groupWriter struct {
	db       *sql.DB
	stmts    *stmtCache
	maxBatch int

	// mu makes enqueue and Close exclusive, so that no request is sent on
	// reqs after Close closed it: senders hold it for reading.
	mu     sync.RWMutex
	closed bool
	reqs   chan *writeReq
	exited chan struct{}

	batches, requests, largest atomic.Int64
	catchUps                   atomic.Int64

	// checkpoint receives a kick every checkpointEvery commits; the writer
	// closes it when it exits. See checkpointLoop.
	checkpoint chan struct{}
	sinceKick  int
	// catchUp asks the writer to checkpoint the WAL's tail itself, between
	// two batches; see catchUpCheckpoint.
	catchUp atomic.Bool

	// testHookBatch and testHookCommitted, when set (tests only, before any
	// write), are called by the writer with the size of each batch before
	// it runs it (requests may join it while it runs) and once it answered.
	testHookBatch, testHookCommitted func(n int)
}

func newGroupWriter(db *sql.DB, stmts *stmtCache, maxBatch int) *groupWriter {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	return &groupWriter{
		db: db, stmts: stmts, maxBatch: maxBatch,
		reqs:       make(chan *writeReq, 4*maxBatch),
		exited:     make(chan struct{}),
		checkpoint: make(chan struct{}, 1),
	}
}

// checkpointEvery is how many commits the writer makes between two kicks
// of the checkpointer: with ~10 to 30 WAL frames a commit, a few hundred
// frames, about the default of SQLite's own checkpoint on commit (1000).
const checkpointEvery = 32

// walCatchUpFrames is the WAL size, in frames (4 KiB pages), above which
// the writer itself checkpoints the WAL's tail between two batches. The
// checkpointer copies the WAL beside the writer, but under a steady stream
// of writes it never copies the very last frames, and the WAL can only
// start over once all are copied: without this, it would grow without
// bound.
const walCatchUpFrames = 2048

// catchUpCheckpoint copies what the checkpointer left of the WAL, on the
// writer's connection while no write runs, so the next transaction can
// start the WAL over. The checkpointer did the bulk already: the tail is a
// few batches' frames.
func (g *groupWriter) catchUpCheckpoint() {
	var busy, frames, copied int
	_ = g.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	g.catchUps.Add(1)
}

// kickCheckpoint counts a commit and, every checkpointEvery, wakes the
// checkpointer without ever waiting for it.
func (g *groupWriter) kickCheckpoint() {
	g.sinceKick++
	if g.sinceKick < checkpointEvery {
		return
	}
	g.sinceKick = 0
	select {
	case g.checkpoint <- struct{}{}:
	default: // one is pending already
	}
}

// start runs the writer goroutine until stop.
func (g *groupWriter) start() { go g.run() }

// stop refuses new requests, lets the writer finish every request already
// queued, and waits for it to exit. It is idempotent.
func (g *groupWriter) stop() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.reqs)
	}
	g.mu.Unlock()
	<-g.exited
}

// stats returns the counters.
func (g *groupWriter) stats() WriterStats {
	return WriterStats{Batches: g.batches.Load(), Requests: g.requests.Load(), MaxBatch: g.largest.Load(),
		CatchUps: g.catchUps.Load()}
}

// write queues fn and waits for the commit of the batch that ran it.
//
// Context: while the request is still queued, a done ctx abandons it; the
// writer will skip it and nothing of it is ever applied; write returns
// ctx.Err(). Once the writer has taken it, write waits for its batch to
// commit or roll back whatever ctx does, and returns that outcome: a
// request is never half-applied, nor reported failed after it committed.
// fn runs with ctx's values but not its cancellation (a cancellation would
// interrupt the whole batch's transaction).
func (g *groupWriter) write(ctx context.Context, fn func(ctx context.Context, w *writeTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := reqPool.Get().(*writeReq)
	r.ctx, r.fn = ctx, fn
	r.state.Store(reqQueued)

	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		r.release()
		return ErrClosed
	}
	select {
	case g.reqs <- r:
		g.mu.RUnlock()
	case <-ctx.Done():
		g.mu.RUnlock()
		r.release()
		return ctx.Err()
	}

	select {
	case err := <-r.done:
		r.release()
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			// The writer will drop it; it owns r from here and
			// never answers on done, so r is not recycled.
			return ctx.Err()
		}
		err := <-r.done // taken: its batch decides
		r.release()
		return err
	}
}

// release recycles r once nobody refers to it any more.
func (r *writeReq) release() {
	r.ctx, r.fn = nil, nil
	reqPool.Put(r)
}

// run is the writer goroutine: take what is queued (up to maxBatch), run it
// as one transaction, answer, repeat; exit when reqs is closed and empty.
func (g *groupWriter) run() {
	defer close(g.exited)
	defer close(g.checkpoint)
	b := &batch{g: g, reqs: make([]*writeReq, 0, g.maxBatch), errs: make([]error, 0, g.maxBatch)}
	for {
		r, ok := <-g.reqs
		if !ok {
			return
		}
		b.reqs, b.errs = b.reqs[:0], b.errs[:0]
		if r.take() {
			b.reqs = append(b.reqs, r)
		}
		b.fill()
		if len(b.reqs) == 0 {
			continue
		}
		if g.testHookBatch != nil {
			g.testHookBatch(len(b.reqs))
		}
		b.commit()
		for i, r := range b.reqs {
			r.done <- b.errs[i]
		}
		g.batches.Add(1)
		g.requests.Add(int64(len(b.reqs)))
		if n := int64(len(b.reqs)); n > g.largest.Load() {
			g.largest.Store(n)
		}
		if g.testHookCommitted != nil {
			g.testHookCommitted(len(b.reqs))
		}
		clear(b.reqs)
		// The connection is free: prepare what ran unprepared, and
		// finish a checkpoint the checkpointer could not.
		g.stmts.prepareWanted()
		if g.catchUp.CompareAndSwap(true, false) {
			g.catchUpCheckpoint()
		}
	}
}

// take marks r taken by the writer, unless its caller abandoned it first.
func (r *writeReq) take() bool { return r.state.CompareAndSwap(reqQueued, reqTaken) }

// batch is one group commit in the making.
type batch struct {
	g    *groupWriter
	reqs []*writeReq
	errs []error // errs[i] is reqs[i]'s outcome, once run
}

// fill takes what is queued now, up to maxBatch, without waiting, and
// reports whether it took any. Abandoned requests are dropped.
func (b *batch) fill() bool {
	took := false
	for len(b.reqs) < b.g.maxBatch {
		select {
		case r, ok := <-b.g.reqs:
			if !ok {
				return took
			}
			if r.take() {
				b.reqs = append(b.reqs, r)
				took = true
			}
		default:
			return took
		}
	}
	return took
}

// Savepoint statements, prepared with the writer's queries.
const (
	qSavepoint  = `SAVEPOINT req`
	qRollbackTo = `ROLLBACK TO req`
	qRelease    = `RELEASE req`
)

// commit runs the batch in one IMMEDIATE transaction and sets each
// request's outcome. Requests that arrive while it runs join it, up to
// maxBatch, and commit with it: the writer is busy anyway, so they wait
// less, and one fsync covers more. With more than one request, each runs
// inside its own SAVEPOINT: one that fails is rolled back to it alone, with
// the audit chain's head restored, and the others go on. A failure of the
// transaction itself (BEGIN, a savepoint statement, the audit head update,
// COMMIT) fails every request that had not failed alone: none of it is
// durable.
func (b *batch) commit() {
	failAll := func(err error) {
		for len(b.errs) < len(b.reqs) {
			b.errs = append(b.errs, nil)
		}
		for i := range b.errs {
			if b.errs[i] == nil {
				b.errs[i] = err
			}
		}
	}
	// The batch's own context: never canceled, so no caller can interrupt
	// (and so roll back) a transaction that carries other callers' writes.
	ctx := context.Background()
	tx, err := b.g.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock=immediate)
	if err != nil {
		failAll(fmt.Errorf("begin: %w", err))
		return
	}
	w := &writeTx{txQuerier: txQuerier{tx: tx, stmts: b.g.stmts}}
	if len(b.reqs) == 1 {
		// Alone in its batch so far: no savepoint; its failure is the
		// transaction's, and those queued meanwhile wait for the next.
		err := runReq(b.reqs[0], w)
		b.errs = append(b.errs, err)
		if err != nil {
			_ = tx.Rollback()
			return
		}
	}
	for {
		for i := len(b.errs); i < len(b.reqs); i++ {
			if _, err := w.ExecContext(ctx, qSavepoint); err != nil {
				_ = tx.Rollback()
				failAll(fmt.Errorf("savepoint: %w", err))
				return
			}
			head := w.head
			err := runReq(b.reqs[i], w)
			b.errs = append(b.errs, err)
			if err != nil {
				if _, rerr := w.ExecContext(ctx, qRollbackTo); rerr != nil {
					// SQLite may have rolled the whole transaction
					// back already (I/O error, full disk).
					_ = tx.Rollback()
					failAll(fmt.Errorf("rollback to savepoint after %v: %w", err, rerr))
					return
				}
				w.head = head
			}
			if _, err := w.ExecContext(ctx, qRelease); err != nil {
				_ = tx.Rollback()
				failAll(fmt.Errorf("release savepoint: %w", err))
				return
			}
		}
		if !b.fill() {
			break
		}
	}
	if err := w.flushAudit(ctx); err != nil {
		_ = tx.Rollback()
		failAll(err)
		return
	}
	if err := tx.Commit(); err != nil {
		// The driver rolls back a transaction whose COMMIT failed.
		failAll(fmt.Errorf("commit: %w", err))
		return
	}
	b.g.kickCheckpoint()
}

// runReq runs one request's body, turning a panic into its error so that a
// bug in one request cannot take the writer (and every other caller) down.
func runReq(r *writeReq, w *writeTx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("persistence: panic in a write: %v", p)
		}
	}()
	return r.fn(context.WithoutCancel(r.ctx), w)
}
