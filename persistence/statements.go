package persistence

import (
	"fmt"
	"sync"
)

// The store's fixed statements, built from the models (models.go) with
// bun's query builder, once, at the first Open (buildStatements), and then
// prepared on each pool (prepareAll).
//
// bun formats every value it is given into the SQL text. The store gives
// it none: each value is a ? that database/sql binds when the statement
// runs, and a model row's values are bound through its binder. Two reasons:
//   - bun's string quoting refuses a NUL byte and replaces invalid UTF-8
//     with U+FFFD, while the store keeps prompts, bodies and results byte
//     for byte as sent (TestCreateGetTask);
//   - a text without values is the same on every call, so it is prepared
//     once: SQLite's parse and plan cost more than most of these
//     statements' execution (BENCHMARKS.md, "What was changed": "Every
//     query prepared"), and building a query with bun costs tens of
//     microseconds on its own.
//
// A computed value is an SQL expression: seq and the per-task n are
// max + 1, which is race-free because the single writer runs one
// IMMEDIATE transaction at a time. Where clauses name their columns; the
// column lists of inserts, selects and RETURNING come from the models.
var (
	// audit.go
	qAuditHead, qAuditHeadUpdate, qAuditInsert, qAuditRows, qAuditCount string
	auditBind                                                           binder[auditRow]

	// task.go
	taskCols                                                 string // the tasks columns, in taskRow order
	taskScan                                                 scanner[taskRow]
	qTaskInsert, qTaskByID, qTaskByIdem, qTaskState          string
	qTaskExists, qTransition, qTransitionResult, qDenial     string
	qEventInsert, qVerdictInsert, qTaskEvents, qTaskVerdicts string
	taskBind                                                 binder[taskRow]
	eventBind                                                binder[taskEventRow]
	verdictBind                                              binder[taskVerdictRow]

	// message.go
	messageCols                                 string // the messages columns, in messageRow order
	messageScan                                 scanner[messageRow]
	qMessageInsert, qMessageByID, qMarkReadUpTo string
	qStoredUpTo, qUnreadCount, qAckOne          string
	messageBind                                 binder[messageRow]

	// quota.go
	qInboxUsage, qInboxSenderUsage, qInboxShares, qFreelistCount, qPageSize string

	// import.go: every column bound, seq and n included.
	qImportTask, qImportEvent, qImportVerdict, qImportMessage string
	importTaskBind                                            binder[taskRow]
	importEventBind                                           binder[taskEventRow]
	importVerdictBind                                         binder[taskVerdictRow]
	importMessageBind                                         binder[messageRow]

	// agent.go
	qProbeUpsert, qProbes, qVerificationUpsert, qVerifications string
	probeBind                                                  binder[agentRow]
	verificationBind                                           binder[agentVerificationRow]

	// writerQueries and readerQueries are prepared at Open on each pool.
	writerQueries, readerQueries []string
)

