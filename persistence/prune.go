package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hai-relay/relay/model"
)

// Retention. Prune removes what the retention policy says is done with:
// acknowledged messages acknowledged long enough ago, and tasks in a
// terminal state that ended long enough ago, with their events and gate
// verdicts. Nothing else is ever removed: a message that is not
// acknowledged and a task that has not ended are kept whatever their age
// (the queries below select only state 'acked' and the terminal states).
//
// The audit log does not need what is removed to verify: its rows carry
// the digests of bodies, prompts and results (body_sha256, prompt_sha256,
// result_sha256), never the text, so the chain verifies as before and
// still vouches for what was sent. Each batch appends one
// "retention.pruned" row naming what it removed. The audit log has a
// retention of its own (Policy.Audit): its oldest rows are cut as a
// prefix of the chain behind a checkpoint (pruneAudit).

// Defaults of the retention policy ([retention] in config.toml).
const (
	// DefaultAckedMessagesRetention keeps an acknowledged message for 30
	// days after its acknowledgement.
	DefaultAckedMessagesRetention = 30 * 24 * time.Hour
	// DefaultTerminalTasksRetention keeps an ended task for 90 days after
	// it ended.
	DefaultTerminalTasksRetention = 90 * 24 * time.Hour
	// DefaultAuditRetention keeps an audit row for a year: the log grows
	// with every write (a few hundred bytes a row), and a year of evidence
	// outlives the default retention of what it records; the rows cut
	// leave their digest in the checkpoint.
	DefaultAuditRetention = 365 * 24 * time.Hour
)

// Batch bounds: each batch is one write transaction, so that a pass
// never holds the writer long, and the writer serves other requests
// between two batches. A batch ends at its row bound or once it holds
// pruneBatchBytes (it always holds one row). Measured with
// BenchmarkPruneBatch on this project's 2-core machine: a batch of 256
// messages of 2 KiB holds the writer 4 ms, one of 32 messages of
// 256 KiB (the byte bound) 14 ms, one of 64 tasks 2–3 ms, and one
// vacuum step of 1,024 pages about 35 ms.
const (
	pruneMessageBatch = 256
	pruneTaskBatch    = 64
	pruneBatchBytes   = 8 << 20
	// vacuumStepPages is how many free pages one incremental_vacuum step
	// gives back (4 MiB of 4 KiB pages; it moves as many live pages from
	// the end of the file into free ones, which is its cost).
	vacuumStepPages = 1024
)

// PruneOptions configures one pass of Prune.
type PruneOptions struct {
	Policy model.RetentionPolicy
	// DryRun counts what the pass would remove, in one read snapshot, and
	// writes nothing.
	DryRun bool
	// Actor is who asked, for the audit rows (the relay itself for the
	// daemon's own passes, "operator" for `relay prune`); Trigger says
	// why ("start", "periodic", "operator").
	Actor, Trigger string
	// Budget, when set, bounds the pass's time: once it is spent no
	// further batch or vacuum step starts (each pass does at least one
	// of each, so passes always progress), and the report says More.
	// Zero runs to the end.
	Budget time.Duration
}

// PruneResult is a pass's report, and the ids of the tasks it removed
// (their agent logs, outside the database, are the caller's to remove).
type PruneResult struct {
	model.PruneReport
	TaskIDs []string
	// stop says the budget is spent.
	stop func() bool
}

// cutoff is where a pass stops: rows stamped before it go. Times are
// stored as RFC 3339 text whose fraction has its trailing zeros cut, so
// two stamps within one second do not always compare as their times do.
// The cutoff is therefore the start of a whole second, compared as its
// text up to the seconds ("2026-01-02T03:04:05", no zone): every stamp
// of an earlier second is below it, and every stamp of that second or
// later (which carries more characters after the same prefix) is not. A
// pass removes at most what the policy says, and keeps up to one second
// more.
type cutoff struct {
	at   time.Time
	text string
}

