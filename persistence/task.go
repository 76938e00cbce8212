package persistence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/hai-relay/relay/model"
)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// taskToRow and taskRow.task convert between a task and its row (the
// model is in models.go).
func taskToRow(t model.Task) (taskRow, error) {
	r := taskRow{
		ID: t.ID, State: string(t.State), Code: string(t.Code), Message: t.Message,
		Caller: t.Caller, Target: t.Target, Mode: string(t.Mode), MissionID: t.MissionID,
		LeaseID: t.LeaseID, ContextID: t.ContextID, Prompt: t.Prompt, Cwd: t.Cwd,
		IdempotencyKey: t.IdempotencyKey, RequestSHA256: t.RequestSHA256, Result: t.Result, StopReason: t.StopReason,
		SessionMode: t.SessionMode, DeniedPermissions: t.DeniedPermissions,
		CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt), ParentTaskID: t.ParentTaskID,
	}
	var err error
	if r.Chain, err = jsonArray(t.Chain); err != nil {
		return r, err
	}
	if r.Artifacts, err = jsonArray(t.Artifacts); err != nil {
		return r, err
	}
	if r.ReferenceTaskIDs, err = jsonArray(t.ReferenceTaskIDs); err != nil {
		return r, err
	}
	if r.ToolCalls, err = jsonArray(t.ToolCalls); err != nil {
		return r, err
	}
	return r, nil
}

func (r taskRow) task() (model.Task, error) {
	t := model.Task{
		ID: r.ID, State: model.State(r.State), Code: model.Code(r.Code), Message: r.Message,
		Caller: r.Caller, Target: r.Target, Mode: model.Mode(r.Mode), MissionID: r.MissionID,
		LeaseID: r.LeaseID, ContextID: r.ContextID, Prompt: r.Prompt, Cwd: r.Cwd,
		IdempotencyKey: r.IdempotencyKey, RequestSHA256: r.RequestSHA256, Result: r.Result, StopReason: r.StopReason,
		SessionMode: r.SessionMode, DeniedPermissions: r.DeniedPermissions, ParentTaskID: r.ParentTaskID,
	}
	var err error
	if t.Chain, err = fromJSONArray[model.Hop](r.Chain); err != nil {
		return t, fmt.Errorf("task %s: chain: %w", r.ID, err)
	}
	if t.Artifacts, err = fromJSONArray[model.Artifact](r.Artifacts); err != nil {
		return t, fmt.Errorf("task %s: artifacts: %w", r.ID, err)
	}
	if t.ReferenceTaskIDs, err = fromJSONArray[string](r.ReferenceTaskIDs); err != nil {
		return t, fmt.Errorf("task %s: reference_task_ids: %w", r.ID, err)
	}
	if t.ToolCalls, err = fromJSONArray[model.ToolCall](r.ToolCalls); err != nil {
		return t, fmt.Errorf("task %s: tool_calls: %w", r.ID, err)
	}
	t.ToolFailures = model.ToolFailuresOf(t.ToolCalls)
	if t.CreatedAt, err = parseTime(r.CreatedAt); err != nil {
		return t, fmt.Errorf("task %s: created_at: %w", r.ID, err)
	}
	if t.UpdatedAt, err = parseTime(r.UpdatedAt); err != nil {
		return t, fmt.Errorf("task %s: updated_at: %w", r.ID, err)
	}
	return t, nil
}

// queryTasks runs a query returning taskCols and maps the rows.
func (db *DB) queryTasks(ctx context.Context, q querier, query string, args ...any) ([]model.Task, error) {
	return db.queryTasksUpTo(ctx, q, nil, query, args...)
}

