package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// heldWriter is a database whose writer can be stopped before a batch:
// block queues a write and holds the writer on it until release, so a test
// can queue requests behind it; they join that batch when it runs.
type heldWriter struct {
	db      *DB
	arm     atomic.Bool
	hold    chan struct{}
	release func()
	mu      sync.Mutex
	seen    []int // committed batch sizes since block
}

func openHeld(t *testing.T, opts Options) *heldWriter {
	t.Helper()
	h := &heldWriter{db: MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), opts), hold: make(chan struct{})}
	var once sync.Once
	h.release = func() { once.Do(func() { close(h.hold) }) }
	t.Cleanup(h.release)
	// Set before the first write: the writer reads it only after it
	// received a request, which happens after this assignment.
	h.db.gw.testHookBatch = func(int) {
		if h.arm.CompareAndSwap(true, false) {
			h.mu.Lock()
			h.seen = nil
			h.mu.Unlock()
			<-h.hold
		}
	}
	h.db.gw.testHookCommitted = func(n int) {
		h.mu.Lock()
		h.seen = append(h.seen, n)
		h.mu.Unlock()
	}
	return h
}

func (h *heldWriter) sizes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.seen...)
}

// block queues a write and waits until the writer holds it, before its
// batch began, so later requests queue behind it and join its batch.
func (h *heldWriter) block(t *testing.T) <-chan error {
	t.Helper()
	h.arm.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := h.db.CreateMessage(context.Background(), model.Message{ID: "M-block", From: "codex", To: "claude", Body: "first"})
		done <- err
	}()
	waitFor(t, "the writer to take the first request", func() bool { return !h.arm.Load() })
	return done
}

// enqueue starts op in a goroutine and waits until it is queued (the
// queue has grown by one), so requests enter the batch in a known order.
func (h *heldWriter) enqueue(t *testing.T, op func() error) <-chan error {
	t.Helper()
	before := len(h.db.gw.reqs)
	done := make(chan error, 1)
	go func() { done <- op() }()
	waitFor(t, "a request to queue", func() bool { return len(h.db.gw.reqs) == before+1 })
	return done
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a write to return")
		return nil
	}
}

func msg(id string) model.Message {
	return model.Message{ID: id, From: "codex", To: "claude", Body: "body of " + id}
}

