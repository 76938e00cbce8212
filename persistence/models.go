package persistence

import (
	"context"
	"database/sql"
	"reflect"
	"strings"
	"sync"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"
)

// The store's models: one struct per table, whose bun tags name the
// table's columns exactly as the migrations define them. The migrations
// are the schema; bun never creates or alters a table. These structs are
// the one place that lists a table's columns: every statement that
// inserts, selects or returns whole rows takes its column list from them
// through bun (see statements.go), and each table's rows are converted to
// and from the model types in one place beside the methods that use them.

// taskRow is a tasks row (task.go converts it).
type taskRow struct {
	bun.BaseModel `bun:"table:tasks"`

	ID                string `bun:"id,pk"`
	Seq               int64  `bun:"seq"`
	State             string `bun:"state"`
	Code              string `bun:"code"`
	Message           string `bun:"message"`
	Caller            string `bun:"caller"`
	Target            string `bun:"target"`
	Mode              string `bun:"mode"`
	MissionID         string `bun:"mission_id"`
	LeaseID           string `bun:"lease_id"`
	ContextID         string `bun:"context_id"`
	Prompt            string `bun:"prompt"`
	Cwd               string `bun:"cwd"`
	Artifacts         string `bun:"artifacts"`
	ReferenceTaskIDs  string `bun:"reference_task_ids"`
	IdempotencyKey    string `bun:"idempotency_key"`
	RequestSHA256     string `bun:"request_sha256"`
	Result            string `bun:"result"`
	StopReason        string `bun:"stop_reason"`
	SessionMode       string `bun:"session_mode"`
	ToolCalls         string `bun:"tool_calls"`
	DeniedPermissions int    `bun:"denied_permissions"`
	CreatedAt         string `bun:"created_at"`
	UpdatedAt         string `bun:"updated_at"`
	ParentTaskID      string `bun:"parent_task_id"`
	Chain             string `bun:"chain"`
}

// taskEventRow is a task_events row: one committed transition (task.go).
type taskEventRow struct {
	bun.BaseModel `bun:"table:task_events"`

	TaskID  string `bun:"task_id,pk"`
	N       int64  `bun:"n,pk"`
	From    string `bun:"from_state"`
	To      string `bun:"to_state"`
	Trigger string `bun:"trigger_name"`
	Code    string `bun:"code"`
	Message string `bun:"message"`
	Actor   string `bun:"actor"`
	At      string `bun:"at"`
}

// taskVerdictRow is a task_verdicts row: one gate verdict (task.go).
type taskVerdictRow struct {
	bun.BaseModel `bun:"table:task_verdicts"`

	TaskID  string `bun:"task_id,pk"`
	N       int64  `bun:"n,pk"`
	Gate    string `bun:"gate"`
	Passed  bool   `bun:"passed"`
	Code    string `bun:"code"`
	Message string `bun:"message"`
	Detail  string `bun:"detail"`
	At      string `bun:"at"`
}

// messageRow is a messages row (message.go).
type messageRow struct {
	bun.BaseModel `bun:"table:messages"`

	ID        string  `bun:"id,pk"`
	Seq       int64   `bun:"seq"`
	From      string  `bun:"from_agent"`
	To        string  `bun:"to_agent"`
	Body      string  `bun:"body"`
	ContextID string  `bun:"context_id"`
	ReplyTo   string  `bun:"reply_to"`
	Artifacts string  `bun:"artifacts"`
	State     string  `bun:"state"`
	CreatedAt string  `bun:"created_at"`
	ReadAt    *string `bun:"read_at"`
	AckedAt   *string `bun:"acked_at"`
	// ParentTaskID follows the columns of 0001, as migration 0007 adds it.
	ParentTaskID string `bun:"parent_task_id"`
}

// inboxUsageRow is an inbox_usage row: one recipient's unacknowledged
// messages and their body bytes, kept by the triggers of migration 0006
// (quota.go reads it).
type inboxUsageRow struct {
	bun.BaseModel `bun:"table:inbox_usage"`

	Agent    string `bun:"agent,pk"`
	Messages int64  `bun:"messages"`
	Bytes    int64  `bun:"bytes"`
}

// auditRow is an audit_log row (audit.go). Its text columns are nullable
// here, although the relay never writes a NULL, so that VerifyAudit
// reports a tampered NULL instead of failing to read the row.
type auditRow struct {
	bun.BaseModel `bun:"table:audit_log"`

	Seq       int64          `bun:"seq,pk"`
	At        sql.NullString `bun:"at"`
	Kind      sql.NullString `bun:"kind"`
	Actor     sql.NullString `bun:"actor"`
	TaskID    sql.NullString `bun:"task_id"`
	MessageID sql.NullString `bun:"message_id"`
	Data      sql.NullString `bun:"data"`
	PrevHash  sql.NullString `bun:"prev_hash"`
	Hash      sql.NullString `bun:"hash"`
}

// auditHeadRow is the audit_head row: the chain's last seq and hash
// (audit.go).
type auditHeadRow struct {
	bun.BaseModel `bun:"table:audit_head"`

	ID   int64  `bun:"id,pk"`
	Seq  int64  `bun:"seq"`
	Hash string `bun:"hash"`
}