// queryTasksUpTo is queryTasks that stops at the first row take refuses
// (a page's byte budget), reading no further.
//
// The rows are scanned with database/sql's rows.Scan into one taskRow's
// fields (taskScan), not with bun's ScanRows, because a listing is a hot
// read (BENCHMARKS.md: the scale_list_tasks row, and "Rows scanned with
// rows.Scan" under "What was changed"): on a 50-task page
// ScanRows cost 676-704 CPU-µs against 563-797, medians 702 and 617
// (BenchmarkPageScan, 3 runs on a loaded 2-core machine), ~9% of a
// ListTasksVisible page (~950 CPU-µs), and 18% more bytes allocated.
func (db *DB) queryTasksUpTo(ctx context.Context, q querier, take func(model.Task) bool, query string, args ...any) ([]model.Task, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []model.Task{}
	// One row, scanned into again and again: r.task copies what it keeps.
	var r taskRow
	dest := taskScan.dest(&r)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		t, err := r.task()
		if err != nil {
			return nil, err
		}
		if take != nil && !take(t) {
			break
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// CreateTask persists t as a new submitted task and audits it
// ("task.submitted"), in one transaction. The caller supplies ID; a zero
// CreatedAt is stamped with the clock; an empty Mode is read_only (the
// default); State must be empty or submitted.
//
// When the caller already has a task with t.IdempotencyKey, that task is
// returned with existed=true and nothing is written, whatever else t holds:
// the caller compares the stored task's RequestSHA256 with its own to tell
// a retry from a conflicting reuse of the key. A duplicate ID is an
// invalid_args error.
func (db *DB) CreateTask(ctx context.Context, t model.Task) (model.Task, bool, error) {
	switch {
	case t.ID == "":
		return model.Task{}, false, model.InvalidArgs("task without an id")
	case t.Caller == "":
		return model.Task{}, false, model.InvalidArgs("task %q without a caller", t.ID)
	case t.Target == "":
		return model.Task{}, false, model.InvalidArgs("task %q without a target", t.ID)
	case t.State != "" && t.State != model.StateSubmitted:
		return model.Task{}, false, model.InvalidArgs("a new task is submitted, not %s", t.State)
	}
	if t.Mode == "" {
		t.Mode = model.ModeReadOnly
	}
	if !t.Mode.Valid() {
		return model.Task{}, false, model.InvalidArgs("unknown mode %q", t.Mode)
	}
	t.State = model.StateSubmitted
	var err error
	if t.CreatedAt, err = stamp("created_at", t.CreatedAt, db.now); err != nil {
		return model.Task{}, false, err
	}
	t.UpdatedAt = t.CreatedAt
	r, err := taskToRow(t)
	if err != nil {
		return model.Task{}, false, wrap("create task", err)
	}
	stored, err := r.task() // exactly what a read will return
	if err != nil {
		return model.Task{}, false, wrap("create task", err)
	}

	existed := false
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		if t.IdempotencyKey != "" {
			got, err := db.queryTasks(ctx, w, qTaskByIdem, t.Caller, t.IdempotencyKey)
			if err != nil {
				return err
			}
			if len(got) > 0 {
				stored, existed = got[0], true
				return nil
			}
		}
		if err := db.checkRoom(ctx, w, len(t.Prompt)); err != nil {
			return err
		}
		_, err := w.ExecContext(ctx, qTaskInsert, taskBind.args(&r)...)
		if err != nil {
			if isUniqueViolation(err) {
				return model.InvalidArgs("task id %q already exists", t.ID)
			}
			return err
		}
		return w.audit(ctx, taskSubmitted(t))
	})
	if err != nil {
		return model.Task{}, false, wrap("create task", err)
	}
	return stored, existed, nil
}

// taskSubmitted is the audit row of a task's creation.
func taskSubmitted(t model.Task) model.AuditEvent {
	return model.AuditEvent{
		At: t.CreatedAt, Kind: "task.submitted", Actor: t.Caller, TaskID: t.ID,
		Data: auditData{
			"target":             t.Target,
			"mode":               string(t.Mode),
			"prompt_sha256":      sha256Hex(t.Prompt),
			"prompt_bytes":       strconv.Itoa(len(t.Prompt)),
			"artifacts":          strconv.Itoa(len(t.Artifacts)),
			"reference_task_ids": strconv.Itoa(len(t.ReferenceTaskIDs)),
		}.set("mission_id", t.MissionID).set("lease_id", t.LeaseID).
			set("context_id", t.ContextID).set("cwd", t.Cwd).
			set("idempotency_key", t.IdempotencyKey).set("request_sha256", t.RequestSHA256).
			set("parent_task_id", t.ParentTaskID).set("chain", chainAudit(t.Chain)),
	}
}

// chainAudit is a task's chain as its audit row keeps it: the JSON of its
// hops, "" for a top-level task (so the row is as it was before chains).
func chainAudit(chain []model.Hop) string {
	if len(chain) == 0 {
		return ""
	}
	b, _ := json.Marshal(chain) // strings only: it cannot fail
	return string(b)
}

// GetTask returns a task, or an *Error with CodeNotFound.
func (db *DB) GetTask(ctx context.Context, id string) (model.Task, error) {
	got, err := db.queryTasks(ctx, db.rq, qTaskByID, id)
	if err != nil {
		return model.Task{}, wrap("get task", err)
	}
	if len(got) == 0 {
		return model.Task{}, notFound("task", id)
	}
	return got[0], nil
}