func cutoffOf(now time.Time, keep time.Duration) *cutoff {
	if keep <= 0 {
		return nil
	}
	at := now.Add(-keep).UTC().Truncate(time.Second)
	return &cutoff{at: at, text: at.Format("2006-01-02T15:04:05")}
}

// terminalList is the terminal states as SQL, in the order of
// tasks_ended's WHERE clause (0006): SQLite uses a partial index only
// for a query whose WHERE contains the index's own terms.
var terminalList = func() string {
	var q []string
	for _, s := range model.AllStates() {
		if s.Terminal() {
			q = append(q, "'"+string(s)+"'")
		}
	}
	return strings.Join(q, ", ")
}()

// The prune statements. Each batch selects the oldest rows past the
// cutoff, by the partial indexes messages_acked and tasks_ended, and
// deletes exactly those (the ids bound as one JSON array, so that one
// statement text serves every batch size).
var (
	qPruneMessagesPick = `SELECT id, octet_length(body) FROM messages WHERE state = 'acked' AND acked_at < ? ORDER BY acked_at LIMIT ?`
	qPruneMessagesDel  = `DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?))`
	qPruneMessagesSum  = `SELECT count(*), IFNULL(sum(octet_length(body)), 0) FROM messages WHERE state = 'acked' AND acked_at < ?`
	qPruneTasksPick    = `SELECT id, octet_length(prompt) + octet_length(result) FROM tasks WHERE state IN (` + terminalList + `) AND updated_at < ? ORDER BY updated_at LIMIT ?`
	qPruneTasksSum     = `SELECT count(*), IFNULL(sum(octet_length(prompt) + octet_length(result)), 0) FROM tasks WHERE state IN (` + terminalList + `) AND updated_at < ?`
	qPruneVerdictsDel  = `DELETE FROM task_verdicts WHERE task_id IN (SELECT value FROM json_each(?))`
	qPruneEventsDel    = `DELETE FROM task_events WHERE task_id IN (SELECT value FROM json_each(?))`
	qPruneOnceDel      = `DELETE FROM audit_once WHERE task_id IN (SELECT value FROM json_each(?))`
	qPruneTasksDel     = `DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(?))`
)

// Prune runs one pass of the retention policy o.Policy: it removes, in
// batches of at most a few hundred rows, each one write transaction with
// its audit row, the acknowledged messages acknowledged before
// now − AckedMessages and the ended tasks that ended before now −
// TerminalTasks (a zero duration keeps them forever). Then, on a
// database made with auto_vacuum=INCREMENTAL (every database the relay
// creates), it gives the freed pages back to the filesystem, in steps of
// vacuumStepPages; on an older one they stay free inside the file, and
// later writes reuse them before the file grows.
//
// A pass stopped by ctx returns what it removed so far with ctx's error;
// every batch it committed stays committed (and audited).
func (db *DB) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	now := db.now()
	msgCut, taskCut := cutoffOf(now, o.Policy.AckedMessages), cutoffOf(now, o.Policy.TerminalTasks)
	auditCut := cutoffOf(now, o.Policy.Audit)
	var res PruneResult
	res.stop = func() bool { return false }
	if o.Budget > 0 {
		// The budget runs on the monotonic clock, not the store's.
		end := time.Now().Add(o.Budget)
		res.stop = func() bool { return !time.Now().Before(end) }
	}
	res.DryRun, res.At = o.DryRun, now
	res.AckedMessages = newPruneCount(o.Policy.AckedMessages, msgCut)
	res.TerminalTasks = newPruneCount(o.Policy.TerminalTasks, taskCut)
	res.Audit = newPruneCount(o.Policy.Audit, auditCut)
	if o.DryRun {
		err := db.readTx(ctx, func(ctx context.Context, q querier) error {
			if err := pruneSum(ctx, q, qPruneMessagesSum, msgCut, &res.AckedMessages); err != nil {
				return err
			}
			if err := pruneSum(ctx, q, qPruneTasksSum, taskCut, &res.TerminalTasks); err != nil {
				return err
			}
			if err := pruneSum(ctx, q, qPruneAuditSum, auditCut, &res.Audit); err != nil {
				return err
			}
			st, err := storageStats(ctx, q)
			res.FreeBytes, res.DatabaseBytes = st.free(), st.size()
			return err
		})
		return res, wrap("prune", err)
	}
	if msgCut != nil {
		err := db.pruneBatches(ctx, &res, &res.AckedMessages, func(ctx context.Context, w *writeTx) (batchOut, error) {
			return db.pruneMessages(ctx, w, o, msgCut)
		})
		if err != nil {
			return res, err
		}
	}
	if taskCut != nil && !res.More {
		err := db.pruneBatches(ctx, &res, &res.TerminalTasks, func(ctx context.Context, w *writeTx) (batchOut, error) {
			return db.pruneTasks(ctx, w, o, taskCut)
		})
		if err != nil {
			return res, err
		}
	}
	if auditCut != nil && !res.More {
		err := db.pruneBatches(ctx, &res, &res.Audit, func(ctx context.Context, w *writeTx) (batchOut, error) {
			return db.pruneAudit(ctx, w, o, auditCut)
		})
		if err != nil {
			return res, err
		}
	}
	err := db.vacuum(ctx, &res)
	if err == nil && res.AckedMessages.Removed+res.TerminalTasks.Removed+res.Audit.Removed > 0 {
		db.truncateWAL(ctx)
	}
	return res, err
}

