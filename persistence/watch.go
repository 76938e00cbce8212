package persistence

import (
	"context"
	"database/sql"
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

const (
	qWatchHead   = `SELECT seq FROM audit_head WHERE id = 1`
	qWatchEvents = `SELECT seq, at, kind, actor, task_id, data FROM audit_log
		WHERE seq > ? AND seq <= ? AND kind IN ('task.submitted', 'gate.verdict', 'task.transition')`
	qWatchTaskEvents = `SELECT from_state, to_state, trigger_name, code, message, actor, at
		FROM task_events WHERE task_id = ? ORDER BY n`
	qWatchTaskVerdicts = `SELECT gate, passed, code, message, detail, at
		FROM task_verdicts WHERE task_id = ? ORDER BY n`
)

// EventsAfter implements model.EventLog. The scan is a range of the audit
// log's primary key from after to the head, so a follower's poll costs
// what happened since its cursor.
func (db *DB) EventsAfter(ctx context.Context, taskID string, after int64, limit int) ([]model.WatchEvent, int64, error) {
	if limit <= 0 {
		limit = 1000
	}
	var out []model.WatchEvent
	cursor := after
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		var head int64
		if err := tx.QueryRowContext(ctx, qWatchHead).Scan(&head); err != nil {
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
		page := model.NewPage(db.answerBytes)
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
			// The page is full: the cursor stays at the last event taken.
			// The first is always taken, so a follower always moves on.
			if !page.Take(model.EncodedLen(ev)) && len(out) > 0 {
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
		return tx.QueryRowContext(ctx, qWatchHead).Scan(&head)
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
		ev.Kind, ev.To, ev.Message = model.WatchSubmitted, model.StateSubmitted, actor+" → "+d["target"]
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
		if err := tx.QueryRowContext(ctx, qWatchHead).Scan(&head); err != nil {
			return err
		}
		verdicts, err := watchVerdicts(ctx, tx, id)
		if err != nil {
			return err
		}
		out = append(out, model.WatchEvent{At: t.CreatedAt, TaskID: id, Kind: model.WatchSubmitted, To: model.StateSubmitted,
			Actor: t.Caller, Message: t.Caller + " → " + t.Target})
		rows, err := tx.QueryContext(ctx, qWatchTaskEvents, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var from, to, trigger, code, msg, actor, at string
			if err := rows.Scan(&from, &to, &trigger, &code, &msg, &actor, &at); err != nil {
				return err
			}
			ev := model.WatchEvent{TaskID: id, Kind: model.WatchTransition, From: model.State(from), To: model.State(to),
				Trigger: model.Trigger(trigger), Code: model.Code(code), Message: msg, Actor: actor}
			if ev.At, err = parseTime(at); err != nil {
				return fmt.Errorf("event of task %s: at: %w", id, err)
			}
			for len(verdicts) > 0 && !verdicts[0].At.After(ev.At) {
				out, verdicts = append(out, verdicts[0]), verdicts[1:]
			}
			out = append(out, ev)
		}
		out = append(out, verdicts...)
		return rows.Err()
	})
	if err != nil {
		return model.Task{}, nil, 0, wrap("task history", err)
	}
	return t, out, head, nil
}

// watchVerdicts reads a task's verdicts as watch events, oldest first.
func watchVerdicts(ctx context.Context, tx querier, id string) ([]model.WatchEvent, error) {
	rows, err := tx.QueryContext(ctx, qWatchTaskVerdicts, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.WatchEvent
	for rows.Next() {
		var gate, code, msg, detail, at string
		var passed sql.NullBool
		if err := rows.Scan(&gate, &passed, &code, &msg, &detail, &at); err != nil {
			return nil, err
		}
		p := passed.Bool
		ev := model.WatchEvent{TaskID: id, Kind: model.WatchVerdict, Gate: model.Gate(gate), Passed: &p, Code: model.Code(code), Message: msg}
		if ev.Detail, err = fromJSONObject(detail); err != nil {
			return nil, fmt.Errorf("verdict of task %s: detail: %w", id, err)
		}
		if len(ev.Detail) == 0 {
			ev.Detail = nil
		}
		if ev.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("verdict of task %s: at: %w", id, err)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}
