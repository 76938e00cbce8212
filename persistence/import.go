package persistence

import (
	"context"
	"database/sql"
	"strconv"
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
		return invalidArgs("import: message without an id")
	case m.From == "" || m.To == "":
		return invalidArgs("import: message %q without a sender or a recipient", m.ID)
	}
	if m.State == "" {
		m.State = model.MessageStored
	}
	switch m.State {
	case model.MessageStored:
		if m.ReadAt != nil || m.AckedAt != nil {
			return invalidArgs("import: message %q is stored (unread) but has a read or acked time", m.ID)
		}
	case model.MessageRead:
		if m.ReadAt == nil || m.AckedAt != nil {
			return invalidArgs("import: message %q is read: it needs a read time and no acked time", m.ID)
		}
	case model.MessageAcked:
		if m.ReadAt == nil || m.AckedAt == nil {
			return invalidArgs("import: message %q is acked: it needs a read and an acked time", m.ID)
		}
	default:
		return invalidArgs("import: message %q: unknown state %q", m.ID, m.State)
	}
	var err error
	m.CreatedAt, err = stamp("created_at", m.CreatedAt, db.now)
	return err
}

// importableTask checks t and fills its defaults.
func (db *DB) importableTask(t *model.TaskDetail) error {
	switch {
	case t.ID == "":
		return invalidArgs("import: task without an id")
	case t.Caller == "" || t.Target == "":
		return invalidArgs("import: task %q without a caller or a target", t.ID)
	}
	if t.State == "" {
		t.State = model.StateSubmitted
	}
	if !t.State.Valid() {
		return invalidArgs("import: task %q: unknown state %q", t.ID, t.State)
	}
	if t.Mode == "" {
		t.Mode = model.ModeReadOnly
	}
	if !t.Mode.Valid() {
		return invalidArgs("import: task %q: unknown mode %q", t.ID, t.Mode)
	}
	for _, e := range t.Events {
		if e.TaskID != "" && e.TaskID != t.ID {
			return invalidArgs("import: task %q has an event of task %q", t.ID, e.TaskID)
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

// nullTime is t as a nullable time column.
func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return formatTime(*t)
}

func importMessages(ctx context.Context, w *writeTx, ms []model.Message) error {
	if len(ms) == 0 {
		return nil
	}
	seq, err := importSeq(ctx, w, "messages")
	if err != nil {
		return err
	}
	sts, closeAll, err := importPrepare(ctx, w, `INSERT INTO messages (seq, id, from_agent, to_agent, body, context_id,
		reply_to, artifacts, state, created_at, read_at, acked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer closeAll()
	ins := sts[0]
	for _, m := range ms {
		seq++
		arts, err := jsonArray(m.Artifacts)
		if err != nil {
			return err
		}
		if _, err := ins.ExecContext(ctx, seq, m.ID, m.From, m.To, m.Body, m.ContextID, m.ReplyTo, arts,
			string(m.State), formatTime(m.CreatedAt), nullTime(m.ReadAt), nullTime(m.AckedAt)); err != nil {
			if isUniqueViolation(err) {
				return invalidArgs("message id %q already exists", m.ID)
			}
			return err
		}
		// The data CreateMessage audits (insertMessage).
		if err := w.audit(ctx, model.AuditEvent{At: m.CreatedAt, Kind: "message.stored", Actor: m.From, MessageID: m.ID,
			Data: auditData{
				"from":        m.From,
				"to":          m.To,
				"body_sha256": sha256Hex(m.Body),
				"body_bytes":  strconv.Itoa(len(m.Body)),
				"artifacts":   strconv.Itoa(len(m.Artifacts)),
			}.set("context_id", m.ContextID).set("reply_to", m.ReplyTo)}); err != nil {
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
	sts, closeAll, err := importPrepare(ctx, w,
		`INSERT INTO tasks (seq, id, state, code, message, caller, target, mode, mission_id, lease_id, context_id,
			prompt, cwd, artifacts, reference_task_ids, idempotency_key, request_sha256, result, stop_reason,
			session_mode, tool_calls, denied_permissions, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		`INSERT INTO task_events (task_id, n, from_state, to_state, trigger_name, code, message, actor, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		`INSERT INTO task_verdicts (task_id, n, gate, passed, code, message, detail, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer closeAll()
	insTask, insEvent, insVerdict := sts[0], sts[1], sts[2]
	for _, t := range ts {
		seq++
		arts, err := jsonArray(t.Artifacts)
		if err != nil {
			return err
		}
		refs, err := jsonArray(t.ReferenceTaskIDs)
		if err != nil {
			return err
		}
		calls, err := jsonArray(t.ToolCalls)
		if err != nil {
			return err
		}
		if _, err := insTask.ExecContext(ctx, seq, t.ID, string(t.State), string(t.Code), t.Message, t.Caller, t.Target,
			string(t.Mode), t.MissionID, t.LeaseID, t.ContextID, t.Prompt, t.Cwd, arts, refs, t.IdempotencyKey,
			t.RequestSHA256, t.Result, t.StopReason, t.SessionMode, calls, t.DeniedPermissions,
			formatTime(t.CreatedAt), formatTime(t.UpdatedAt)); err != nil {
			if isUniqueViolation(err) {
				return invalidArgs("task id %q (or its idempotency key) already exists", t.ID)
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
			if _, err := insVerdict.ExecContext(ctx, t.ID, k+1, string(v.Gate), v.Passed, string(v.Code), v.Message,
				detail, formatTime(at)); err != nil {
				return err
			}
		}
		for k, e := range t.Events {
			at, err := stamp("event time", e.At, func() time.Time { return t.CreatedAt })
			if err != nil {
				return err
			}
			if _, err := insEvent.ExecContext(ctx, t.ID, k+1, string(e.From), string(e.To), string(e.Trigger),
				string(e.Code), e.Message, e.Actor, formatTime(at)); err != nil {
				return err
			}
		}
		// The data CreateTask audits.
		if err := w.audit(ctx, model.AuditEvent{At: t.CreatedAt, Kind: "task.submitted", Actor: t.Caller, TaskID: t.ID,
			Data: auditData{
				"target":             t.Target,
				"mode":               string(t.Mode),
				"prompt_sha256":      sha256Hex(t.Prompt),
				"prompt_bytes":       strconv.Itoa(len(t.Prompt)),
				"artifacts":          strconv.Itoa(len(t.Artifacts)),
				"reference_task_ids": strconv.Itoa(len(t.ReferenceTaskIDs)),
			}.set("mission_id", t.MissionID).set("lease_id", t.LeaseID).
				set("context_id", t.ContextID).set("cwd", t.Cwd).
				set("idempotency_key", t.IdempotencyKey).set("request_sha256", t.RequestSHA256)}); err != nil {
			return err
		}
	}
	return nil
}