// truncateWAL copies the WAL into the database file and truncates the WAL
// to nothing, on the writer's connection between two batches (it waits
// for that connection as a write would), so that what a pass freed is
// back on the filesystem at once: the file shrinks by the pages the
// vacuum gave back only once they are checkpointed, and the WAL keeps
// the size the pass's own writes gave it until it is truncated. A reader
// in the middle of a read may hold it up for the busy timeout; a
// checkpoint that cannot finish is left to the next one.
func (db *DB) truncateWAL(ctx context.Context) {
	db.gw.ckptMu.Lock()
	defer db.gw.ckptMu.Unlock()
	var busy, frames, copied int
	_ = db.writer.DB.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied)
}

func newPruneCount(keep time.Duration, c *cutoff) model.PruneCount {
	pc := model.PruneCount{Retention: keep.String()}
	if c != nil {
		at := c.at
		pc.Before = &at
	}
	return pc
}

// pruneSum counts (a dry run) what query selects before c.
func pruneSum(ctx context.Context, q querier, query string, c *cutoff, pc *model.PruneCount) error {
	if c == nil {
		return nil
	}
	return q.QueryRowContext(ctx, query, c.text).Scan(&pc.Removed, &pc.Bytes)
}

// pruneBatches runs batch, each run one write, until one stops short of
// its bounds. What a batch removed is counted in pc (and, for tasks, its
// ids kept) only once its transaction committed.
func (db *DB) pruneBatches(ctx context.Context, res *PruneResult, pc *model.PruneCount,
	batch func(ctx context.Context, w *writeTx) (batchOut, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var b batchOut
		err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
			var err error
			b, err = batch(ctx, w)
			return err
		})
		if err != nil {
			return wrap("prune", err)
		}
		if len(b.ids) == 0 {
			return nil
		}
		res.Batches++
		pc.Removed += len(b.ids)
		pc.Bytes += b.bytes
		if pc == &res.TerminalTasks {
			res.TaskIDs = append(res.TaskIDs, b.ids...)
		}
		if !b.more {
			return nil
		}
		if res.stop() {
			res.More = true
			return nil
		}
	}
}

// batchOut is what one prune batch removed: the ids, the bytes they held,
// and whether it stopped at a bound with more rows past the cutoff.
type batchOut struct {
	ids   []string
	bytes int64
	more  bool
}