// Transition applies a compare-and-set state write:
//
//	UPDATE tasks SET state = To, code, message, updated_at [, result…]
//	WHERE id = TaskID AND state = From
//
// and, in the same transaction, inserts the event row and the verdict rows,
// stores tr.Result when set, and appends the audit rows: one "gate.verdict"
// per verdict, then one "task.transition". When the task is not in tr.From
// it returns an *Error with CodeStaleState wrapping model.ErrStaleState
// (CodeNotFound if there is no such task) and writes nothing. A terminal
// From is CodeInvalidTransition: terminal states never change.
func (db *DB) Transition(ctx context.Context, tr model.Transition) (model.Task, error) {
	switch {
	case tr.TaskID == "":
		return model.Task{}, model.InvalidArgs("transition without a task id")
	case !tr.From.Valid() || !tr.To.Valid():
		return model.Task{}, model.InvalidArgs("transition of task %q from %q to %q: unknown state", tr.TaskID, tr.From, tr.To)
	case tr.Trigger == "":
		return model.Task{}, model.InvalidArgs("transition of task %q without a trigger", tr.TaskID)
	case tr.From.Terminal():
		return model.Task{}, &model.Error{Code: model.CodeInvalidTransition,
			Message: fmt.Sprintf("task %q: %s is terminal and never changes", model.Echo(tr.TaskID), tr.From)}
	}
	at, err := stamp("transition time", tr.At, db.now)
	if err != nil {
		return model.Task{}, err
	}
	atText := formatTime(at)

	query := qTransition
	args := []any{string(tr.To), string(tr.Code), tr.Message, atText}
	if tr.Result != nil {
		calls, err := jsonArray(tr.Result.ToolCalls)
		if err != nil {
			return model.Task{}, wrap("transition", err)
		}
		query = qTransitionResult
		args = append(args, tr.Result.Text, tr.Result.StopReason, tr.Result.SessionMode, calls)
	}
	args = append(args, tr.TaskID, string(tr.From))

	var out model.Task
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		got, err := db.queryTasks(ctx, w, query, args...)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return casMiss(ctx, w, tr.TaskID, tr.From)
		}
		out = got[0]

		ev := taskEventRow{TaskID: tr.TaskID, From: string(tr.From), To: string(tr.To), Trigger: string(tr.Trigger),
			Code: string(tr.Code), Message: tr.Message, Actor: tr.Actor, At: atText}
		if _, err := w.ExecContext(ctx, qEventInsert, eventBind.args(&ev)...); err != nil {
			return err
		}
		for _, v := range tr.Verdicts {
			if err := insertVerdict(ctx, w, tr, v, at); err != nil {
				return err
			}
		}
		data := map[string]string{"from": string(tr.From), "to": string(tr.To), "trigger": string(tr.Trigger),
			"code": string(tr.Code), "message": tr.Message}
		if tr.Result != nil {
			// The chain keeps the result's digest, so that it still
			// vouches for what the agent answered once the task is
			// pruned (the audit log is never pruned).
			data["result_sha256"], data["result_bytes"] = sha256Hex(tr.Result.Text), strconv.Itoa(len(tr.Result.Text))
		}
		if err := w.audit(ctx, model.AuditEvent{
			At: at, Kind: "task.transition", Actor: tr.Actor, TaskID: tr.TaskID, Data: data,
		}); err != nil {
			return err
		}
		if tr.NoticeID == "" || !tr.To.Terminal() {
			return nil
		}
		body, err := db.noticeBody(ctx, w, out)
		if err != nil {
			return err
		}
		return insertMessage(ctx, w, model.Message{ID: tr.NoticeID, From: model.RelayAgent, To: out.Caller,
			Body: body, ContextID: out.ContextID, Artifacts: []model.Artifact{}, CreatedAt: at})
	})
	if err != nil {
		return model.Task{}, wrap("transition", err)
	}
	return out, nil
}

