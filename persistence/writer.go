package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"
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
	// CatchUps the writer's own, once it appended walCatchUpFrames.
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

	// checkpoint receives a kick every kickFrames WAL frames; the writer
	// closes it when it exits. See checkpointLoop.
	checkpoint chan struct{}
	// walFrames counts the WAL frames the writer appended since its last
	// complete checkpoint, sinceKick those since the last kick. Only the
	// writer goroutine touches them.
	walFrames, sinceKick int
	// ckptMu is held by whoever checkpoints in this process: the
	// checkpointer, or the writer in catchUpCheckpoint.
	ckptMu sync.Mutex

	// testHookBatch and testHookCommitted, when set (tests only, before any
	// write), are called by the writer with the size of each batch before
	// it runs it (requests may join it while it runs) and once it ended,
	// before its requests are answered (so a test that got its answer sees
	// the batch counted).
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

// kickFrames is how many WAL frames (4 KiB pages) the writer appends
// between two kicks of the checkpointer: it copies them into the main file
// beside the writer, so that the writer's own checkpoint at
// walCatchUpFrames finds little left to copy.
const kickFrames = 512

// walCatchUpFrames is how many WAL frames the writer appends before it
// checkpoints the WAL itself, on its own connection between two batches.
// No write runs then, so it copies every frame no reader still needs, and
// the next transaction starts the WAL over from its beginning. The
// checkpointer alone cannot do that: it runs beside a steady stream of
// writes, never copies the frames appended meanwhile, and on a loaded
// machine it may not run at all; the WAL would grow without bound.
const walCatchUpFrames = 2048

// noteFrames adds the WAL frames the last batch appended (the writer
// connection's count of pages written, which in WAL mode are WAL frames)
// and checkpoints, or kicks the checkpointer, when they are due. It runs
// on the writer goroutine between two batches.
func (g *groupWriter) noteFrames() {
	n, err := g.framesWritten()
	if err != nil {
		// Unknown: count a kick's worth, so checkpoints still come.
		n = kickFrames
	}
	g.walFrames += n
	g.sinceKick += n
	if g.walFrames >= walCatchUpFrames {
		g.catchUpCheckpoint()
		return
	}
	if g.sinceKick >= kickFrames {
		g.sinceKick = 0
		select {
		case g.checkpoint <- struct{}{}:
		default: // one is pending already
		}
	}
}

// framesWritten returns the pages the writer connection wrote since the
// last call, and resets the count.
func (g *groupWriter) framesWritten() (int, error) {
	conn, err := g.db.Conn(context.Background())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var n int
	err = conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("persistence: driver connection %T has no status", dc)
		}
		var err error
		n, _, err = st.Status(sqlite.DBStatusCacheWrite, true)
		return err
	})
	return n, err
}

// catchUpCheckpoint copies the WAL into the main file on the writer's
// connection, while no write runs, so that the next transaction starts
// the WAL over. It first waits for a checkpoint of the checkpointer's to
// end: a checkpoint that finds another one running is refused at once
// (SQLITE_BUSY), and this one must not be skipped. The checkpointer did
// the bulk already; what is left is a few batches' frames. When a reader
// still needs frames (its snapshot predates them), they stay, and the
// writer tries again after its next batch.
func (g *groupWriter) catchUpCheckpoint() {
	g.ckptMu.Lock()
	defer g.ckptMu.Unlock()
	var busy, frames, copied int
	err := g.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	g.catchUps.Add(1)
	if err == nil && busy == 0 && copied >= frames {
		g.walFrames, g.sinceKick = 0, 0
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
		if g.testHookCommitted != nil {
			g.testHookCommitted(len(b.reqs))
		}
		for i, r := range b.reqs {
			r.done <- b.errs[i]
		}
		g.batches.Add(1)
		g.requests.Add(int64(len(b.reqs)))
		if n := int64(len(b.reqs)); n > g.largest.Load() {
			g.largest.Store(n)
		}
		clear(b.reqs)
		// The connection is free: prepare what ran unprepared, and
		// checkpoint if the WAL grew enough.
		g.stmts.prepareWanted()
		g.noteFrames()
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