// pick runs a prune selection of at most limit rows, and keeps the ids
// up to pruneBatchBytes (at least one).
func pick(ctx context.Context, w *writeTx, query string, c *cutoff, limit int) (batchOut, error) {
	rows, err := w.QueryContext(ctx, query, c.text, limit)
	if err != nil {
		return batchOut{}, err
	}
	defer rows.Close()
	var b batchOut
	read := 0
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return batchOut{}, err
		}
		read++
		if len(b.ids) > 0 && b.bytes+n > pruneBatchBytes {
			b.more = true
			break
		}
		b.ids, b.bytes = append(b.ids, id), b.bytes+n
	}
	b.more = b.more || read == limit
	return b, rows.Err()
}

// deleteAll runs each query with ids as its JSON array; the last one must
// remove exactly len(ids) rows.
func deleteAll(ctx context.Context, w *writeTx, ids []string, queries ...string) error {
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	for i, q := range queries {
		r, err := w.ExecContext(ctx, q, string(list))
		if err != nil {
			return err
		}
		if i < len(queries)-1 {
			continue
		}
		if n, err := r.RowsAffected(); err != nil || n != int64(len(ids)) {
			return fmt.Errorf("pruned %d rows, expected %d (%v)", n, len(ids), err)
		}
	}
	return nil
}

// pruneMessages removes one batch of acknowledged messages, and audits it.
func (db *DB) pruneMessages(ctx context.Context, w *writeTx, o PruneOptions, c *cutoff) (batchOut, error) {
	b, err := pick(ctx, w, qPruneMessagesPick, c, pruneMessageBatch)
	if err != nil || len(b.ids) == 0 {
		return batchOut{}, err
	}
	if err := deleteAll(ctx, w, b.ids, qPruneMessagesDel); err != nil {
		return batchOut{}, err
	}
	return b, w.audit(ctx, pruned(db.now(), o, "acked_messages", c, b))
}

// pruneTasks removes one batch of ended tasks with their verdicts and
// events, and audits it.
func (db *DB) pruneTasks(ctx context.Context, w *writeTx, o PruneOptions, c *cutoff) (batchOut, error) {
	b, err := pick(ctx, w, qPruneTasksPick, c, pruneTaskBatch)
	if err != nil || len(b.ids) == 0 {
		return batchOut{}, err
	}
	if err := deleteAll(ctx, w, b.ids, qPruneVerdictsDel, qPruneEventsDel, qPruneOnceDel, qPruneTasksDel); err != nil {
		return batchOut{}, err
	}
	return b, w.audit(ctx, pruned(db.now(), o, "terminal_tasks", c, b))
}

// pruneAuditBatch bounds the audit rows one batch cuts (a few hundred
// bytes each).
const pruneAuditBatch = 4096

