package persistence

import (
	"context"
	"database/sql"
	"time"

	"github.com/hai-relay/relay/model"
)

// History is a batch of envelopes for Import: messages in any state, and
// tasks in any state with their events and verdicts, as another store held
// them.
type History struct {
	Messages []model.Message
	Tasks    []model.TaskDetail
}

// Import appends history in bulk, in one transaction through the writer:
// envelopes the relay did not make here, such as a store being restored or
// merged, or months of synthetic use for a benchmark (persistencetest.Seed).
// Each envelope is written as given (state, times, results), after the
// rows already stored (its seq follows theirs), through statements prepared
// once for the batch, and audited as the store audits its creation
// ("message.stored", "task.submitted", at its created_at), so VerifyAudit
// still passes. A task's events and verdicts are stored as its timeline, in
// order; they are not audited one by one.
//
// Required: a message's ID, From and To, with ReadAt set when it is read
// or acked and AckedAt when it is acked; a task's ID, Caller and Target, a
// valid State (empty is submitted) and Mode (empty is read_only). A zero
// CreatedAt is stamped with the clock; a task's zero UpdatedAt is its
// CreatedAt. A duplicate ID is an invalid_args error, and then nothing of
// the batch is stored. One call is one transaction: split very large
// histories into batches of some ten thousand envelopes.
func (db *DB) Import(ctx context.Context, h History) error {
	for i := range h.Messages {
		if err := db.importableMessage(&h.Messages[i]); err != nil {
			return err
		}
	}
	for i := range h.Tasks {
		if err := db.importableTask(&h.Tasks[i]); err != nil {
			return err
		}
	}
	err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
		if err := importMessages(ctx, w, h.Messages); err != nil {
			return err
		}
		return importTasks(ctx, w, h.Tasks)
	})
	return wrap("import", err)
}

// importableMessage checks m and fills its defaults.
func (db *DB) importableMessage(m *model.Message) error {
	switch {
	case m.ID == "":
		return model.InvalidArgs("import: message without an id")
	case m.From == "" || m.To == "":
		return model.InvalidArgs("import: message %q without a sender or a recipient", m.ID)
	}
	if m.State == "" {
		m.State = model.MessageStored
	}
	switch m.State {
	case model.MessageStored:
		if m.ReadAt != nil || m.AckedAt != nil {
			return model.InvalidArgs("import: message %q is stored (unread) but has a read or acked time", m.ID)
		}
	case model.MessageRead:
		if m.ReadAt == nil || m.AckedAt != nil {
			return model.InvalidArgs("import: message %q is read: it needs a read time and no acked time", m.ID)
		}
	case model.MessageAcked:
		if m.ReadAt == nil || m.AckedAt == nil {
			return model.InvalidArgs("import: message %q is acked: it needs a read and an acked time", m.ID)
		}
	default:
		return model.InvalidArgs("import: message %q: unknown state %q", m.ID, m.State)
	}
	var err error
	m.CreatedAt, err = stamp("created_at", m.CreatedAt, db.now)
	return err
}

// importableTask checks t and fills its defaults.
func (db *DB) importableTask(t *model.TaskDetail) error {
	switch {
	case t.ID == "":
		return model.InvalidArgs("import: task without an id")
	case t.Caller == "" || t.Target == "":
		return model.InvalidArgs("import: task %q without a caller or a target", t.ID)
	}
	if t.State == "" {
		t.State = model.StateSubmitted
	}
	if !t.State.Valid() {
		return model.InvalidArgs("import: task %q: unknown state %q", t.ID, t.State)
	}
	if t.Mode == "" {
		t.Mode = model.ModeReadOnly
	}
	if !t.Mode.Valid() {
		return model.InvalidArgs("import: task %q: unknown mode %q", t.ID, t.Mode)
	}
	for _, e := range t.Events {
		if e.TaskID != "" && e.TaskID != t.ID {
			return model.InvalidArgs("import: task %q has an event of task %q", t.ID, e.TaskID)
		}
	}
	var err error
	if t.CreatedAt, err = stamp("created_at", t.CreatedAt, db.now); err != nil {
		return err
	}
	t.UpdatedAt, err = stamp("updated_at", t.UpdatedAt, func() time.Time { return t.CreatedAt })
	return err
}