func TestGroupCommitRunsQueuedWritesAsOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := openHeld(t, Options{})
	first := h.block(t)
	const k = 10
	var dones []<-chan error
	for i := range k {
		dones = append(dones, h.enqueue(t, func() error {
			_, err := h.db.CreateMessage(ctx, msg(seqID("M", i)))
			return err
		}))
	}
	h.release()
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	for _, d := range dones {
		if err := recv(t, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.sizes(); len(got) != 1 || got[0] != k+1 {
		t.Fatalf("batch sizes = %v, want [%d]: the queued requests join the held one", got, k+1)
	}
	if st := h.db.WriterStats(); st.Batches != 1 || st.Requests != k+1 || st.MaxBatch != k+1 {
		t.Errorf("stats = %+v", st)
	}
	if n := count(t, h.db, "messages", ""); n != k+1 {
		t.Errorf("messages = %d, want %d", n, k+1)
	}
	// The audit chain follows the queue order.
	rows, err := h.db.reader.DB.QueryContext(ctx, `SELECT message_id FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var order []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		order = append(order, id)
	}
	want := []string{"M-block"}
	for i := range k {
		want = append(want, seqID("M", i))
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("audit order = %v, want %v", order, want)
	}
	verifyOK(t, h.db, k+1)
}

func TestGroupCommitMaxBatchBoundsABatch(t *testing.T) {
	t.Parallel()
	h := openHeld(t, Options{MaxBatch: 3})
	first := h.block(t)
	var dones []<-chan error
	for i := range 7 {
		dones = append(dones, h.enqueue(t, func() error {
			_, err := h.db.CreateMessage(context.Background(), msg(seqID("M", i)))
			return err
		}))
	}
	h.release()
	for _, d := range append(dones, first) {
		if err := recv(t, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(h.sizes()); got != "[3 3 2]" {
		t.Errorf("batch sizes = %s, want [3 3 2]", got)
	}
	verifyOK(t, h.db, 8)
}

// TestMaxBatchOneIsATransactionPerWrite: MaxBatch 1 turns group commit
// off, and a negative one is refused.
func TestMaxBatchOneIsATransactionPerWrite(t *testing.T) {
	t.Parallel()
	h := openHeld(t, Options{MaxBatch: 1})
	first := h.block(t)
	var dones []<-chan error
	for i := range 3 {
		dones = append(dones, h.enqueue(t, func() error {
			_, err := h.db.CreateMessage(context.Background(), msg(seqID("M", i)))
			return err
		}))
	}
	h.release()
	for _, d := range append(dones, first) {
		if err := recv(t, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(h.sizes()); got != "[1 1 1 1]" {
		t.Errorf("batch sizes = %s, want [1 1 1 1]", got)
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), Options{MaxBatch: -1}); err == nil {
		t.Error("a negative MaxBatch was accepted")
	}
}

// TestGroupCommitFailingRequestFailsAlone puts requests that fail in every
// way a request can (constraint, CAS miss, not found, an error after its
// audit rows were appended, a panic) between good ones in one batch: each
// failure is reported to its caller alone, nothing of it remains, and the
// good ones commit with an unbroken audit chain.
func TestGroupCommitFailingRequestFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := openHeld(t, Options{})
	db := h.db
	// Set up before holding: a submitted task and an authorized one.
	mustCreate(t, db, newTask("T-sub"))
	mustCreate(t, db, newTask("T-auth"))
	if _, err := db.Transition(ctx, model.Transition{TaskID: "T-auth", From: model.StateSubmitted,
		To: model.StateAuthorized, Trigger: model.TriggerAuthorize}); err != nil {
		t.Fatal(err)
	}
	auditBefore := count(t, db, "audit_log", "")

	first := h.block(t)
	boom := errors.New("boom after audit")
	ok1 := h.enqueue(t, func() error { _, err := db.CreateMessage(ctx, msg("M-ok1")); return err })
	dup := h.enqueue(t, func() error { _, err := db.CreateMessage(ctx, msg("M-block")); return err })
	stale := h.enqueue(t, func() error {
		_, err := db.Transition(ctx, model.Transition{TaskID: "T-auth", From: model.StateSubmitted,
			To: model.StateAuthorized, Trigger: model.TriggerAuthorize})
		return err
	})
	missing := h.enqueue(t, func() error {
		_, err := db.Transition(ctx, model.Transition{TaskID: "T-nope", From: model.StateSubmitted,
			To: model.StateAuthorized, Trigger: model.TriggerAuthorize})
		return err
	})
	late := h.enqueue(t, func() error {
		return db.write(ctx, func(ctx context.Context, w *writeTx) error {
			for range 3 {
				if err := w.audit(ctx, model.AuditEvent{At: t0, Kind: "test.doomed"}); err != nil {
					return err
				}
			}
			if _, err := w.ExecContext(ctx, `UPDATE tasks SET message = 'doomed' WHERE id = 'T-sub'`); err != nil {
				return err
			}
			return boom
		})
	})
	panicky := h.enqueue(t, func() error {
		return db.write(ctx, func(ctx context.Context, w *writeTx) error {
			if err := w.audit(ctx, model.AuditEvent{At: t0, Kind: "test.panic"}); err != nil {
				return err
			}
			panic("write bug")
		})
	})
	trans := h.enqueue(t, func() error {
		_, err := db.Transition(ctx, model.Transition{TaskID: "T-sub", From: model.StateSubmitted,
			To: model.StateRejected, Trigger: model.TriggerReject, Code: model.CodeMissingLeaseID,
			Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Code: model.CodeMissingLeaseID}}})
		return err
	})
	ok2 := h.enqueue(t, func() error { _, err := db.CreateMessage(ctx, msg("M-ok2")); return err })
	h.release()

	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]<-chan error{"ok1": ok1, "trans": trans, "ok2": ok2} {
		if err := recv(t, c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	wantCode(t, recv(t, dup), model.CodeInvalidArgs)
	if err := recv(t, stale); !errors.Is(err, model.ErrStaleState) {
		t.Errorf("stale: %v", err)
	}
	wantCode(t, recv(t, missing), model.CodeNotFound)
	if err := recv(t, late); !errors.Is(err, boom) {
		t.Errorf("late: %v", err)
	}
	if err := recv(t, panicky); err == nil || !strings.Contains(err.Error(), "write bug") {
		t.Errorf("panicky: %v", err)
	}
	if got := h.sizes(); len(got) != 1 || got[0] != 9 {
		t.Fatalf("batch sizes = %v, want [9]", got)
	}

	if n := count(t, db, "audit_log", "kind LIKE 'test.%'"); n != 0 {
		t.Errorf("%d audit rows of failed requests remain", n)
	}
	if n := count(t, db, "tasks", "message = 'doomed'"); n != 0 {
		t.Error("a failed request's update remains")
	}
	task, err := db.GetTask(ctx, "T-sub")
	if err != nil || task.State != model.StateRejected {
		t.Errorf("T-sub = %v, %v; want rejected", task.State, err)
	}
	if n := count(t, db, "messages", "id IN ('M-ok1', 'M-ok2', 'M-block')"); n != 3 {
		t.Errorf("messages = %d, want 3", n)
	}
	// block, ok1, ok2 (message.stored) + trans (verdict + transition).
	// block ran first, alone so far, without a savepoint: the others
	// joined its batch with one each.
	verifyOK(t, db, auditBefore+5)
}

// TestGroupCommitCommitFailureFailsTheBatch makes COMMIT itself fail (a
// deferred foreign key left violated): every request of the batch fails,
// the held one too, none of it is stored, and the writer goes on with the
// next batch.
func TestGroupCommitCommitFailureFailsTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := openHeld(t, Options{})
	db := h.db
	first := h.block(t)
	a := h.enqueue(t, func() error { _, err := db.CreateMessage(ctx, msg("M-a")); return err })
	bad := h.enqueue(t, func() error {
		return db.write(ctx, func(ctx context.Context, w *writeTx) error {
			if _, err := w.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
				return err
			}
			_, err := w.ExecContext(ctx, `INSERT INTO task_events (task_id, n, from_state, to_state, trigger_name, at)
				VALUES ('T-ghost', 1, 'submitted', 'authorized', 'authorize', 'x')`)
			return err
		})
	})
	c := h.enqueue(t, func() error { _, err := db.CreateMessage(ctx, msg("M-c")); return err })
	h.release()
	for name, ch := range map[string]<-chan error{"block": first, "a": a, "bad": bad, "c": c} {
		err := recv(t, ch)
		if err == nil || !strings.Contains(err.Error(), "commit") || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Errorf("%s: err = %v, want the failed commit", name, err)
		}
	}
	if got := h.sizes(); len(got) != 1 || got[0] != 4 {
		t.Errorf("batch sizes = %v, want [4]", got)
	}
	if n := count(t, db, "messages", ""); n != 0 {
		t.Errorf("messages = %d, want 0", n)
	}
	if n := count(t, db, "task_events", ""); n != 0 {
		t.Errorf("task_events = %d, want 0", n)
	}
	if _, err := db.CreateMessage(ctx, msg("M-after")); err != nil {
		t.Fatalf("write after a failed commit: %v", err)
	}
	verifyOK(t, db, 1)
}

// TestGroupCommitFailingFirstRequestLeavesTheQueue: a request alone in its
// batch runs without a savepoint; when it fails, the transaction is rolled
// back and the requests queued meanwhile run in the next batch.
func TestGroupCommitFailingFirstRequestLeavesTheQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := openHeld(t, Options{})
	db := h.db
	mustCreate(t, db, newTask("T-1"))
	h.arm.Store(true)
	stale := make(chan error, 1)
	go func() {
		_, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateWorking,
			To: model.StateCompleted, Trigger: model.TriggerComplete})
		stale <- err
	}()
	waitFor(t, "the writer to take the request", func() bool { return !h.arm.Load() })
	ok := h.enqueue(t, func() error { _, err := db.CreateMessage(ctx, msg("M-ok")); return err })
	h.release()
	if err := recv(t, stale); !errors.Is(err, model.ErrStaleState) {
		t.Errorf("stale: %v", err)
	}
	if err := recv(t, ok); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.sizes()); got != "[1 1]" {
		t.Errorf("batch sizes = %s, want [1 1]", got)
	}
	verifyOK(t, db, 2)
}

// TestWriteCanceledWhileQueuedIsNeverApplied: a request whose context ends
// before the writer takes it returns the context's error at once, and its
// write never happens.
func TestWriteCanceledWhileQueuedIsNeverApplied(t *testing.T) {
	t.Parallel()
	h := openHeld(t, Options{})
	first := h.block(t)
	ctx, cancel := context.WithCancel(context.Background())
	gone := h.enqueue(t, func() error { _, err := h.db.CreateMessage(ctx, msg("M-gone")); return err })
	kept := h.enqueue(t, func() error { _, err := h.db.CreateMessage(context.Background(), msg("M-kept")); return err })
	cancel()
	if err := recv(t, gone); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled write: err = %v, want context.Canceled", err)
	}
	h.release()
	for _, c := range []<-chan error{first, kept} {
		if err := recv(t, c); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, h.db, "messages", "id = 'M-gone'"); n != 0 {
		t.Error("a write canceled while queued was applied")
	}
	if got := fmt.Sprint(h.sizes()); got != "[2]" {
		t.Errorf("batch sizes = %s, want [2] (the canceled one dropped)", got)
	}
	verifyOK(t, h.db, 2)
}

// TestWriteCanceledAfterTakenWaitsForItsBatch: once the writer took a
// request, canceling its context does not make the caller return early:
// it gets the batch's outcome, here a success, and the write is stored.
func TestWriteCanceledAfterTakenWaitsForItsBatch(t *testing.T) {
	t.Parallel()
	h := openHeld(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	h.arm.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := h.db.CreateMessage(ctx, msg("M-taken"))
		done <- err
	}()
	waitFor(t, "the writer to take the request", func() bool { return !h.arm.Load() })
	cancel()
	select {
	case err := <-done:
		t.Fatalf("write returned %v before its batch committed", err)
	case <-time.After(50 * time.Millisecond):
	}
	h.release()
	if err := recv(t, done); err != nil {
		t.Fatalf("taken write: %v, want its batch's success", err)
	}
	if n := count(t, h.db, "messages", "id = 'M-taken'"); n != 1 {
		t.Error("the taken write is missing")
	}
}

// TestCloseFinishesQueuedWrites: Close lets the writer commit what is
// queued, then stops it; later writes fail with ErrClosed.
func TestCloseFinishesQueuedWrites(t *testing.T) {
	t.Parallel()
	h := openHeld(t, Options{})
	first := h.block(t)
	var dones []<-chan error
	for i := range 5 {
		dones = append(dones, h.enqueue(t, func() error {
			_, err := h.db.CreateMessage(context.Background(), msg(seqID("M", i)))
			return err
		}))
	}
	closed := make(chan error, 1)
	go func() { closed <- h.db.Close() }()
	time.Sleep(20 * time.Millisecond) // Close is waiting for the writer
	h.release()
	for _, d := range append(dones, first) {
		if err := recv(t, d); err != nil {
			t.Errorf("queued write: %v", err)
		}
	}
	if err := recv(t, closed); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.CreateMessage(context.Background(), msg("M-late")); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: err = %v, want ErrClosed", err)
	}
	if err := h.db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestGroupCommitConcurrentMixedWrites hammers every write method from
// many goroutines (run with -race): everything the callers were told
// succeeded is stored, and the audit chain is one unbroken total order.
func TestGroupCommitConcurrentMixedWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Synchronous: SyncNormal})
	const workers, each = 8, 25
	var audits atomic.Int64
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("%d-%d", g, i)
				if _, err := db.CreateMessage(ctx, model.Message{ID: "M-" + id, From: "codex", To: "claude", Body: id}); err != nil {
					t.Error(err)
					return
				}
				audits.Add(1)
				if _, _, err := db.CreateTask(ctx, newTask("T-"+id)); err != nil {
					t.Error(err)
					return
				}
				audits.Add(1)
				if _, err := db.Transition(ctx, model.Transition{TaskID: "T-" + id, From: model.StateSubmitted,
					To: model.StateAuthorized, Trigger: model.TriggerAuthorize}); err != nil {
					t.Error(err)
					return
				}
				audits.Add(1)
				// A lost race on purpose: the task is no longer submitted.
				if _, err := db.Transition(ctx, model.Transition{TaskID: "T-" + id, From: model.StateSubmitted,
					To: model.StateAuthorized, Trigger: model.TriggerAuthorize}); !errors.Is(err, model.ErrStaleState) {
					t.Errorf("second transition: %v", err)
					return
				}
				if i%5 == 0 {
					ms, _, err := db.Inbox(ctx, "claude", true, 10)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ms) > 0 { // one message.read row per call that read
						audits.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := count(t, db, "messages", ""); n != workers*each {
		t.Errorf("messages = %d", n)
	}
	if n := count(t, db, "tasks", "state = 'authorized'"); n != workers*each {
		t.Errorf("authorized tasks = %d", n)
	}
	verifyOK(t, db, int(audits.Load()))
	if st := db.WriterStats(); st.Requests < int64(workers*each*4) {
		t.Errorf("stats = %+v", st)
	}
}

// verifyOK fails unless the audit chain verifies with rows rows.
func verifyOK(t *testing.T, db *DB, rows int) {
	t.Helper()
	rep, err := db.VerifyAudit(context.Background())
	if err != nil || !rep.OK || rep.Rows != int64(rows) {
		t.Fatalf("VerifyAudit = %+v, %v; want OK with %d rows", rep, err, rows)
	}
}

// walBound is the most the WAL may reach under a steady stream of writes:
// twice the frames the writer appends before it checkpoints (a frame is a
// 4 KiB page and a 24-byte header), room for the batch that crossed that
// mark.
const walBound = 2 * walCatchUpFrames * (4096 + 24)

// watchWAL records the WAL file's size after every batch the writer
// commits, so a test sees the WAL's high-water mark, not only its size at
// the end. It must be called while no write is in flight.
func watchWAL(t *testing.T, db *DB) (highWater func() int64) {
	t.Helper()
	var most atomic.Int64
	db.gw.testHookCommitted = func(int) {
		if fi, err := os.Stat(db.Path() + "-wal"); err == nil && fi.Size() > most.Load() {
			most.Store(fi.Size())
		}
	}
	return most.Load
}

// writeSteadily writes n messages from each of 8 goroutines, without a
// pause, and returns the rate. They all go to one recipient, so db must
// have no message quota (InboxMessages: NoLimit).
func writeSteadily(t *testing.T, db *DB, n int) (perSecond float64) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range n {
				if _, err := db.CreateMessage(ctx, model.Message{ID: fmt.Sprintf("M-%d-%d", g, i), From: "codex", To: "claude", Body: "x"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(8*n) / time.Since(start).Seconds()
}

// steadyWrites is how many messages each of writeSteadily's 8 goroutines
// writes in the WAL tests: 3,200 in all, which take the writer through
// its catch-up checkpoint three times (once every ~1,000 writes, about 2
// WAL frames each), and would grow a WAL that only the stalled
// checkpointer could reset to about 27 MB, against walBound's 17.
const steadyWrites = 400

// TestWALStaysBounded writes without a pause from many goroutines: the
// checkpointer copies the WAL beside the writer, and the writer copies the
// rest itself once it appended walCatchUpFrames, so the WAL starts over
// instead of growing with every write (it passed 60 MB here before). The
// bound holds at every commit, not only at the end.
func TestWALStaysBounded(t *testing.T) {
	t.Parallel()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Synchronous: SyncNormal, InboxMessages: NoLimit})
	highWater := watchWAL(t, db)
	rate := writeSteadily(t, db, steadyWrites)
	st := db.WriterStats()
	t.Logf("WAL high-water %d KiB, %.0f msgs/s (stats %+v)", highWater()>>10, rate, st)
	if highWater() > walBound {
		t.Errorf("WAL reached %d KiB after %d commits, bound %d KiB (stats %+v)", highWater()>>10, st.Batches, walBound>>10, st)
	}
	if st.Checkpoints == 0 || st.CatchUps == 0 {
		t.Errorf("the checkpointer or the writer never checkpointed (stats %+v)", st)
	}
	verifyOK(t, db, 8*steadyWrites)
}

// TestWALStaysBoundedWhileTheCheckpointerStalls holds the checkpointer
// beside the writer for the whole run, as a loaded machine can starve it:
// the writer must not depend on it to keep the WAL bounded.
func TestWALStaysBoundedWhileTheCheckpointerStalls(t *testing.T) {
	t.Parallel()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Synchronous: SyncNormal, InboxMessages: NoLimit})
	highWater := watchWAL(t, db)
	stalled := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(stalled) }) }
	t.Cleanup(release) // before Close, which waits for the checkpointer
	db.testHookCheckpoint = func() { <-stalled }
	writeSteadily(t, db, steadyWrites)
	release()
	st := db.WriterStats()
	t.Logf("WAL high-water %d KiB (stats %+v)", highWater()>>10, st)
	if highWater() > walBound {
		t.Errorf("WAL reached %d KiB after %d commits with the checkpointer stalled, bound %d KiB (stats %+v)",
			highWater()>>10, st.Batches, walBound>>10, st)
	}
	verifyOK(t, db, 8*steadyWrites)
}