// pruneAudit cuts one batch of the oldest audit rows, a prefix of the
// chain stamped before c: it moves the checkpoint to the last row cut
// (its seq and hash, the digest of every row up to it), deletes the rows
// up to it, and appends an "audit.checkpoint" row that names the same
// row and hash, so that the chain still verifies from the checkpoint and
// records what was cut. A row stamped after c ends the prefix, even when
// older ones follow it.
func (db *DB) pruneAudit(ctx context.Context, w *writeTx, o PruneOptions, c *cutoff) (batchOut, error) {
	var from int64
	var fromHash string
	if err := w.QueryRowContext(ctx, qAuditCheckpoint).Scan(&from, &fromHash); err != nil {
		return batchOut{}, err
	}
	rows, err := w.QueryContext(ctx, qPruneAuditPick, from, pruneAuditBatch)
	if err != nil {
		return batchOut{}, err
	}
	var b batchOut
	var lastSeq int64
	var lastHash string
	read := 0
	for rows.Next() {
		var seq int64
		var hash, at string
		if err := rows.Scan(&seq, &hash, &at); err != nil {
			rows.Close()
			return batchOut{}, err
		}
		read++
		if at >= c.text {
			break
		}
		lastSeq, lastHash = seq, hash
		b.ids = append(b.ids, strconv.FormatInt(seq, 10))
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(b.ids) == 0 {
		return batchOut{}, err
	}
	b.more = read == pruneAuditBatch && len(b.ids) == read
	now := db.now()
	if _, err := w.ExecContext(ctx, qAuditCheckpointSet, lastSeq, lastHash, formatTime(now)); err != nil {
		return batchOut{}, err
	}
	res, err := w.ExecContext(ctx, qPruneAuditDel, from, lastSeq)
	if err != nil {
		return batchOut{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(b.ids)) {
		return batchOut{}, fmt.Errorf("cut %d audit rows, expected %d (%v)", n, len(b.ids), err)
	}
	return b, w.audit(ctx, model.AuditEvent{At: now, Kind: auditCheckpointKind, Actor: o.Actor, Data: auditData{
		"from_seq": strconv.FormatInt(from+1, 10), "through_seq": strconv.FormatInt(lastSeq, 10), "through_hash": lastHash,
		"rows": strconv.Itoa(len(b.ids)), "from_hash": fromHash, "before": c.at.Format(time.RFC3339),
		"retention": o.Policy.Audit.String(),
	}.set("trigger", o.Trigger)})
}

// pruned is the audit row of one prune batch.
func pruned(at time.Time, o PruneOptions, what string, c *cutoff, b batchOut) model.AuditEvent {
	actor := o.Actor
	if actor == "" {
		actor = model.RelayAgent
	}
	return model.AuditEvent{At: at, Kind: "retention.pruned", Actor: actor,
		Data: auditData{"what": what, "count": strconv.Itoa(len(b.ids)), "bytes": strconv.FormatInt(b.bytes, 10),
			"before": formatTime(c.at), "ids": strings.Join(b.ids, ",")}.set("trigger", o.Trigger)}
}

// storage is the database's page counts.
type storage struct{ pages, freePages, pageSize, autoVacuum int64 }

func (s storage) free() int64 { return s.freePages * s.pageSize }
func (s storage) size() int64 { return s.pages * s.pageSize }

func storageStats(ctx context.Context, q querier) (storage, error) {
	var s storage
	for _, p := range []struct {
		pragma string
		into   *int64
	}{{"page_count", &s.pages}, {"freelist_count", &s.freePages}, {"page_size", &s.pageSize}, {"auto_vacuum", &s.autoVacuum}} {
		if err := q.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.into); err != nil {
			return s, err
		}
	}
	return s, nil
}

// vacuum gives the database's free pages back to the filesystem when it
// was made with auto_vacuum=INCREMENTAL (2), one bounded step per write,
// and fills in the report's storage figures.
func (db *DB) vacuum(ctx context.Context, res *PruneResult) error {
	var first, st storage
	step := func(ctx context.Context, w *writeTx, run bool) error {
		if run {
			if _, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA incremental_vacuum(%d)", vacuumStepPages)); err != nil {
				return err
			}
		}
		var err error
		st, err = storageStats(ctx, w)
		return err
	}
	if err := db.write(ctx, func(ctx context.Context, w *writeTx) error { return step(ctx, w, false) }); err != nil {
		return wrap("prune: vacuum", err)
	}
	first = st
	for st.autoVacuum == 2 && st.freePages > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if res.More {
			break // the budget is spent; the next pass gives them back
		}
		before := st.freePages
		if err := db.write(ctx, func(ctx context.Context, w *writeTx) error { return step(ctx, w, true) }); err != nil {
			// The rows are gone already; what could not be given back
			// stays free inside the file, for later writes. A step
			// needs room in the WAL for the pages it moves: on a disk
			// that is full, the pass ends with them free inside.
			res.ReclaimedBytes = first.size() - st.size()
			res.FreeBytes, res.DatabaseBytes = st.free(), st.size()
			if model.ErrorCode(err) == model.CodeStorageFull {
				return nil
			}
			return wrap("prune: vacuum", err)
		}
		if st.freePages >= before {
			break
		}
		if st.freePages > 0 && res.stop() {
			res.More = true
		}
	}
	res.ReclaimedBytes = first.size() - st.size()
	res.FreeBytes, res.DatabaseBytes = st.free(), st.size()
	return nil
}
