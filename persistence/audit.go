package persistence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
)

// GenesisHash is the prev_hash of the first audit row: 64 zeros.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// canonicalVersion opens every canonical encoding, so a future change of
// encoding cannot be confused with this one.
const canonicalVersion = "relay-audit-v1"

// CanonicalAudit returns the deterministic byte encoding of an audit row
// that its hash covers. It is a sequence of netstrings ("<len>:<bytes>,",
// len in decimal bytes), in this order:
//
//  1. "relay-audit-v1"
//  2. seq, in decimal
//  3. at, as RFC 3339 with nanoseconds in UTC (time.RFC3339Nano, trailing
//     zeros of the fraction dropped, "Z" for the zone)
//  4. kind
//  5. actor
//  6. task_id
//  7. message_id
//  8. the number of data keys, in decimal
//  9. then, for each data key in ascending byte order: the key, the value
//
// PrevHash and Hash are not part of it: a row's hash is
// ChainHash(prev_hash, row) = hex(sha256(prev_hash || CanonicalAudit(row))),
// with prev_hash as its 64 ASCII hex characters, and GenesisHash as the
// prev_hash of row 1. Length prefixes make the encoding unambiguous whatever
// bytes the fields hold.
func CanonicalAudit(ev model.AuditEvent) []byte {
	b := make([]byte, 0, 256)
	b = appendNetstring(b, canonicalVersion)
	b = appendNetstring(b, strconv.FormatInt(ev.Seq, 10))
	b = appendNetstring(b, formatTime(ev.At))
	b = appendNetstring(b, ev.Kind)
	b = appendNetstring(b, ev.Actor)
	b = appendNetstring(b, ev.TaskID)
	b = appendNetstring(b, ev.MessageID)
	keys := make([]string, 0, len(ev.Data))
	for k := range ev.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = appendNetstring(b, strconv.Itoa(len(keys)))
	for _, k := range keys {
		b = appendNetstring(b, k)
		b = appendNetstring(b, ev.Data[k])
	}
	return b
}

// ChainHash returns hex(sha256(prevHash || CanonicalAudit(ev))).
func ChainHash(prevHash string, ev model.AuditEvent) string {
	h := sha256.New()
	h.Write([]byte(prevHash))
	h.Write(CanonicalAudit(ev))
	return hex.EncodeToString(h.Sum(nil))
}

func appendNetstring(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	b = append(b, s...)
	return append(b, ',')
}

// audit appends ev to the chain: it assigns seq, prev_hash and hash, and
// inserts the row. At must be set by the caller.
func (w *writeTx) audit(ctx context.Context, ev model.AuditEvent) error {
	if !w.head.loaded {
		err := w.QueryRowContext(ctx, qAuditHead).Scan(&w.head.seq, &w.head.hash)
		if err != nil {
			return fmt.Errorf("audit head: %w", err)
		}
		w.head.loaded = true
	}
	// Store and hash what a reader will get back: JSON turns invalid
	// UTF-8 into U+FFFD, so hash the decoded form, not the original map.
	// For valid UTF-8 (nearly always) the decoded form is the map itself,
	// and the decoding is skipped.
	data, err := jsonObject(ev.Data)
	if err != nil {
		return fmt.Errorf("audit data: %w", err)
	}
	if !validUTF8Map(ev.Data) {
		if ev.Data, err = fromJSONObject(data); err != nil {
			return fmt.Errorf("audit data: %w", err)
		}
	}
	ev.At = normTime(ev.At)
	ev.Seq = w.head.seq + 1
	ev.PrevHash = w.head.hash
	ev.Hash = ChainHash(ev.PrevHash, ev)
	row := newAuditRow(ev, data)
	if _, err := w.ExecContext(ctx, qAuditInsert, auditBind.args(&row)...); err != nil {
		return fmt.Errorf("audit append: %w", err)
	}
	w.head.seq, w.head.hash, w.head.dirty = ev.Seq, ev.Hash, true
	return nil
}