// noticeBody is the body of t's end notice to its submitter. The notice
// is never refused, whatever the submitter's quota: it commits with the
// task's end, which must be recorded. But when the full notice would take
// the submitter's inbox past its quota, the notice is the short one
// (model.ShortEndNotice: the task, its state and code, and get_task),
// and the result stays on the task. So a submitter that never
// acknowledges its inbox holds at most one short notice per task it
// submitted beyond its quota.
func (db *DB) noticeBody(ctx context.Context, w *writeTx, t model.Task) (string, error) {
	body := model.EndNotice(t)
	if db.limits.inboxMessages == 0 && db.limits.inboxBytes == 0 {
		return body, nil
	}
	u, err := inboxUsage(ctx, w, t.Caller)
	if err != nil {
		return "", err
	}
	if db.limits.overQuota(t.Caller, u, int64(len(body))) != "" {
		return model.ShortEndNotice(t), nil
	}
	return body, nil
}

// insertVerdict stores one verdict and audits it ("gate.verdict").
func insertVerdict(ctx context.Context, w *writeTx, tr model.Transition, v model.Verdict, at time.Time) error {
	vat, err := stamp("verdict time", v.At, func() time.Time { return at })
	if err != nil {
		return err
	}
	detail, err := jsonObject(v.Detail)
	if err != nil {
		return err
	}
	row := taskVerdictRow{TaskID: tr.TaskID, Gate: string(v.Gate), Passed: v.Passed, Code: string(v.Code),
		Message: v.Message, Detail: detail, At: formatTime(vat)}
	if _, err := w.ExecContext(ctx, qVerdictInsert, verdictBind.args(&row)...); err != nil {
		return err
	}
	data := map[string]string{"gate": string(v.Gate), "passed": strconv.FormatBool(v.Passed),
		"code": string(v.Code), "message": v.Message}
	for k, val := range v.Detail {
		if _, reserved := data[k]; reserved {
			k = "detail." + k // never let a detail key hide a verdict field
		}
		data[k] = val
	}
	return w.audit(ctx, model.AuditEvent{At: vat, Kind: "gate.verdict", Actor: tr.Actor, TaskID: tr.TaskID, Data: data})
}

// casMiss explains a compare-and-set that matched no row: the task does not
// exist (not_found) or is in another state (stale_state).
func casMiss(ctx context.Context, q querier, id string, from model.State) error {
	var cur string
	err := q.QueryRowContext(ctx, qTaskState, id).Scan(&cur)
	if err == sql.ErrNoRows {
		return notFound("task", id)
	}
	if err != nil {
		return err
	}
	return &model.Error{
		Code:    model.CodeStaleState,
		Message: fmt.Sprintf("task %q is %s, not %s", model.Echo(id), cur, from),
		Err:     model.ErrStaleState,
	}
}

// ListTasks returns the tasks matching f, newest first. f.Limit defaults
// to model.DefaultPageSize and is capped at model.MaxPageSize; f.Before is
// the id of a task, and only older tasks are returned (not_found if there is no such task). The
// page stops before the task that would take its encoded answer past the
// DB's answer bound (it always holds one): page on with Before until a page
// is empty.
//
// A caller-or-target filter (Visible, Agent) is run as two index walks
// newest first, one on tasks_caller_seq and one on tasks_target_seq, each
// stopping at the page size, and merged: its cost is the page size, not
// the agent's history (an OR in one WHERE would sort every task the agent
// ever touched).
func (db *DB) ListTasks(ctx context.Context, f model.TaskFilter) ([]model.Task, error) {
	if f.State != "" && !f.State.Valid() {
		return nil, model.InvalidArgs("unknown state %q", f.State)
	}
	var where []string
	var args []any
	add := func(clause string, a ...any) {
		where = append(where, clause)
		args = append(args, a...)
	}
	if f.State != "" {
		add(`state = ?`, string(f.State))
	}
	if f.Caller != "" {
		add(`caller = ?`, f.Caller)
	}
	if f.Target != "" {
		add(`target = ?`, f.Target)
	}
	// Caller-or-target filters: the first one splits the query in two
	// arms, any other stays an OR clause in both.
	var either []string
	for _, a := range []string{f.Visible, f.Agent} {
		if a != "" && !slices.Contains(either, a) {
			either = append(either, a)
		}
	}
	for _, a := range either[min(1, len(either)):] {
		add(`(caller = ? OR target = ?)`, a, a)
	}
	n := pageSize(f.Limit)
	var out []model.Task
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		where, args := where, args
		if f.Before != "" {
			seq, err := seqOf(ctx, tx, "tasks", f.Before)
			if err != nil {
				return err
			}
			where, args = append(where, `seq < ?`), append(args, seq)
		}
		query := taskPageQuery(where, len(either) > 0)
		qargs := append(slices.Clip(args), n)
		if len(either) > 0 {
			qargs = append(append(append(slices.Clip(args), either[0], n), args...), either[0], n, n)
		}
		budget := model.NewByteBudget(db.answerBytes)
		take := func(t model.Task) bool {
			size := model.EncodedLen(t)
			if t.Code != "" {
				size += model.MaxTaskHintBytes // filled in after the page is cut
			}
			return budget.Take(size)
		}
		var err error
		out, err = db.queryTasksUpTo(ctx, tx, take, query, qargs...)
		return err
	})
	if err != nil {
		return nil, wrap("list tasks", err)
	}
	return out, nil
}