// importPrepare prepares queries on the transaction, for a batch, and
// returns a closer.
func importPrepare(ctx context.Context, w *writeTx, qs ...string) ([]*sql.Stmt, func(), error) {
	var out []*sql.Stmt
	closeAll := func() {
		for _, st := range out {
			st.Close()
		}
	}
	for _, q := range qs {
		st, err := w.tx.PrepareContext(ctx, q)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		out = append(out, st)
	}
	return out, closeAll, nil
}

// importSeq is the highest seq stored in table (messages or tasks).
func importSeq(ctx context.Context, w *writeTx, table string) (int64, error) {
	var seq int64
	err := w.QueryRowContext(ctx, `SELECT IFNULL(MAX(seq), 0) FROM `+table).Scan(&seq)
	return seq, err
}

func importMessages(ctx context.Context, w *writeTx, ms []model.Message) error {
	if len(ms) == 0 {
		return nil
	}
	seq, err := importSeq(ctx, w, "messages")
	if err != nil {
		return err
	}
	sts, closeAll, err := importPrepare(ctx, w, qImportMessage)
	if err != nil {
		return err
	}
	defer closeAll()
	ins := sts[0]
	for _, m := range ms {
		r, err := messageToRow(m)
		if err != nil {
			return err
		}
		seq++
		r.Seq = seq
		if _, err := ins.ExecContext(ctx, importMessageBind.args(&r)...); err != nil {
			if isUniqueViolation(err) {
				return model.InvalidArgs("message id %q already exists", m.ID)
			}
			return err
		}
		if err := w.audit(ctx, messageStored(m)); err != nil {
			return err
		}
	}
	return nil
}

func importTasks(ctx context.Context, w *writeTx, ts []model.TaskDetail) error {
	if len(ts) == 0 {
		return nil
	}
	seq, err := importSeq(ctx, w, "tasks")
	if err != nil {
		return err
	}
	sts, closeAll, err := importPrepare(ctx, w, qImportTask, qImportEvent, qImportVerdict)
	if err != nil {
		return err
	}
	defer closeAll()
	insTask, insEvent, insVerdict := sts[0], sts[1], sts[2]
	for _, t := range ts {
		r, err := taskToRow(t.Task)
		if err != nil {
			return err
		}
		seq++
		r.Seq = seq
		if _, err := insTask.ExecContext(ctx, importTaskBind.args(&r)...); err != nil {
			if isUniqueViolation(err) {
				return model.InvalidArgs("task id %q (or its idempotency key) already exists", t.ID)
			}
			return err
		}
		for k, v := range t.Verdicts {
			detail, err := jsonObject(v.Detail)
			if err != nil {
				return err
			}
			at, err := stamp("verdict time", v.At, func() time.Time { return t.CreatedAt })
			if err != nil {
				return err
			}
			row := taskVerdictRow{TaskID: t.ID, N: int64(k + 1), Gate: string(v.Gate), Passed: v.Passed,
				Code: string(v.Code), Message: v.Message, Detail: detail, At: formatTime(at)}
			if _, err := insVerdict.ExecContext(ctx, importVerdictBind.args(&row)...); err != nil {
				return err
			}
		}
		for k, e := range t.Events {
			at, err := stamp("event time", e.At, func() time.Time { return t.CreatedAt })
			if err != nil {
				return err
			}
			row := taskEventRow{TaskID: t.ID, N: int64(k + 1), From: string(e.From), To: string(e.To),
				Trigger: string(e.Trigger), Code: string(e.Code), Message: e.Message, Actor: e.Actor, At: formatTime(at)}
			if _, err := insEvent.ExecContext(ctx, importEventBind.args(&row)...); err != nil {
				return err
			}
		}
		if err := w.audit(ctx, taskSubmitted(t.Task)); err != nil {
			return err
		}
	}
	return nil
}