// validUTF8Map reports whether every key and value of m is valid UTF-8,
// so that m survives a JSON round trip unchanged.
func validUTF8Map(m map[string]string) bool {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

// flushAudit moves audit_head to the last appended row.
func (w *writeTx) flushAudit(ctx context.Context) error {
	if !w.head.dirty {
		return nil
	}
	res, err := w.ExecContext(ctx, qAuditHeadUpdate, w.head.seq, w.head.hash)
	if err != nil {
		return fmt.Errorf("audit head: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("audit head: updated %d rows (%v)", n, err)
	}
	w.head.dirty = false
	return nil
}

// Audit appends one standalone audit row. Kind is required; a zero At is
// stamped with the clock; Seq, PrevHash and Hash are assigned here.
func (db *DB) Audit(ctx context.Context, ev model.AuditEvent) error {
	if ev.Kind == "" {
		return model.InvalidArgs("audit event without a kind")
	}
	var err error
	if ev.At, err = stamp("audit time", ev.At, db.now); err != nil {
		return err
	}
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		return w.audit(ctx, ev)
	})
	return wrap("audit", err)
}

// AuditIfRoom implements model.Store: ev is appended only while the
// free-space reserve ([storage] min_free_bytes) is not reached, checked
// in the append's own transaction as a new message's is; else nothing is
// written and it reports false.
func (db *DB) AuditIfRoom(ctx context.Context, ev model.AuditEvent) (bool, error) {
	if ev.Kind == "" {
		return false, model.InvalidArgs("audit event without a kind")
	}
	var err error
	if ev.At, err = stamp("audit time", ev.At, db.now); err != nil {
		return false, err
	}
	wrote := false
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		wrote = false
		switch err := db.checkRoom(ctx, w, 0); {
		case model.ErrorCode(err) == model.CodeStorageFull:
			return nil
		case err != nil:
			return err
		}
		if err := w.audit(ctx, ev); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, wrap("audit", err)
}

// The audit retention's statements (0009) and its row's kind.
const (
	auditCheckpointKind = "audit.checkpoint"
	qAuditCheckpoint    = `SELECT seq, hash FROM audit_checkpoint WHERE id = 1`
	qAuditCheckpointSet = `UPDATE audit_checkpoint SET seq = ?, hash = ?, at = ? WHERE id = 1`
	qPruneAuditPick     = `SELECT seq, hash, at FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?`
	qPruneAuditDel      = `DELETE FROM audit_log WHERE seq > ? AND seq <= ?`
	// The rows a pass would cut: the prefix after the checkpoint up to the
	// first row not older than the cutoff.
	qPruneAuditSum = `SELECT count(*), 0 FROM audit_log WHERE seq > (SELECT seq FROM audit_checkpoint WHERE id = 1)
		AND seq < IFNULL((SELECT seq FROM audit_log WHERE seq > (SELECT seq FROM audit_checkpoint WHERE id = 1) AND at >= ? ORDER BY seq LIMIT 1), 9223372036854775807)`
)

// The audit_once statements (0008).
const (
	qAuditOnceGet    = `SELECT seq FROM audit_once WHERE task_id = ? AND kind = ?`
	qAuditOnceInsert = `INSERT INTO audit_once (task_id, kind, seq) VALUES (?, ?, ?)`
)