// agentRow is an agents row: an agent's last live probe (agent.go).
type agentRow struct {
	bun.BaseModel `bun:"table:agents"`

	Name             string  `bun:"name,pk"`
	WorkedLive       bool    `bun:"worked_live"`
	WorkedLiveAt     *string `bun:"worked_live_at"`
	WorkedLiveReason string  `bun:"worked_live_reason"`
	UpdatedAt        string  `bun:"updated_at"`
	// Fingerprint follows the columns of 0001, as migration 0010 adds it.
	Fingerprint string `bun:"worked_live_fingerprint"`
}

// agentVerificationRow is an agent_verifications row: an agent's last
// hardening verification (agent.go).
type agentVerificationRow struct {
	bun.BaseModel `bun:"table:agent_verifications"`

	Name           string `bun:"name,pk"`
	Status         string `bun:"status"`
	VerifiedAt     string `bun:"verified_at"`
	AdapterVersion string `bun:"adapter_version"`
	AdapterPackage string `bun:"adapter_package"`
	AdapterPath    string `bun:"adapter_path"`
	Fingerprint    string `bun:"fingerprint"`
	Profile        string `bun:"profile"`
	Reason         string `bun:"reason"`
	Attempts       string `bun:"attempts"`
	UpdatedAt      string `bun:"updated_at"`
}

// schemaMigrationRow is a schema_migrations row (migrate.go, which
// creates this one table itself: it records the migrations).
type schemaMigrationRow struct {
	bun.BaseModel `bun:"table:schema_migrations"`

	Version   int    `bun:"version,pk"`
	Name      string `bun:"name"`
	AppliedAt string `bun:"applied_at"`
}

// sqlgen is the bun DB that builds the store's SQL text from the models.
// It has no connection: statements are run by database/sql, with their
// values bound (see statements.go for why).
var sqlgen = sync.OnceValue(func() *bun.DB { return bun.NewDB(nil, sqlitedialect.New()) })

// tableOf returns bun's table of model T.
func tableOf[T any]() *schema.Table { return sqlgen().Table(reflect.TypeFor[T]()) }

// columnsOf returns T's columns, quoted and comma-separated, in field
// order: the list a SELECT or RETURNING reads into a T with a scanner.
func columnsOf[T any]() string {
	fs := tableOf[T]().Fields
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = string(f.SQLName)
	}
	return strings.Join(names, ", ")
}

// binder binds a model row's fields as a statement's parameters, in the
// order of the statement's placeholders.
type binder[T any] []*schema.Field

// args returns r's bound field values. Strings, integers and booleans are
// bound as the plain values, which Go boxes without allocating when they
// are empty or small (reflect's Interface always copies), and a
// sql.NullString as its string or NULL (passed as itself, database/sql
// would box it and then its Value).
func (b binder[T]) args(r *T) []any {
	v := reflect.ValueOf(r).Elem()
	out := make([]any, len(b))
	for i, f := range b {
		fv := f.Value(v)
		switch fv.Kind() {
		case reflect.String:
			out[i] = fv.String()
			continue
		case reflect.Int, reflect.Int64:
			out[i] = fv.Int()
			continue
		case reflect.Bool:
			out[i] = fv.Bool()
			continue
		}
		if ns, ok := fv.Addr().Interface().(*sql.NullString); ok {
			if ns.Valid {
				out[i] = ns.String
			}
			continue
		}
		out[i] = fv.Interface()
	}
	return out
}

// insertOf builds, with bun's insert builder, an INSERT of a T into its
// table with every column: each a ? bound by the returned binder, in
// field order, except the columns in computed, whose value is the given
// SQL expression.
func insertOf[T any](computed map[string]string) (string, binder[T]) {
	q := sqlgen().NewInsert().Model(new(T))
	var b binder[T]
	for _, f := range tableOf[T]().Fields {
		if expr, ok := computed[f.Name]; ok {
			q = q.Value(f.Name, expr)
			continue
		}
		q = q.Value(f.Name, "?")
		b = append(b, f)
	}
	// bun adds RETURNING every column where the dialect can; NULL says
	// none.
	return q.Returning("NULL").String(), b
}

// scanner scans rows holding every column of T, in field order (a
// columnsOf list), into a T.
type scanner[T any] []*schema.Field

// scannerOf returns T's scanner.
func scannerOf[T any]() scanner[T] { return scanner[T](tableOf[T]().Fields) }

// dest returns pointers to r's fields, for rows.Scan. Scanning every row
// into one r through them costs less than bun's ScanRows, which fills a
// slice of models through its own scanners; queryTasksUpTo says where that
// matters, with the numbers.
func (s scanner[T]) dest(r *T) []any {
	v := reflect.ValueOf(r).Elem()
	out := make([]any, len(s))
	for i, f := range s {
		out[i] = f.Value(v).Addr().Interface()
	}
	return out
}

// scanAll runs query on the reader pool and scans every row into dest, a
// pointer to a slice of a model, with bun.
func (db *DB) scanAll(ctx context.Context, dest any, query string, args ...any) error {
	rows, err := db.rq.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return sqlgen().ScanRows(ctx, rows, dest)
}