// buildStatements builds the statements above, once per process: the
// relay's other commands (a facade, the CLI) never open the store and
// never pay for it.
var buildStatements = sync.OnceFunc(func() {
	g := sqlgen()

	auditHead := func() *auditHeadRow { return nil }
	qAuditHead = g.NewSelect().Model(auditHead()).Column("seq", "hash").Where("id = 1").String()
	qAuditHeadUpdate = g.NewUpdate().Model(auditHead()).SetColumn("seq", "?").SetColumn("hash", "?").Where("id = 1").String()
	qAuditInsert, auditBind = insertOf[auditRow](nil)
	qAuditRows = g.NewSelect().Model((*auditRow)(nil)).Order("seq").String()
	qAuditCount = g.NewSelect().Model((*auditRow)(nil)).ColumnExpr("count(*)").String()

	task := func() *taskRow { return nil }
	taskCols, taskScan = columnsOf[taskRow](), scannerOf[taskRow]()
	qTaskInsert, taskBind = insertOf[taskRow](map[string]string{"seq": `(SELECT IFNULL(MAX(seq), 0) + 1 FROM tasks)`})
	qTaskByID = g.NewSelect().Model(task()).Where("id = ?").String()
	qTaskByIdem = g.NewSelect().Model(task()).Where("caller = ?").Where("idempotency_key = ?").String()
	qTaskState = g.NewSelect().Model(task()).Column("state").Where("id = ?").String()
	qTaskExists = g.NewSelect().Model(task()).ColumnExpr("1").Where("id = ?").String()
	// The compare-and-set writes: no row returned is a stale state.
	// Set in the order of the arguments: the columns, then id and state.
	transition := func(cols ...string) string {
		q := g.NewUpdate().Model(task())
		for _, c := range cols {
			q = q.SetColumn(c, "?")
		}
		return q.Where("id = ?").Where("state = ?").Returning(taskCols).String()
	}
	qTransition = transition("state", "code", "message", "updated_at")
	qTransitionResult = transition("state", "code", "message", "updated_at",
		"result", "stop_reason", "session_mode", "tool_calls")
	qDenial = g.NewUpdate().Model(task()).
		Set("denied_permissions = denied_permissions + 1").SetColumn("updated_at", "?").
		Where("id = ?").Where("state = ?").Returning("target, denied_permissions").String()
	// Events and verdicts are numbered per task: n = max + 1, found on
	// the primary key's prefix. ?1 is the first bound value, the task id.
	qEventInsert, eventBind = insertOf[taskEventRow](map[string]string{
		"n": `(SELECT IFNULL(MAX(n), 0) + 1 FROM task_events WHERE task_id = ?1)`})
	qVerdictInsert, verdictBind = insertOf[taskVerdictRow](map[string]string{
		"n": `(SELECT IFNULL(MAX(n), 0) + 1 FROM task_verdicts WHERE task_id = ?1)`})
	if eventBind[0].Name != "task_id" || verdictBind[0].Name != "task_id" {
		panic(fmt.Sprintf("persistence: ?1 must be task_id, not %s / %s", eventBind[0].Name, verdictBind[0].Name))
	}
	qTaskEvents = g.NewSelect().Model((*taskEventRow)(nil)).Where("task_id = ?").Order("n").String()
	qTaskVerdicts = g.NewSelect().Model((*taskVerdictRow)(nil)).Where("task_id = ?").Order("n").String()

	message := func() *messageRow { return nil }
	messageCols, messageScan = columnsOf[messageRow](), scannerOf[messageRow]()
	qMessageInsert, messageBind = insertOf[messageRow](map[string]string{"seq": `(SELECT IFNULL(MAX(seq), 0) + 1 FROM messages)`})
	qMessageByID = g.NewSelect().Model(message()).Where("id = ?").String()
	qMarkReadUpTo = g.NewUpdate().Model(message()).SetColumn("state", "?").SetColumn("read_at", "?").
		Where("to_agent = ?").Where("state = ?").Where("seq <= ?").String()
	qStoredUpTo = g.NewSelect().Model(message()).ColumnExpr("COUNT(*)").
		Where("to_agent = ?").Where("state = ?").Where("seq <= ?").String()
	qUnreadCount = g.NewSelect().Model(message()).ColumnExpr("COUNT(*)").Where("to_agent = ?").Where("state = ?").String()
	qAckOne = g.NewUpdate().Model(message()).
		SetColumn("state", "?").SetColumn("acked_at", "?").SetColumn("read_at", "IFNULL(read_at, ?)").
		Where("id = ?").String()

	qInboxSenderUsage = `SELECT messages, bytes FROM inbox_sender_usage WHERE agent = ? AND sender = ?`
	qInboxShares = `SELECT agent, sender, messages, bytes FROM inbox_sender_usage WHERE (? = '' OR agent = ?) AND messages > 0 ORDER BY agent, sender`
	qInboxUsage = g.NewSelect().Model((*inboxUsageRow)(nil)).Column("messages", "bytes").Where("agent = ?").String()
	qFreelistCount, qPageSize = `PRAGMA freelist_count`, `PRAGMA page_size`

	qProbeUpsert, probeBind = upsertOf[agentRow]("name")
	qProbes = g.NewSelect().Model((*agentRow)(nil)).Order("name").String()
	qVerificationUpsert, verificationBind = upsertOf[agentVerificationRow]("name")
	qVerifications = g.NewSelect().Model((*agentVerificationRow)(nil)).Order("name").String()

	qImportTask, importTaskBind = insertOf[taskRow](nil)
	qImportEvent, importEventBind = insertOf[taskEventRow](nil)
	qImportVerdict, importVerdictBind = insertOf[taskVerdictRow](nil)
	qImportMessage, importMessageBind = insertOf[messageRow](nil)

	writerQueries = []string{qAuditHead, qAuditHeadUpdate, qAuditInsert, qTaskByIdem, qTaskState,
		qTaskInsert, qTransition, qTransitionResult, qEventInsert, qVerdictInsert, qDenial,
		qMessageInsert, qMarkReadUpTo, qStoredUpTo, qUnreadCount, qAckOne, qInboxUsage, qInboxSenderUsage, qSavepoint, qRollbackTo, qRelease}
	readerQueries = []string{qAuditHead, qTaskByID, qTaskExists, qTaskEvents, qTaskVerdicts, qInboxUsage}
})

// upsertOf is insertOf with every column bound, that updates every other
// column of the row that has the same conflict key.
func upsertOf[T any](conflict string) (string, binder[T]) {
	q := sqlgen().NewInsert().Model(new(T))
	var b binder[T]
	for _, f := range tableOf[T]().Fields {
		q = q.Value(f.Name, "?")
		b = append(b, f)
	}
	// Without a SET, bun sets each column that is not the key to
	// EXCLUDED's.
	return q.On("CONFLICT (" + conflict + ") DO UPDATE").Returning("NULL").String(), b
}