// AuditOnce implements model.Store: it appends ev unless AuditOnce
// already appended a row of its kind for its task, or when after is not
// "" and no row of kind after was appended for it, and reports whether it
// appended one. A repeated call changes nothing and writes nothing (the
// repeat is answered from a read, without the writer). It is not held to
// the free-space reserve: it writes at most one row per task and kind,
// and the task it names was (new tasks are), so the cancels and reads
// that call it keep working on a nearly full disk.
func (db *DB) AuditOnce(ctx context.Context, ev model.AuditEvent, after string) (bool, error) {
	if ev.Kind == "" || ev.TaskID == "" {
		return false, model.InvalidArgs("audit event without a kind or a task")
	}
	var err error
	if ev.At, err = stamp("audit time", ev.At, db.now); err != nil {
		return false, err
	}
	var seq int64
	switch err := db.rq.QueryRowContext(ctx, qAuditOnceGet, ev.TaskID, ev.Kind).Scan(&seq); {
	case err == nil:
		return false, nil // the common repeat, answered without the writer
	case !errors.Is(err, sql.ErrNoRows):
		return false, wrap("audit", err)
	}
	if after != "" {
		switch err := db.rq.QueryRowContext(ctx, qAuditOnceGet, ev.TaskID, after).Scan(&seq); {
		case errors.Is(err, sql.ErrNoRows):
			return false, nil // the effect it follows never happened
		case err != nil:
			return false, wrap("audit", err)
		}
	}
	wrote := false
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		wrote = false
		switch err := w.QueryRowContext(ctx, qAuditOnceGet, ev.TaskID, ev.Kind).Scan(&seq); {
		case err == nil:
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if err := w.audit(ctx, ev); err != nil {
			return err
		}
		if _, err := w.ExecContext(ctx, qAuditOnceInsert, ev.TaskID, ev.Kind, w.head.seq); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, wrap("audit", err)
}

// VerifyAudit recomputes the hash chain over every audit row, in seq order,
// in one read snapshot. A chain that does not verify is not an error: the
// report has OK false, BadSeq naming the first bad row and Reason saying
// why. The error is for failures to read.
//
// What it detects: a changed field of any row (the row's hash no longer
// matches; a changed prev_hash or hash breaks the link), a deleted row
// (a gap in seq, named by the missing seq), rows swapped or reordered (the
// first one's prev_hash no longer links), and deleted or added rows at the
// end (audit_head, updated with every append, disagrees with the last row).
func (db *DB) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	var rep model.AuditReport
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		rep = model.AuditReport{}
		if err := verifyChain(ctx, tx, &rep); err != nil {
			return err
		}
		// Rows is the log's size, also when verification stopped at a bad
		// row: "broken at row 5 of 5" must not hide 10,000 more.
		return tx.QueryRowContext(ctx, qAuditCount).Scan(&rep.Rows)
	})
	if err != nil {
		return model.AuditReport{}, wrap("verify audit", err)
	}
	return rep, nil
}

// newAuditRow is ev's row, its data encoded as data.
func newAuditRow(ev model.AuditEvent, data string) auditRow {
	text := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	return auditRow{Seq: ev.Seq, At: text(formatTime(ev.At)), Kind: text(ev.Kind), Actor: text(ev.Actor),
		TaskID: text(ev.TaskID), MessageID: text(ev.MessageID), Data: text(data),
		PrevHash: text(ev.PrevHash), Hash: text(ev.Hash)}
}

// nullColumn returns the first of r's columns that is NULL, or "".
func (r *auditRow) nullColumn() string {
	v := reflect.ValueOf(r).Elem()
	for _, f := range tableOf[auditRow]().Fields {
		if ns, ok := f.Value(v).Addr().Interface().(*sql.NullString); ok && !ns.Valid {
			return f.Name
		}
	}
	return ""
}

func verifyChain(ctx context.Context, tx querier, rep *model.AuditReport) error {
	var headSeq int64
	var headHash string
	headErr := tx.QueryRowContext(ctx, qAuditHead).Scan(&headSeq, &headHash)
	if headErr != nil && !errors.Is(headErr, sql.ErrNoRows) {
		return headErr
	}
	bad := func(seq int64, format string, args ...any) error {
		rep.OK, rep.BadSeq, rep.Reason = false, seq, fmt.Sprintf(format, args...)
		return nil
	}
	var cpSeq int64
	var cpHash string
	if err := tx.QueryRowContext(ctx, qAuditCheckpoint).Scan(&cpSeq, &cpHash); err != nil {
		return fmt.Errorf("audit checkpoint: %w", err)
	}
	rep.Checkpoint = cpSeq
	w := &chainWalk{cpSeq: cpSeq, expect: cpSeq + 1, prev: cpHash}
	if err := w.walk(ctx, tx); err != nil || w.badSeq != 0 {
		if w.badSeq != 0 {
			return bad(w.badSeq, "%s", w.reason)
		}
		return err
	}
	last, prev := w.expect-1, w.prev
	if cpSeq > 0 && (w.cut == nil || w.cut["through_seq"] != strconv.FormatInt(cpSeq, 10) || w.cut["through_hash"] != cpHash) {
		return bad(cpSeq+1, "the checkpoint (rows up to %d cut) is not the one the chain's last audit.checkpoint row records", cpSeq)
	}
	switch {
	case errors.Is(headErr, sql.ErrNoRows):
		return bad(max(last, 1), "audit_head is missing")
	case headSeq > last:
		return bad(last+1, "audit_head names row %d, but the log ends at row %d (rows deleted from the end)", headSeq, last)
	case headSeq < last:
		return bad(headSeq+1, "row %d is beyond audit_head (%d): appended outside the chain", headSeq+1, headSeq)
	case headHash != prev:
		return bad(max(last, 1), "audit_head hash does not match row %d", last)
	}
	rep.OK, rep.Head = true, prev
	return nil
}