// taskPages caches taskPageQuery's texts by shape: the where fragments
// are ListTasks's own literals, so the shapes are few and fixed.
var taskPages sync.Map

// taskPageQuery returns the text of a newest-first page of tasks matching
// the conditions in where, built with bun once per shape (bun takes ~20 µs
// to build the caller-or-target form, the cache 0.2-0.3 µs to find it:
// BenchmarkBuildListQuery) and prepared once, by the statement cache. Its parameters are where's, then the
// page size. With either, the page is also filtered by caller = ? or
// target = ?: both arms are newest-first walks of their own index
// (tasks_caller_seq, tasks_target_seq), each with where's parameters, the
// agent and the page size, and UNION drops a task that is in both (caller
// == target). Each arm yields only seqs (from its index alone when no
// other filter needs the row); the page's rows are read once.
func taskPageQuery(where []string, either bool) string {
	key := strings.Join(where, " AND ") + " | " + strconv.FormatBool(either)
	if q, ok := taskPages.Load(key); ok {
		return q.(string)
	}
	q := buildTaskPage(where, either)
	taskPages.Store(key, q)
	return q
}

// buildTaskPage builds taskPageQuery's text.
func buildTaskPage(where []string, either bool) string {
	g := sqlgen()
	walk := func(q *bun.SelectQuery, extra ...string) *bun.SelectQuery {
		for _, w := range append(slices.Clip(where), extra...) {
			q = q.Where(w)
		}
		return q.OrderExpr("seq DESC LIMIT ?")
	}
	page := g.NewSelect().Model((*taskRow)(nil))
	if either {
		seqs := func(col string) *bun.SelectQuery {
			return walk(g.NewSelect().Model((*taskRow)(nil)).Column("seq"), col+" = ?")
		}
		page = page.Where("seq IN (SELECT seq FROM (?) UNION SELECT seq FROM (?))", seqs("caller"), seqs("target")).
			OrderExpr("seq DESC LIMIT ?")
	} else {
		page = walk(page)
	}
	return page.String()
}

// seqOf returns the seq of a cursor row in table ("tasks" or "messages").
func seqOf(ctx context.Context, q querier, table, id string) (int64, error) {
	var seq int64
	err := q.QueryRowContext(ctx, `SELECT seq FROM `+table+` WHERE id = ?`, id).Scan(&seq)
	if err == sql.ErrNoRows {
		return 0, notFound("cursor", id)
	}
	return seq, err
}

// TaskEvents returns a task's transitions, oldest first (not_found for an
// unknown task).
func (db *DB) TaskEvents(ctx context.Context, id string) ([]model.Event, error) {
	var out []model.Event
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		if out, err = db.readTaskEvents(ctx, tx, id); err != nil || len(out) > 0 {
			return err
		}
		return taskExists(ctx, tx, id)
	})
	if err != nil {
		return nil, wrap("task events", err)
	}
	return out, nil
}

// TaskDetail implements model.Store: the task, its events and its
// verdicts in one read transaction, so one snapshot: a transition that
// commits meanwhile is either in all three or in none (three separate
// reads could show a state with no event leading to it, or an event
// whose state the task has not reached).
func (db *DB) TaskDetail(ctx context.Context, id string) (model.TaskDetail, error) {
	var d model.TaskDetail
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		got, err := db.queryTasks(ctx, tx, qTaskByID, id)
		switch {
		case err != nil:
			return err
		case len(got) == 0:
			return notFound("task", id)
		}
		d = model.TaskDetail{Task: got[0]}
		if d.Events, err = db.readTaskEvents(ctx, tx, id); err != nil {
			return err
		}
		d.Verdicts, err = db.readTaskVerdicts(ctx, tx, id)
		return err
	})
	if err != nil {
		return model.TaskDetail{}, wrap("task detail", err)
	}
	if d.Events == nil {
		d.Events = []model.Event{}
	}
	if d.Verdicts == nil {
		d.Verdicts = []model.Verdict{}
	}
	return d, nil
}

