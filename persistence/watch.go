package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
)

// Watching reads tasks' events in commit order. The global cursor is the
// audit log's seq: every submission, verdict and transition appends its
// audit row in the transaction that stores it (task_events is numbered
// per task, so it has no order across tasks). Only plain SQL on the
// reader pool here; the write paths are untouched.

var _ model.EventLog = (*DB)(nil)

const qWatchEvents = `SELECT seq, at, kind, actor, task_id, data FROM audit_log
	WHERE seq > ? AND seq <= ? AND kind IN ('task.submitted', 'gate.verdict', 'task.transition')`

// auditHeadSeq reads the audit log's head seq.
func auditHeadSeq(ctx context.Context, q querier) (int64, error) {
	var seq int64
	var hash string
	err := q.QueryRowContext(ctx, qAuditHead).Scan(&seq, &hash)
	return seq, err
}

// EventsAfter implements model.EventLog. The scan is a range of the audit
// log's primary key from after to the head, so a follower's poll costs
// what happened since its cursor.
func (db *DB) EventsAfter(ctx context.Context, taskID string, after int64, limit int) ([]model.WatchEvent, int64, error) {
	if limit <= 0 {
		limit = model.MaxPageSize
	}
	var out []model.WatchEvent
	cursor := after
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		head, err := auditHeadSeq(ctx, tx)
		if err != nil {
			return err
		}
		q, args := qWatchEvents, []any{after, head}
		if taskID != "" {
			q, args = q+` AND task_id = ?`, append(args, taskID)
		}
		rows, err := tx.QueryContext(ctx, q+` ORDER BY seq LIMIT ?`, append(args, limit)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		budget := model.NewByteBudget(db.answerBytes)
		for rows.Next() {
			var seq int64
			var at, kind, actor, task, data string
			if err := rows.Scan(&seq, &at, &kind, &actor, &task, &data); err != nil {
				return err
			}
			ev, err := auditWatchEvent(seq, at, kind, actor, task, data)
			if err != nil {
				return err
			}
			// The answer is full: the cursor stays at the last event taken.
			// The first is always taken, so a follower always moves on.
			if !budget.Take(model.EncodedLen(ev)) && len(out) > 0 {
				return rows.Err()
			}
			out, cursor = append(out, ev), seq
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) < limit {
			cursor = max(head, after) // every event up to the head was read
		}
		return nil
	})
	if err != nil {
		return nil, after, wrap("events after", err)
	}
	return out, cursor, nil
}

// EventsHead implements model.EventLog.
func (db *DB) EventsHead(ctx context.Context) (int64, error) {
	var head int64
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		head, err = auditHeadSeq(ctx, tx)
		return err
	})
	return head, wrap("events head", err)
}

// auditWatchEvent reads one audit row of a task event.
func auditWatchEvent(seq int64, at, kind, actor, task, data string) (model.WatchEvent, error) {
	ev := model.WatchEvent{Seq: seq, TaskID: task, Actor: actor}
	var err error
	if ev.At, err = parseTime(at); err != nil {
		return ev, fmt.Errorf("audit row %d: at: %w", seq, err)
	}
	d, err := fromJSONObject(data)
	if err != nil {
		return ev, fmt.Errorf("audit row %d: data: %w", seq, err)
	}
	switch kind {
	case "task.submitted":
		// The chain the task was delegated through comes first: the
		// message reads as Task.Path does, the top-level caller first.
		var chain []model.Hop
		if c := d["chain"]; c != "" {
			if err := json.Unmarshal([]byte(c), &chain); err != nil {
				return ev, fmt.Errorf("audit row %d: chain: %w", seq, err)
			}
		}
		t := model.Task{ID: task, Caller: actor, Target: d["target"], Chain: chain}
		ev.Kind, ev.To, ev.Message = model.WatchSubmitted, model.StateSubmitted, t.Path()
	case "task.transition":
		ev.Kind, ev.From, ev.To, ev.Trigger = model.WatchTransition, model.State(d["from"]), model.State(d["to"]), model.Trigger(d["trigger"])
		ev.Code, ev.Message = model.Code(d["code"]), d["message"]
	case "gate.verdict":
		passed := d["passed"] == "true"
		ev.Kind, ev.Gate, ev.Passed, ev.Code, ev.Message = model.WatchVerdict, model.Gate(d["gate"]), &passed, model.Code(d["code"]), d["message"]
		for k, v := range d {
			switch k {
			case "gate", "passed", "code", "message":
				continue
			}
			if ev.Detail == nil {
				ev.Detail = map[string]string{}
			}
			ev.Detail[strings.TrimPrefix(k, "detail.")] = v
		}
	}
	return ev, nil
}

// TaskHistory implements model.EventLog: the task, its submission, its
// verdicts and transitions (each evaluation's verdicts right before the
// transition they led to, as the audit log has them) and the audit head,
// in one read snapshot, so following from the head misses and repeats
// nothing.
func (db *DB) TaskHistory(ctx context.Context, id string) (model.Task, []model.WatchEvent, int64, error) {
	var t model.Task
	var out []model.WatchEvent
	var head int64
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		got, err := db.queryTasks(ctx, tx, qTaskByID, id)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return notFound("task", id)
		}
		t = got[0]
		if head, err = auditHeadSeq(ctx, tx); err != nil {
			return err
		}
		events, err := db.readTaskEvents(ctx, tx, id)
		if err != nil {
			return err
		}
		verdicts, err := db.readTaskVerdicts(ctx, tx, id)
		if err != nil {
			return err
		}
		out = append(out, model.WatchEvent{At: t.CreatedAt, TaskID: id, Kind: model.WatchSubmitted, To: model.StateSubmitted,
			Actor: t.Caller, Message: t.Path()})
		// Each evaluation's verdicts right before the transition they led to.
		for _, e := range events {
			for len(verdicts) > 0 && !verdicts[0].At.After(e.At) {
				out, verdicts = append(out, verdictEvent(id, verdicts[0])), verdicts[1:]
			}
			out = append(out, model.WatchEvent{At: e.At, TaskID: id, Kind: model.WatchTransition, From: e.From, To: e.To,
				Trigger: e.Trigger, Code: e.Code, Message: e.Message, Actor: e.Actor})
		}
		for _, v := range verdicts {
			out = append(out, verdictEvent(id, v))
		}
		return nil
	})
	if err != nil {
		return model.Task{}, nil, 0, wrap("task history", err)
	}
	return t, out, head, nil
}

// verdictEvent is a stored verdict as a watch event.
func verdictEvent(id string, v model.Verdict) model.WatchEvent {
	passed := v.Passed
	ev := model.WatchEvent{At: v.At, TaskID: id, Kind: model.WatchVerdict, Gate: v.Gate, Passed: &passed, Code: v.Code,
		Message: v.Message, Detail: v.Detail}
	if len(ev.Detail) == 0 {
		ev.Detail = nil
	}
	return ev
}