// chainWalk walks the audit rows in seq order from the checkpoint,
// checking each against the one before: the first defect found stops it
// (badSeq, reason).
type chainWalk struct {
	cpSeq  int64             // rows up to it were cut
	expect int64             // the seq the next row must have
	prev   string            // the hash the next row must chain to
	cut    map[string]string // what the chain's last audit.checkpoint row says was cut
	badSeq int64
	reason string
}

func (w *chainWalk) fail(seq int64, format string, args ...any) {
	w.badSeq, w.reason = seq, fmt.Sprintf(format, args...)
}

// walk reads every row and checks it (row), until a defect.
func (w *chainWalk) walk(ctx context.Context, tx querier) error {
	rows, err := tx.QueryContext(ctx, qAuditRows)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r auditRow
		if err := sqlgen().ScanRow(ctx, rows, &r); err != nil {
			return err
		}
		if !w.row(r) {
			return nil
		}
	}
	return rows.Err()
}

// row checks one row: its seq, its columns, its link to the row before,
// its time, its data and its hash. It reports whether the walk goes on.
func (w *chainWalk) row(r auditRow) bool {
	if r.Seq != w.expect {
		switch {
		case w.cpSeq > 0 && r.Seq > w.expect:
			w.fail(w.expect, "row %d is missing: the log goes from the checkpoint (rows up to %d were cut) to row %d", w.expect, w.cpSeq, r.Seq)
		case w.expect == 1:
			w.fail(1, "row 1 is missing: the log starts at row %d", r.Seq)
		default:
			w.fail(w.expect, "row %d is missing: the log goes from row %d to row %d", w.expect, w.expect-1, r.Seq)
		}
		return false
	}
	if col := r.nullColumn(); col != "" {
		w.fail(r.Seq, "row %d: %s is NULL", r.Seq, col)
		return false
	}
	if r.PrevHash.String != w.prev {
		switch {
		case r.Seq == w.cpSeq+1 && w.cpSeq > 0:
			w.fail(r.Seq, "row %d: prev_hash is not the hash the checkpoint keeps of the rows cut up to %d", r.Seq, w.cpSeq)
		case r.Seq == 1:
			w.fail(r.Seq, "row 1: prev_hash is not the genesis hash (64 zeros)")
		default:
			w.fail(r.Seq, "row %d: prev_hash does not match the hash of row %d (rows deleted, swapped or changed)", r.Seq, r.Seq-1)
		}
		return false
	}
	at, err := parseTime(r.At.String)
	if err != nil || formatTime(at) != r.At.String {
		w.fail(r.Seq, "row %d: at %q is not a canonical RFC 3339 UTC time", r.Seq, r.At.String)
		return false
	}
	data, err := fromJSONObject(r.Data.String)
	if err != nil {
		w.fail(r.Seq, "row %d: data is not a JSON object of strings", r.Seq)
		return false
	}
	ev := model.AuditEvent{Seq: r.Seq, At: at, Kind: r.Kind.String, Actor: r.Actor.String,
		TaskID: r.TaskID.String, MessageID: r.MessageID.String, Data: data}
	if ChainHash(w.prev, ev) != r.Hash.String {
		w.fail(r.Seq, "row %d: hash does not match the row's content (a field was changed)", r.Seq)
		return false
	}
	if ev.Kind == auditCheckpointKind {
		w.cut = ev.Data
	}
	w.prev = r.Hash.String
	w.expect++
	return true
}

// auditData is a small builder for audit data maps that skips empty values.
type auditData map[string]string

// set adds k=v when v is not empty.
func (d auditData) set(k, v string) auditData {
	if v != "" {
		d[k] = v
	}
	return d
}