// readTaskEvents reads a task's events, oldest first (none for an unknown
// task).
func (db *DB) readTaskEvents(ctx context.Context, tx querier, id string) ([]model.Event, error) {
	rows, err := tx.QueryContext(ctx, qTaskEvents, id)
	if err != nil {
		return nil, err
	}
	var ers []taskEventRow
	if err := db.reader.ScanRows(ctx, rows, &ers); err != nil {
		return nil, err
	}
	out := make([]model.Event, 0, len(ers))
	for _, r := range ers {
		at, err := parseTime(r.At)
		if err != nil {
			return nil, fmt.Errorf("event of task %s: at: %w", id, err)
		}
		out = append(out, model.Event{TaskID: r.TaskID, From: model.State(r.From), To: model.State(r.To),
			Trigger: model.Trigger(r.Trigger), Code: model.Code(r.Code), Message: r.Message, Actor: r.Actor, At: at})
	}
	return out, nil
}

// TaskVerdicts returns every gate verdict recorded for a task, oldest first
// (not_found for an unknown task).
func (db *DB) TaskVerdicts(ctx context.Context, id string) ([]model.Verdict, error) {
	var out []model.Verdict
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		var err error
		if out, err = db.readTaskVerdicts(ctx, tx, id); err != nil || len(out) > 0 {
			return err
		}
		return taskExists(ctx, tx, id)
	})
	if err != nil {
		return nil, wrap("task verdicts", err)
	}
	return out, nil
}

// readTaskVerdicts reads a task's verdicts, oldest first (none for an
// unknown task).
func (db *DB) readTaskVerdicts(ctx context.Context, tx querier, id string) ([]model.Verdict, error) {
	rows, err := tx.QueryContext(ctx, qTaskVerdicts, id)
	if err != nil {
		return nil, err
	}
	var vrs []taskVerdictRow
	if err := db.reader.ScanRows(ctx, rows, &vrs); err != nil {
		return nil, err
	}
	out := make([]model.Verdict, 0, len(vrs))
	for _, r := range vrs {
		v := model.Verdict{Gate: model.Gate(r.Gate), Passed: r.Passed, Code: model.Code(r.Code), Message: r.Message}
		if v.Detail, err = fromJSONObject(r.Detail); err != nil {
			return nil, fmt.Errorf("verdict of task %s: detail: %w", id, err)
		}
		if v.At, err = parseTime(r.At); err != nil {
			return nil, fmt.Errorf("verdict of task %s: at: %w", id, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// taskExists returns not_found unless the task exists.
func taskExists(ctx context.Context, q querier, id string) error {
	var one int
	err := q.QueryRowContext(ctx, qTaskExists, id).Scan(&one)
	if err == sql.ErrNoRows {
		return notFound("task", id)
	}
	return err
}

// MaxDenialRows bounds the "permission.denied" audit rows of one task: an
// agent that asks for permissions in a loop is denied every time, and
// each denial is counted on the task (denied_permissions), but only the
// first MaxDenialRows are audited one by one, so that an agent cannot
// grow the log as fast as it can ask. The last of them says so.
const MaxDenialRows = 64

// RecordDenial counts a denied permission request on a working task and
// audits it ("permission.denied", actor "relay": the relay denied it), in
// one transaction; past MaxDenialRows denials of the task it only counts.
// A task that is not working is stale_state (not_found if it does not
// exist), and nothing is written.
func (db *DB) RecordDenial(ctx context.Context, taskID string, data map[string]string) error {
	if taskID == "" {
		return model.InvalidArgs("denial without a task id")
	}
	at := db.now()
	err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
		var target string
		var count int
		err := w.QueryRowContext(ctx, qDenial, formatTime(at), taskID, string(model.StateWorking)).Scan(&target, &count)
		if err == sql.ErrNoRows {
			return casMiss(ctx, w, taskID, model.StateWorking)
		}
		if err != nil {
			return err
		}
		d := auditData{}
		for k, v := range data {
			d[k] = v
		}
		if _, ok := d["target"]; !ok {
			d["target"] = target
		}
		d["denied_permissions"] = strconv.Itoa(count)
		switch {
		case count > MaxDenialRows:
			return nil
		case count == MaxDenialRows:
			d["later_denials"] = "counted on the task (denied_permissions), not audited one by one"
		}
		return w.audit(ctx, model.AuditEvent{At: at, Kind: "permission.denied", Actor: model.RelayAgent, TaskID: taskID, Data: d})
	})
	return wrap("record denial", err)
}
