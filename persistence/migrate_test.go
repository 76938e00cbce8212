package persistence

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestEmbeddedMigrations(t *testing.T) {
	t.Parallel()
	migs := Migrations()
	if len(migs) < 2 {
		t.Fatalf("want at least 2 migrations, have %d", len(migs))
	}
	for i, m := range migs {
		if m.Version != i+1 || m.Name == "" || strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
	}
	if LatestVersion() != len(migs) {
		t.Errorf("LatestVersion = %d, want %d", LatestVersion(), len(migs))
	}
}

func TestParseMigrationsRejectsMalformedSets(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fstest.MapFS{
		"bad name": {"m/0001_init.sql": {Data: []byte("SELECT 1;")}, "m/2_next.sql": {Data: []byte("SELECT 1;")}},
		"gap":      {"m/0001_init.sql": {Data: []byte("SELECT 1;")}, "m/0003_next.sql": {Data: []byte("SELECT 1;")}},
		"no 0001":  {"m/0002_next.sql": {Data: []byte("SELECT 1;")}},
		"empty":    {"m/readme.txt": {Data: []byte("x")}},
	} {
		if _, err := parseMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestMigrateEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	v, err := db.SchemaVersion(ctx)
	if err != nil || v != LatestVersion() {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, LatestVersion())
	}
	applied, err := appliedMigrations(ctx, db.reader.DB)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range Migrations() {
		if applied[i].Version != m.Version || applied[i].Name != m.Name {
			t.Errorf("recorded %+v, want %d %s", applied[i], m.Version, m.Name)
		}
	}
	for _, table := range []string{"tasks", "task_events", "task_verdicts", "messages", "agents",
		"audit_log", "audit_head", "schema_migrations"} {
		if count(t, db, "sqlite_master", "type = 'table' AND name = ?", table) != 1 {
			t.Errorf("table %s missing", table)
		}
	}
}

// TestMigrateFromPreviousSchema builds the schema as each earlier release
// left it, writes through it, then lets Open migrate forward.
func TestMigrateFromPreviousSchema(t *testing.T) {
	t.Parallel()
	for prev := 1; prev < LatestVersion(); prev++ {
		t.Run(fmt.Sprintf("from %d", prev), func(t *testing.T) {
			t.Parallel()
			migrateFrom(t, prev)
		})
	}
}

