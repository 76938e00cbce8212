package persistence

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// testClock is a clock a test moves by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock(at time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(at.UnixNano())
	return c
}
func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// ended runs task id (submitted by codex) to terminal state to, with a
// notice to its submitter.
func ended(t *testing.T, db *DB, id string, to model.State) {
	t.Helper()
	ctx := context.Background()
	mustCreate(t, db, newTask(id))
	steps := []model.Transition{{From: model.StateSubmitted, To: model.StateRejected, Trigger: model.TriggerReject,
		Code: model.CodeMissingLeaseID, Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Code: model.CodeMissingLeaseID}}}}
	if to == model.StateCompleted {
		steps = []model.Transition{
			{From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize,
				Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Passed: true}}},
			{From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart},
			{From: model.StateWorking, To: model.StateCompleted, Trigger: model.TriggerComplete,
				Result: &model.TaskResult{Text: "done " + id, StopReason: "end_turn"}},
		}
	}
	for i, tr := range steps {
		tr.TaskID = id
		if i == len(steps)-1 {
			tr.NoticeID = "N-" + id
		}
		if _, err := db.Transition(ctx, tr); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

// Prune removes exactly what the policy says: acknowledged messages
// acknowledged before the cutoff and ended tasks that ended before it,
// with their events and verdicts; never an unacknowledged message or a
// task that has not ended, however old. A dry run counts the same and
// removes nothing; each batch is audited, the chain verifies, and a
// second pass finds nothing.
func TestPruneRemovesOnlyWhatThePolicySays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newTestClock(t0)
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Clock: clock.now})
	// Long ago: a message left stored, one read, one acknowledged; a task
	// still submitted, one working, one completed, one rejected.
	for _, id := range []string{"M-stored", "M-read", "M-acked-old", "M-acked-new"} {
		if err := trySend(db, id, "claude", "body of "+id); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := db.Inbox(ctx, "claude", true, 1); err != nil { // reads M-stored... the oldest
		t.Fatal(err)
	}
	mustCreate(t, db, newTask("T-submitted"))
	mustCreate(t, db, newTask("T-working"))
	for _, tr := range []model.Transition{
		{TaskID: "T-working", From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize},
		{TaskID: "T-working", From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart},
	} {
		if _, err := db.Transition(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	ended(t, db, "T-completed-old", model.StateCompleted)
	ended(t, db, "T-rejected-old", model.StateRejected)
	if _, err := db.Ack(ctx, "claude", []string{"M-acked-old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Ack(ctx, "codex", []string{"N-T-completed-old"}); err != nil {
		t.Fatal(err)
	}
	clock.advance(48 * time.Hour)
	// Recently: one more acknowledged message and one more ended task.
	if _, err := db.Ack(ctx, "claude", []string{"M-acked-new"}); err != nil {
		t.Fatal(err)
	}
	ended(t, db, "T-rejected-new", model.StateRejected)
	clock.advance(time.Hour)

	policy := model.RetentionPolicy{AckedMessages: 24 * time.Hour, TerminalTasks: 24 * time.Hour}
	dry, err := db.Prune(ctx, PruneOptions{Policy: policy, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	audit := count(t, db, "audit_log", "")
	if dry.AckedMessages.Removed != 2 || dry.TerminalTasks.Removed != 2 || dry.Batches != 0 {
		t.Errorf("dry run = %+v; want 2 messages (M-acked-old and T-completed-old's notice) and 2 tasks", dry.PruneReport)
	}
	if n := count(t, db, "messages", "") + count(t, db, "tasks", ""); n != 7+5 {
		t.Errorf("a dry run removed rows: %d left", n)
	}
	got, err := db.Prune(ctx, PruneOptions{Policy: policy, Actor: "operator", Trigger: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if got.AckedMessages.Removed != dry.AckedMessages.Removed || got.AckedMessages.Bytes != dry.AckedMessages.Bytes ||
		got.TerminalTasks.Removed != dry.TerminalTasks.Removed || got.TerminalTasks.Bytes != dry.TerminalTasks.Bytes {
		t.Errorf("pass = %+v, dry run said %+v", got.PruneReport, dry.PruneReport)
	}
	if want := []string{"T-completed-old", "T-rejected-old"}; !slices.Equal(slices.Sorted(slices.Values(got.TaskIDs)), want) {
		t.Errorf("removed tasks %v, want %v", got.TaskIDs, want)
	}
	left := func(table string) []string {
		rows, err := db.reader.DB.Query(`SELECT id FROM ` + table + ` ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			ids = append(ids, id)
		}
		return ids
	}
	if want := []string{"M-acked-new", "M-read", "M-stored", "N-T-rejected-new", "N-T-rejected-old"}; !slices.Equal(left("messages"), want) {
		t.Errorf("messages left %v, want %v", left("messages"), want)
	}
	if want := []string{"T-rejected-new", "T-submitted", "T-working"}; !slices.Equal(left("tasks"), want) {
		t.Errorf("tasks left %v, want %v", left("tasks"), want)
	}
	for _, table := range []string{"task_events", "task_verdicts"} {
		if n := count(t, db, table, "task_id IN ('T-completed-old', 'T-rejected-old')"); n != 0 {
			t.Errorf("%d %s rows of pruned tasks left", n, table)
		}
	}
	if n := count(t, db, "task_events", "task_id = 'T-working'"); n != 2 {
		t.Errorf("T-working has %d events left, want 2", n)
	}
	// One audit row per batch and kind, naming what went.
	if n := count(t, db, "audit_log", ""); n != audit+2 {
		t.Errorf("the pass appended %d audit rows, want 2", n-audit)
	}
	if n := count(t, db, "audit_log", `kind = 'retention.pruned' AND actor = 'operator' AND json_extract(data, '$.what') = 'terminal_tasks'
		AND json_extract(data, '$.ids') = 'T-completed-old,T-rejected-old' AND json_extract(data, '$.trigger') = 'operator'`); n != 1 {
		t.Error("no retention.pruned audit row naming the pruned tasks")
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("VerifyAudit after pruning = %+v, %v", rep, err)
	}
	// The audit log still vouches for the pruned result: its digest.
	if n := count(t, db, "audit_log", `task_id = 'T-completed-old' AND json_extract(data, '$.result_sha256') = ?`, sha256Hex("done T-completed-old")); n != 1 {
		t.Error("no result digest in the audit log of the completed task")
	}
	// Nothing is left to remove; a zero policy keeps everything.
	again, err := db.Prune(ctx, PruneOptions{Policy: policy})
	if err != nil || again.AckedMessages.Removed+again.TerminalTasks.Removed != 0 || again.Batches != 0 {
		t.Errorf("second pass = %+v, %v", again.PruneReport, err)
	}
	forever, err := db.Prune(ctx, PruneOptions{})
	if err != nil || forever.AckedMessages.Before != nil || forever.AckedMessages.Retention != "0s" || forever.Batches != 0 {
		t.Errorf("a zero policy = %+v, %v", forever.PruneReport, err)
	}
	if _, err := db.GetTask(ctx, "T-completed-old"); model.ErrorCode(err) != model.CodeNotFound {
		t.Errorf("a pruned task: %v, want not_found", err)
	}
}

// The cutoff is a whole second, and never lets a row younger than the
// policy go: a message acknowledged half a second after the cutoff's
// second began is kept; one acknowledged half a second before it goes.
// (Stored times drop their fraction's trailing zeros, so "…:05.5Z" sorts
// below "…:05Z" as text: a cutoff compared with the full text would
// remove the first.)
func TestPruneCutoffIsConservative(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := time.Date(2026, 5, 1, 10, 0, 5, 0, time.UTC)
	clock := newTestClock(base.Add(-500 * time.Millisecond))
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Clock: clock.now})
	for _, id := range []string{"M-before", "M-after"} {
		if err := trySend(db, id, "claude", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Ack(ctx, "claude", []string{"M-before"}); err != nil { // at 10:00:04.5
		t.Fatal(err)
	}
	clock.advance(time.Second)
	if _, err := db.Ack(ctx, "claude", []string{"M-after"}); err != nil { // at 10:00:05.5
		t.Fatal(err)
	}
	clock.ns.Store(base.Add(time.Hour + 900*time.Millisecond).UnixNano()) // cutoff: 10:00:05.9 → 10:00:05
	res, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{AckedMessages: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if res.AckedMessages.Removed != 1 || count(t, db, "messages", "id = 'M-after'") != 1 {
		t.Errorf("removed %d; M-after kept: %d", res.AckedMessages.Removed, count(t, db, "messages", "id = 'M-after'"))
	}
	if !res.AckedMessages.Before.Equal(base) {
		t.Errorf("before = %v, want %v", res.AckedMessages.Before, base)
	}
}

// importAcked stores n acknowledged messages with body, acknowledged at
// t0, in one bulk write (Import), and returns their ids.
func importAcked(t testing.TB, db *DB, n int, body string) []string {
	t.Helper()
	at := t0
	h := History{}
	ids := make([]string, n)
	for i := range n {
		ids[i] = seqID("M", i)
		h.Messages = append(h.Messages, model.Message{ID: ids[i], From: "codex", To: "claude", Body: body,
			State: model.MessageAcked, CreatedAt: at, ReadAt: &at, AckedAt: &at})
	}
	if err := db.Import(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A pass takes batches of bounded size, and on a database the relay
// created (auto_vacuum=INCREMENTAL) gives the freed pages back: the file
// shrinks. The next writes work as before.
func TestPruneBatchesAndGivesSpaceBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newTestClock(t0)
	path := filepath.Join(t.TempDir(), "relay.db")
	db := MustOpen(t, path, Options{Clock: clock.now, Synchronous: SyncNormal})
	body := strings.Repeat("b", 4<<10)
	n := 2*pruneMessageBatch + 10
	importAcked(t, db, n, body)
	clock.advance(time.Hour)
	before, err := storageOf(db)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{AckedMessages: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if res.AckedMessages.Removed != n || res.Batches != 3 || res.AckedMessages.Bytes != int64(n*len(body)) {
		t.Errorf("pass = %+v; want %d messages in 3 batches", res.PruneReport, n)
	}
	if res.ReclaimedBytes < int64(n*len(body))*9/10 || res.FreeBytes != 0 || res.DatabaseBytes >= before.size() {
		t.Errorf("pass = %+v; want about %d bytes given back (database was %d)", res.PruneReport, n*len(body), before.size())
	}
	if err := trySend(db, "M-next", "claude", "after"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > res.DatabaseBytes+64<<10 {
		t.Errorf("the file is %d bytes once checkpointed, the pass reported %d", fi.Size(), res.DatabaseBytes)
	}
	t.Logf("database %d → %d bytes (file %d); %+v", before.size(), res.DatabaseBytes, fi.Size(), res.PruneReport)
}

func storageOf(db *DB) (storage, error) { return storageStats(context.Background(), db.rq) }

// The prune queries walk their partial indexes (a full scan would read
// every body, which precedes state in the row), and tasks_ended lists
// exactly the terminal states.
func TestPruneQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	db := MustOpenTemp(t)
	for query, index := range map[string]string{
		qPruneMessagesPick: "messages_acked", qPruneMessagesSum: "messages_acked",
		qPruneTasksPick: "tasks_ended", qPruneTasksSum: "tasks_ended",
	} {
		rows, err := db.reader.DB.Query("EXPLAIN QUERY PLAN "+query, "2026-01-01T00:00:00", 10)
		if err != nil {
			rows, err = db.reader.DB.Query("EXPLAIN QUERY PLAN "+query, "2026-01-01T00:00:00")
		}
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			_ = rows.Scan(&id, &parent, &unused, &detail)
			plan = append(plan, detail)
		}
		rows.Close()
		if !strings.Contains(strings.Join(plan, "; "), "USING INDEX "+index) {
			t.Errorf("%s\nplan: %v; want it to use %s", query, plan, index)
		}
	}
	var ddl string
	if err := db.reader.DB.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'tasks_ended'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range model.AllStates() {
		if s.Terminal() {
			want = append(want, string(s))
		}
	}
	got := regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(ddl, -1)
	var states []string
	for _, m := range got {
		states = append(states, m[1])
	}
	if !slices.Equal(states, want) {
		t.Errorf("tasks_ended lists %v, the terminal states are %v", states, want)
	}
}

// settle waits until the writer has done what the setup left it (a
// catch-up checkpoint of the setup's writes runs between two batches),
// so that a timed write measures itself only.
func settle(b *testing.B, db *DB) {
	b.Helper()
	for range 2 {
		if err := db.write(context.Background(), func(context.Context, *writeTx) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPruneBatch measures one batch of each kind (the time the
// writer is held by it) and one incremental vacuum step.
func BenchmarkPruneBatch(b *testing.B) {
	for _, size := range []int{2 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("messages/body=%dKiB", size>>10), func(b *testing.B) {
			ctx := context.Background()
			clock := newTestClock(t0)
			db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{Clock: clock.now, Synchronous: SyncNormal,
				InboxMessages: NoLimit, InboxBytes: NoLimit})
			body := strings.Repeat("b", size)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				ids := make([]string, pruneMessageBatch)
				for j := range ids {
					ids[j] = fmt.Sprintf("M-%d-%d", i, j)
					if err := trySend(db, ids[j], "claude", body); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := db.Ack(ctx, "claude", ids); err != nil {
					b.Fatal(err)
				}
				clock.advance(time.Hour)
				settle(b, db)
				b.StartTimer()
				err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
					got, err := db.pruneMessages(ctx, w, PruneOptions{}, cutoffOf(clock.now(), time.Minute))
					if err == nil && len(got.ids) != min(pruneMessageBatch, pruneBatchBytes/size) {
						err = fmt.Errorf("pruned %d", len(got.ids))
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("tasks", func(b *testing.B) {
		ctx := context.Background()
		clock := newTestClock(t0)
		db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{Clock: clock.now, Synchronous: SyncNormal,
			InboxMessages: NoLimit, InboxBytes: NoLimit})
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			for j := range pruneTaskBatch {
				task := newTask(fmt.Sprintf("T-%d-%d", i, j))
				task.Prompt = strings.Repeat("p", 4<<10)
				mustCreate(b, db, task)
				if _, err := db.Transition(ctx, model.Transition{TaskID: task.ID, From: model.StateSubmitted, To: model.StateRejected,
					Trigger: model.TriggerReject, Verdicts: []model.Verdict{{Gate: model.GateMissionLease}}}); err != nil {
					b.Fatal(err)
				}
			}
			clock.advance(time.Hour)
			settle(b, db)
			b.StartTimer()
			err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
				got, err := db.pruneTasks(ctx, w, PruneOptions{}, cutoffOf(clock.now(), time.Minute))
				if err == nil && len(got.ids) != pruneTaskBatch {
					err = fmt.Errorf("pruned %d", len(got.ids))
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("vacuum_step", func(b *testing.B) {
		ctx := context.Background()
		db := MustOpen(b, filepath.Join(b.TempDir(), "relay.db"), Options{Synchronous: SyncNormal, InboxMessages: NoLimit, InboxBytes: NoLimit})
		body := strings.Repeat("v", 256<<10)
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			// 20 MiB stored, the first half deleted: a step moves live
			// pages from the end into the hole.
			var ids []string
			for j := range 80 {
				id := fmt.Sprintf("M-%d-%d", i, j)
				if err := trySend(db, id, "claude", body); err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
				return deleteAll(ctx, w, ids[:40], qPruneMessagesDel)
			}); err != nil {
				b.Fatal(err)
			}
			settle(b, db)
			b.StartTimer()
			if err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
				_, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", vacuumStepPages))
				return err
			}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
				if err := deleteAll(ctx, w, ids[40:], qPruneMessagesDel); err != nil {
					return err
				}
				_, err := w.ExecContext(ctx, "PRAGMA incremental_vacuum")
				return err
			}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// A pass with a time budget stops between batches once it is spent,
// after at least one batch, and says More; passes run again until More
// is false remove everything, each batch once.
func TestPruneBudgetStopsBetweenBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newTestClock(t0)
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Clock: clock.now, Synchronous: SyncNormal})
	n := pruneMessageBatch + 5
	importAcked(t, db, n, "b")
	clock.advance(time.Hour)
	policy := model.RetentionPolicy{AckedMessages: time.Minute}
	total, passes := 0, 0
	for {
		res, err := db.Prune(ctx, PruneOptions{Policy: policy, Budget: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		passes++
		total += res.AckedMessages.Removed
		if res.Batches > 1 {
			t.Errorf("pass %d took %d batches with a spent budget", passes, res.Batches)
		}
		if !res.More {
			break
		}
		if passes > 5 {
			t.Fatal("passes never ended")
		}
	}
	if total != n || passes != 2 {
		t.Errorf("removed %d in %d passes, want %d in 2", total, passes, n)
	}
}

// The audit retention cuts the oldest rows as a prefix of the chain,
// behind a checkpoint keeping the hash of the last row cut: the chain
// verifies before and after, from the checkpoint; the cut is recorded in
// the chain (audit.checkpoint, naming the same row and hash); a row not
// older than the period is kept, and so is everything after it; a dry
// run counts and cuts nothing; a second pass has nothing to cut; a
// checkpoint moved by hand, or a row before it put back, is caught.
func TestPruneAuditKeepsTheChainVerifiable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newTestClock(t0)
	path := filepath.Join(t.TempDir(), "relay.db")
	db := MustOpen(t, path, Options{Clock: clock.now})
	for i := range 10 {
		if err := trySend(db, seqID("M-old", i), "claude", "old"); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(48 * time.Hour)
	for i := range 3 {
		if err := trySend(db, seqID("M-new", i), "claude", "new"); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(time.Hour)
	before := count(t, db, "audit_log", "")
	policy := model.RetentionPolicy{Audit: 24 * time.Hour}
	dry, err := db.Prune(ctx, PruneOptions{Policy: policy, DryRun: true})
	if err != nil || dry.Audit.Removed != 10 {
		t.Fatalf("dry run: %+v, %v; want 10 rows to cut", dry.Audit, err)
	}
	if n := count(t, db, "audit_log", ""); n != before {
		t.Fatalf("a dry run cut %d rows", before-n)
	}
	var lastHash string
	if err := db.rq.QueryRowContext(ctx, `SELECT hash FROM audit_log WHERE seq = 10`).Scan(&lastHash); err != nil {
		t.Fatal(err)
	}
	got, err := db.Prune(ctx, PruneOptions{Policy: policy, Actor: "operator", Trigger: "operator"})
	if err != nil || got.Audit.Removed != 10 {
		t.Fatalf("prune: %+v, %v; want 10 rows cut", got.Audit, err)
	}
	if n := count(t, db, "audit_log", ""); n != before-10+1 {
		t.Errorf("%d rows after the cut, want %d (the 3 new, and the checkpoint row)", n, before-10+1)
	}
	if n := count(t, db, "audit_log", "kind = 'audit.checkpoint' AND json_extract(data, '$.through_seq') = '10' AND json_extract(data, '$.through_hash') = ?", lastHash); n != 1 {
		t.Errorf("audit.checkpoint rows naming row 10 and its hash: %d, want 1", n)
	}
	rep, err := db.VerifyAudit(ctx)
	if err != nil || !rep.OK || rep.Checkpoint != 10 || rep.Rows != int64(before-10+1) {
		t.Fatalf("verify after the cut: %+v, %v", rep, err)
	}
	if again, err := db.Prune(ctx, PruneOptions{Policy: policy}); err != nil || again.Audit.Removed != 0 {
		t.Errorf("a second pass: %+v, %v; want nothing to cut", again.Audit, err)
	}
	// Rows the checkpoint does not cover are still append-only.
	wantCode(t, db.write(ctx, func(ctx context.Context, w *writeTx) error {
		_, err := w.ExecContext(ctx, `DELETE FROM audit_log WHERE seq = 11`)
		return err
	}), model.CodeInternal)
	// A checkpoint moved by hand disagrees with the chain.
	raw := rawOpen(t, path)
	mustExec(t, raw, `UPDATE audit_checkpoint SET seq = 11, hash = (SELECT hash FROM audit_log WHERE seq = 11)`)
	mustExec(t, raw, `DELETE FROM audit_log WHERE seq = 11`)
	if rep, err := db.VerifyAudit(ctx); err != nil || rep.OK {
		t.Errorf("verify with a checkpoint moved by hand: %+v, %v; want it caught", rep, err)
	}
}