func migrateFrom(t *testing.T, prev int) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")

	// The old schema has no inbox_usage (0006): the old handle writes
	// without the quota, as the old code did.
	old, err := Open(ctx, path, Options{MigrateTo: prev, InboxMessages: NoLimit, InboxBytes: NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := old.SchemaVersion(ctx); v != prev {
		t.Fatalf("SchemaVersion = %d, want %d", v, prev)
	}
	if prev < 2 && count(t, old, "sqlite_master", "name = 'agents'") != 0 {
		t.Fatal("agents exists before 0002")
	}
	if prev < 3 && count(t, old, "pragma_table_info('tasks')", "name = 'request_sha256'") != 0 {
		t.Fatal("tasks.request_sha256 exists before 0003")
	}
	if prev < 4 && count(t, old, "sqlite_master", "name = 'agent_verifications'") != 0 {
		t.Fatal("agent_verifications exists before 0004")
	}
	// The old schema is written as the old code did, without the columns
	// it did not have.
	for i := range 5 {
		task := newTask(seqID("T", i))
		task.IdempotencyKey = "k-" + seqID("T", i)
		if err := old.write(ctx, func(ctx context.Context, w *writeTx) error {
			_, err := w.ExecContext(ctx, `INSERT INTO tasks (seq, id, state, caller, target, mode, mission_id, lease_id,
				prompt, cwd, idempotency_key, created_at, updated_at) VALUES (?, ?, 'submitted', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				i+1, task.ID, task.Caller, task.Target, string(task.Mode), task.MissionID, task.LeaseID, task.Prompt,
				task.Cwd, task.IdempotencyKey, formatTime(t0), formatTime(t0))
			if err != nil {
				return err
			}
			return w.audit(ctx, model.AuditEvent{At: t0, Kind: "task.submitted", Actor: task.Caller, TaskID: task.ID})
		}); err != nil {
			t.Fatal(err)
		}
	}
	oldMessage(t, old, model.Message{ID: "m-1", From: "codex", To: "claude", Body: "hi"})
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db := MustOpen(t, path, Options{})
	if v, _ := db.SchemaVersion(ctx); v != LatestVersion() {
		t.Fatalf("SchemaVersion after migrating = %d, want %d", v, LatestVersion())
	}
	got, err := db.ListTasks(ctx, model.TaskFilter{})
	if err != nil || len(got) != 5 {
		t.Fatalf("ListTasks = %d tasks, %v", len(got), err)
	}
	// A task stored by the old schema takes transitions.
	if _, err := db.Transition(ctx, model.Transition{TaskID: "T-0001", From: model.StateSubmitted,
		To: model.StateRejected, Trigger: model.TriggerReject, Code: model.CodeMissingLeaseID,
		Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Code: model.CodeMissingLeaseID}}}); err != nil {
		t.Fatal(err)
	}
	task, err := db.GetTask(ctx, "T-0001")
	if err != nil || task.State != model.StateRejected || task.Code != model.CodeMissingLeaseID {
		t.Fatalf("GetTask = %+v, %v", task, err)
	}
	if vs, err := db.TaskVerdicts(ctx, "T-0001"); err != nil || len(vs) != 1 {
		t.Fatalf("TaskVerdicts = %v, %v", vs, err)
	}
	if ms, err := db.ListMessages(ctx, model.MessageFilter{}); err != nil || len(ms) != 1 {
		t.Fatalf("ListMessages = %v, %v", ms, err)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK || rep.Rows != 8 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	// What 0002 brought works on the migrated file.
	if err := db.RecordProbe(ctx, Probe{Name: "claude", WorkedLive: true, At: t0, Reason: "end_turn"}); err != nil {
		t.Fatal(err)
	}
	if count(t, db, "sqlite_master", "type = 'index' AND name = 'tasks_caller_seq'") != 1 {
		t.Error("listing index missing after migration")
	}
	// And what 0003 brought: a task stored before it has no request hash,
	// its idempotency key still finds it; a new task keeps its hash.
	again := newTask("T-new")
	again.IdempotencyKey, again.RequestSHA256 = "k-T-0002", strings.Repeat("a", 64)
	first, existed, err := db.CreateTask(ctx, again)
	if err != nil || !existed || first.ID != "T-0002" || first.RequestSHA256 != "" {
		t.Fatalf("CreateTask with an old task's key = %s (hash %q), existed=%v, %v; want T-0002 without a hash",
			first.ID, first.RequestSHA256, existed, err)
	}
	fresh := newTask("T-fresh")
	fresh.RequestSHA256 = strings.Repeat("b", 64)
	mustCreate(t, db, fresh)
	if got, err := db.GetTask(ctx, "T-fresh"); err != nil || got.RequestSHA256 != fresh.RequestSHA256 {
		t.Fatalf("GetTask(T-fresh).RequestSHA256 = %q, %v", got.RequestSHA256, err)
	}
	// And what 0007 brought: the rows stored before it are top-level; a
	// new delegated task and message keep their parent and chain.
	if old, err := db.GetTask(ctx, "T-0003"); err != nil || old.ParentTaskID != "" || old.Chain == nil || len(old.Chain) != 0 {
		t.Fatalf("GetTask(T-0003) = parent %q chain %#v, %v; want a top-level task", old.ParentTaskID, old.Chain, err)
	}
	child := newTask("T-child")
	child.ParentTaskID, child.Chain = "T-fresh", []model.Hop{{TaskID: "T-fresh", Caller: "codex", Target: "claude"}}
	mustCreate(t, db, child)
	if got, err := db.GetTask(ctx, "T-child"); err != nil || got.ParentTaskID != "T-fresh" || !slices.Equal(got.Chain, child.Chain) {
		t.Fatalf("GetTask(T-child) = parent %q chain %v, %v", got.ParentTaskID, got.Chain, err)
	}
	if _, err := db.CreateMessage(ctx, model.Message{ID: "m-2", From: "claude", To: "codex", Body: "inside", ParentTaskID: "T-fresh"}); err != nil {
		t.Fatal(err)
	}
	if m, err := db.GetMessage(ctx, "m-2"); err != nil || m.ParentTaskID != "T-fresh" {
		t.Fatalf("GetMessage(m-2) = parent %q, %v", m.ParentTaskID, err)
	}
	if m, err := db.GetMessage(ctx, "m-1"); err != nil || m.ParentTaskID != "" {
		t.Fatalf("GetMessage(m-1) = parent %q, %v", m.ParentTaskID, err)
	}
}

// oldMessage stores m in a schema older than 0007 as the code of then
// did: the columns of 0001 (the statements of today name 0007's too),
// audited as CreateMessage audits.
func oldMessage(t *testing.T, db *DB, m model.Message) {
	t.Helper()
	m.State, m.Artifacts = model.MessageStored, []model.Artifact{}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = db.now()
	}
	if err := db.write(context.Background(), func(ctx context.Context, w *writeTx) error {
		_, err := w.ExecContext(ctx, `INSERT INTO messages (seq, id, from_agent, to_agent, body, context_id, reply_to, artifacts,
			state, created_at) VALUES ((SELECT IFNULL(MAX(seq), 0) + 1 FROM messages), ?, ?, ?, ?, ?, ?, '[]', 'stored', ?)`,
			m.ID, m.From, m.To, m.Body, m.ContextID, m.ReplyTo, formatTime(m.CreatedAt))
		if err != nil {
			return err
		}
		return w.audit(ctx, messageStored(m))
	}); err != nil {
		t.Fatal(err)
	}
}

// oldRejected stores a task rejected by missionLease, with its event and
// its end notice to its caller, in a schema older than 0007, as the code
// of then did.
func oldRejected(t *testing.T, db *DB, id string) {
	t.Helper()
	task := newTask(id)
	now := db.now()
	if err := db.write(context.Background(), func(ctx context.Context, w *writeTx) error {
		_, err := w.ExecContext(ctx, `INSERT INTO tasks (seq, id, state, code, caller, target, mode, mission_id, lease_id,
			prompt, cwd, created_at, updated_at) VALUES ((SELECT IFNULL(MAX(seq), 0) + 1 FROM tasks), ?, 'rejected', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, string(model.CodeMissingLeaseID), task.Caller, task.Target, string(task.Mode), task.MissionID, task.LeaseID,
			task.Prompt, task.Cwd, formatTime(now), formatTime(now))
		if err != nil {
			return err
		}
		if err := w.audit(ctx, model.AuditEvent{At: now, Kind: "task.submitted", Actor: task.Caller, TaskID: id}); err != nil {
			return err
		}
		ev := taskEventRow{TaskID: id, From: "submitted", To: "rejected", Trigger: "reject", Code: string(model.CodeMissingLeaseID), At: formatTime(now)}
		if _, err := w.ExecContext(ctx, qEventInsert, eventBind.args(&ev)...); err != nil {
			return err
		}
		return w.audit(ctx, model.AuditEvent{At: now, Kind: "task.transition", Actor: model.RelayAgent, TaskID: id,
			Data: map[string]string{"from": "submitted", "to": "rejected", "trigger": "reject", "code": string(model.CodeMissingLeaseID)}})
	}); err != nil {
		t.Fatal(err)
	}
	oldMessage(t, db, model.Message{ID: "N-" + id, From: model.RelayAgent, To: task.Caller, Body: "task " + id + " rejected"})
}

func TestFailedMigrationIsNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	next := LatestVersion() + 1
	broken := append(Migrations(), Migration{Version: next, Name: "broken",
		// The first statement succeeds; the second fails. Both must vanish.
		SQL: "CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);"})

	_, err := Open(ctx, path, Options{migrations: broken})
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Open with a broken migration: err = %v", err)
	}

	// The earlier migrations were applied and recorded; the broken one
	// left neither its table nor its row.
	db := MustOpen(t, path, Options{})
	if v, _ := db.SchemaVersion(ctx); v != LatestVersion() {
		t.Fatalf("SchemaVersion = %d, want %d", v, LatestVersion())
	}
	if count(t, db, "sqlite_master", "name = 'half_done'") != 0 {
		t.Error("the failed migration's first statement was kept")
	}
	if count(t, db, "schema_migrations", "version = ?", next) != 0 {
		t.Error("the failed migration was recorded as applied")
	}
	mustCreate(t, db, newTask("T-1"))
	db.Close()

	// Once fixed, it applies and is recorded.
	fixed := append(Migrations(), Migration{Version: next, Name: "broken", SQL: "CREATE TABLE half_done (x INTEGER);"})
	db2 := MustOpen(t, path, Options{migrations: fixed})
	if v, _ := db2.SchemaVersion(ctx); v != next {
		t.Fatalf("SchemaVersion after fix = %d, want %d", v, next)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	future := append(Migrations(), Migration{Version: LatestVersion() + 1, Name: "future", SQL: "CREATE TABLE future (x);"})
	db, err := Open(ctx, path, Options{migrations: future})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err := Open(ctx, path, Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open of a newer schema: err = %v", err)
	}
}

func TestRenamedMigrationIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	MustOpen(t, path, Options{}).Close()
	renamed := Migrations()
	renamed[0].Name = "something_else"
	if db, err := Open(ctx, path, Options{migrations: renamed}); err == nil {
		db.Close()
		t.Fatal("Open accepted a migration set whose version 1 has another name")
	}
}

// TestCheckListsMatchModel keeps the CHECK (… IN (…)) lists of the live
// schema equal to the model's value sets.
func TestCheckListsMatchModel(t *testing.T) {
	t.Parallel()
	db := MustOpenTemp(t)
	schema := func(table string) string {
		var s string
		if err := db.reader.DB.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	list := func(sql, column string) []string {
		m := regexp.MustCompile(`CHECK \(` + column + ` IN \(([^)]*)\)\)`).FindStringSubmatch(sql)
		if m == nil {
			t.Fatalf("no CHECK list for %s in %s", column, sql)
		}
		var out []string
		for _, v := range strings.Split(m[1], ",") {
			out = append(out, strings.Trim(strings.TrimSpace(v), "'"))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(vs []string) []string { slices.Sort(vs); return vs }

	var states, modes, msgStates []string
	for _, s := range model.AllStates() {
		states = append(states, string(s))
	}
	for _, m := range model.AllModes() {
		modes = append(modes, string(m))
	}
	for _, s := range model.AllMessageStates() {
		msgStates = append(msgStates, string(s))
	}
	var hardening []string
	for _, s := range model.AllHardeningStatuses() {
		hardening = append(hardening, string(s))
	}
	for _, c := range []struct {
		table, column string
		want          []string
	}{
		{"tasks", "state", sorted(states)},
		{"tasks", "mode", sorted(modes)},
		{"messages", "state", sorted(msgStates)},
		{"agent_verifications", "status", sorted(hardening)},
	} {
		if got := list(schema(c.table), c.column); !slices.Equal(got, c.want) {
			t.Errorf("%s.%s CHECK = %v, model = %v", c.table, c.column, got, c.want)
		}
	}
}

func TestCheckRefusesUnknownValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	w := db.writer.DB
	insert := func(id, state, mode string) error {
		_, err := w.ExecContext(ctx, `INSERT INTO tasks (id, seq, state, caller, target, mode, created_at, updated_at)
			VALUES (?, (SELECT IFNULL(MAX(seq), 0) + 1 FROM tasks), ?, 'codex', 'claude', ?, 'x', 'x')`, id, state, mode)
		return err
	}
	for _, s := range model.AllStates() {
		if err := insert("ok-"+string(s), string(s), "read_only"); err != nil {
			t.Errorf("state %s refused: %v", s, err)
		}
	}
	for _, m := range model.AllModes() {
		if err := insert("mode-"+string(m), "submitted", string(m)); err != nil {
			t.Errorf("mode %s refused: %v", m, err)
		}
	}
	for _, c := range []struct{ id, state, mode string }{
		{"bad-state", "paused", "read_only"},
		{"bad-case", "Submitted", "read_only"},
		{"bad-mode", "submitted", "admin"},
	} {
		if err := insert(c.id, c.state, c.mode); err == nil || !strings.Contains(err.Error(), "CHECK") {
			t.Errorf("%s: err = %v, want a CHECK failure", c.id, err)
		}
	}
	if _, err := w.ExecContext(ctx, `UPDATE tasks SET state = 'bogus' WHERE id = 'ok-submitted'`); err == nil {
		t.Error("UPDATE to an unknown state accepted")
	}
	if _, err := w.ExecContext(ctx, `INSERT INTO messages (id, seq, from_agent, to_agent, body, state, created_at)
		VALUES ('m', 1, 'a', 'b', '', 'deleted', 'x')`); err == nil {
		t.Error("unknown message state accepted")
	}
	if _, err := w.ExecContext(ctx, `INSERT INTO task_events (task_id, n, from_state, to_state, trigger_name, at)
		VALUES ('no-such-task', 1, 'submitted', 'authorized', 'authorize', 'x')`); err == nil {
		t.Error("event for a missing task accepted: foreign keys are off")
	}
}

// A database made before 0006 (at 0004, the last schema released before
// it) upgrades, verifies, and prunes: its audit chain verifies as it is
// (0006 touches no audit row), inbox_usage is filled from the messages
// already there, the quota holds from the first write, and a prune
// removes its acknowledged messages and ended tasks with the chain still
// verifying. It keeps its auto_vacuum mode (none): the freed pages are
// not given back to the filesystem, and new writes reuse them instead of
// growing the file.
func TestUpgradedDatabaseVerifiesAndPrunes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	clock := newTestClock(t0)
	// A file as the relay made it before: no auto_vacuum either.
	raw := rawOpen(t, path)
	mustExec(t, raw, "PRAGMA journal_mode = WAL")
	raw.Close()
	old, err := Open(ctx, path, Options{MigrateTo: 4, Clock: clock.now, InboxMessages: NoLimit, InboxBytes: NoLimit})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("old body ", 1000)
	for i := range 30 {
		oldMessage(t, old, model.Message{ID: seqID("M", i), From: "codex", To: "claude", Body: body})
	}
	if _, err := old.Ack(ctx, "claude", []string{seqID("M", 0), seqID("M", 1), seqID("M", 2)}); err != nil {
		t.Fatal(err)
	}
	oldRejected(t, old, "T-old")
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	clock.advance(72 * time.Hour)

	db := MustOpen(t, path, Options{Clock: clock.now, InboxMessages: 28, InboxSenderShare: NoLimit})
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("VerifyAudit after the upgrade = %+v, %v", rep, err)
	}
	if u, err := db.InboxUsage(ctx, "claude"); err != nil || u != (InboxUsage{Messages: 27, Bytes: 27 * int64(len(body))}) {
		t.Errorf("claude's usage after the upgrade = %+v, %v; want the 27 unacknowledged messages", u, err)
	}
	if u, _ := db.InboxUsage(ctx, "codex"); u.Messages != 1 {
		t.Errorf("codex's usage after the upgrade = %+v; want T-old's notice", u)
	}
	if err := trySend(db, "M-28th", "claude", "fits"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, trySend(db, "M-29th", "claude", "over"), model.CodeRecipientInboxFull)
	if _, err := db.Ack(ctx, "codex", []string{"N-T-old"}); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour)
	res, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{AckedMessages: 30 * time.Minute, TerminalTasks: 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if res.AckedMessages.Removed != 4 || res.TerminalTasks.Removed != 1 {
		t.Errorf("prune of the upgraded database = %+v; want 4 messages and 1 task", res.PruneReport)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("VerifyAudit after pruning the upgraded database = %+v, %v", rep, err)
	}
	st, err := storageOf(db)
	if err != nil {
		t.Fatal(err)
	}
	if st.autoVacuum != 0 || res.ReclaimedBytes != 0 || res.FreeBytes == 0 || res.FreeBytes != st.free() {
		t.Errorf("upgraded database: auto_vacuum %d, pass %+v; want none, nothing given back, the pages free inside", st.autoVacuum, res.PruneReport)
	}
	// The freed pages take the next writes: the file does not grow.
	if _, err := db.Ack(ctx, "claude", []string{seqID("M", 3), seqID("M", 4)}); err != nil {
		t.Fatal(err)
	}
	if err := trySend(db, "M-reuse", "claude", body); err != nil {
		t.Fatal(err)
	}
	if after, _ := storageOf(db); after.pages > st.pages {
		t.Errorf("a write after pruning grew the file from %d to %d pages, with %d free", st.pages, after.pages, st.freePages)
	}
}

// An old database (auto_vacuum none) is converted as docs/reliability.md
// says, with the daemon stopped: PRAGMA auto_vacuum = INCREMENTAL, then
// VACUUM. The audit chain verifies after it (VACUUM keeps every row and
// the relay orders by its own seq columns, not rowids), and from then on
// a prune gives the freed pages back to the filesystem.
func TestVacuumMakesAnOldDatabaseGiveSpaceBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	clock := newTestClock(t0)
	raw := rawOpen(t, path)
	mustExec(t, raw, "PRAGMA journal_mode = WAL")
	raw.Close()
	old := MustOpen(t, path, Options{Clock: clock.now})
	var ids []string
	for i := range 20 {
		ids = append(ids, seqID("M", i))
		if err := trySend(old, ids[i], "claude", strings.Repeat("v", 16<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Ack(ctx, "claude", ids); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	raw = rawOpen(t, path)
	mustExec(t, raw, "PRAGMA auto_vacuum = INCREMENTAL")
	mustExec(t, raw, "VACUUM")
	raw.Close()
	clock.advance(time.Hour)
	db := MustOpen(t, path, Options{Clock: clock.now})
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK || rep.Rows != 40 {
		t.Fatalf("VerifyAudit after VACUUM = %+v, %v", rep, err)
	}
	res, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{AckedMessages: time.Minute}})
	if err != nil || res.AckedMessages.Removed != 20 || res.ReclaimedBytes < 20*16<<10 {
		t.Errorf("prune after the conversion = %+v, %v; want the 20 messages' pages given back", res.PruneReport, err)
	}
}
