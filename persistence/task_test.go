package persistence

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestCreateAndGetTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	in := newTask("T-1")
	in.ContextID = "ctx-1"
	in.Cwd = "/home/u/project"
	in.Artifacts = []model.Artifact{{URI: "file:///a.txt", MediaType: "text/plain", Name: "a"}}
	in.ReferenceTaskIDs = []string{"T-0"}
	in.Prompt = "bytes kept as sent: \xff\xfe, NUL \x00, 'quotes' and ? marks"

	created, existed, err := db.CreateTask(ctx, in)
	if err != nil || existed {
		t.Fatalf("CreateTask = %v, %v", existed, err)
	}
	if created.State != model.StateSubmitted || !created.CreatedAt.Equal(t0) || !created.UpdatedAt.Equal(t0) {
		t.Errorf("created = %+v", created)
	}
	got, err := db.GetTask(ctx, "T-1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, created) {
		t.Errorf("GetTask =\n%+v\nCreateTask returned\n%+v", got, created)
	}
	if got.Prompt != in.Prompt {
		t.Errorf("prompt changed on the way: %q", got.Prompt)
	}
	if got.ToolCalls == nil || len(got.ToolCalls) != 0 {
		t.Errorf("ToolCalls = %#v, want empty, not nil", got.ToolCalls)
	}
	if count(t, db, "audit_log", "kind = 'task.submitted' AND task_id = 'T-1' AND actor = 'codex'") != 1 {
		t.Error("no task.submitted audit row")
	}
}

func TestCreateTaskDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	db := MustOpen(t, t.TempDir()+"/relay.db", Options{Clock: func() time.Time { return now }})

	in := newTask("T-1")
	in.Mode, in.CreatedAt = "", time.Time{}
	got := mustCreate(t, db, in)
	if got.Mode != model.ModeReadOnly || !got.CreatedAt.Equal(now) {
		t.Errorf("defaults: mode %q, created %v", got.Mode, got.CreatedAt)
	}

	for name, mutate := range map[string]func(*model.Task){
		"no id":      func(t *model.Task) { t.ID = "" },
		"no caller":  func(t *model.Task) { t.Caller = "" },
		"no target":  func(t *model.Task) { t.Target = "" },
		"bad mode":   func(t *model.Task) { t.Mode = "admin" },
		"not new":    func(t *model.Task) { t.State = model.StateWorking },
		"duplicated": func(t *model.Task) { t.ID = "T-1" },
	} {
		task := newTask("T-x")
		mutate(&task)
		if _, _, err := db.CreateTask(ctx, task); model.ErrorCode(err) != model.CodeInvalidArgs {
			t.Errorf("%s: err = %v, want invalid_args", name, err)
		}
	}
	if n := count(t, db, "tasks", ""); n != 1 {
		t.Errorf("tasks = %d after refused creates, want 1", n)
	}
	if n := count(t, db, "audit_log", ""); n != 1 {
		t.Errorf("audit rows = %d after refused creates, want 1", n)
	}
}

func TestIdempotencyKeyReturnsFirstTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	first := newTask("T-1")
	first.IdempotencyKey, first.RequestSHA256 = "k1", strings.Repeat("1", 64)
	mustCreate(t, db, first)
	if count(t, db, "audit_log", "kind = 'task.submitted' AND task_id = 'T-1' AND data LIKE ?", "%"+first.RequestSHA256+"%") != 1 {
		t.Error("the task.submitted audit row lacks the request hash")
	}
	audits := count(t, db, "audit_log", "")

	// The store returns the first task with its request hash, whatever the
	// repeat holds; telling a retry from a conflict is the engine's.
	again := newTask("T-2")
	again.IdempotencyKey, again.RequestSHA256 = "k1", strings.Repeat("2", 64)
	again.Prompt = "a different prompt"
	got, existed, err := db.CreateTask(ctx, again)
	if err != nil || !existed || got.ID != "T-1" || got.Prompt != first.Prompt || got.RequestSHA256 != first.RequestSHA256 {
		t.Fatalf("repeat = %s (hash %q) existed %v err %v", got.ID, got.RequestSHA256, existed, err)
	}
	if count(t, db, "tasks", "") != 1 || count(t, db, "audit_log", "") != audits {
		t.Error("a repeated submit wrote something")
	}

	// The key is per caller; and tasks without a key never collide.
	other := newTask("T-3")
	other.Caller, other.IdempotencyKey = "gemini", "k1"
	mustCreate(t, db, other)
	mustCreate(t, db, newTask("T-4"))
	mustCreate(t, db, newTask("T-5"))

	// Concurrent repeats: exactly one creates, the rest get it back.
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range 8 {
		wg.Go(func() {
			task := newTask(seqID("C", i))
			task.IdempotencyKey = "race"
			got, existed, err := db.CreateTask(ctx, task)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !existed {
				created++
			} else if got.IdempotencyKey != "race" {
				t.Errorf("returned %+v", got)
			}
		})
	}
	wg.Wait()
	if created != 1 {
		t.Errorf("%d concurrent submits with one key created tasks, want 1", created)
	}
}

func TestTransitionCommitsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	mustCreate(t, db, newTask("T-1"))
	at := t0.Add(time.Second)

	verdicts := []model.Verdict{
		{Gate: model.GateMissionLease, Passed: true},
		{Gate: model.GateACPDenial, Passed: true},
		{Gate: model.GateAuthority, Passed: true, Detail: map[string]string{"assurance": "guarded", "code": "x"}},
		{Gate: model.GateGuardedClaude, Passed: true},
	}
	got, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateSubmitted,
		To: model.StateAuthorized, Trigger: model.TriggerAuthorize, Actor: "relay", Verdicts: verdicts, At: at})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != model.StateAuthorized || !got.UpdatedAt.Equal(at) || !got.CreatedAt.Equal(t0) {
		t.Errorf("task = %+v", got)
	}
	if _, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateAuthorized,
		To: model.StateWorking, Trigger: model.TriggerStart, At: at}); err != nil {
		t.Fatal(err)
	}
	result := &model.TaskResult{Text: "hi", StopReason: "end_turn", SessionMode: "plan",
		ToolCalls: []model.ToolCall{{ID: "c1", Title: "read file", Kind: "read", Status: "failed"}}}
	done, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateWorking,
		To: model.StateCompleted, Trigger: model.TriggerComplete, Result: result, At: at})
	if err != nil {
		t.Fatal(err)
	}
	if done.Result != "hi" || done.StopReason != "end_turn" || done.SessionMode != "plan" ||
		!reflect.DeepEqual(done.ToolCalls, result.ToolCalls) {
		t.Errorf("result not stored: %+v", done)
	}
	if reread, _ := db.GetTask(ctx, "T-1"); !reflect.DeepEqual(reread, done) {
		t.Errorf("GetTask = %+v, Transition returned %+v", reread, done)
	}

	events, err := db.TaskEvents(ctx, "T-1")
	if err != nil {
		t.Fatal(err)
	}
	var path []model.State
	for _, e := range events {
		path = append(path, e.To)
	}
	if want := []model.State{model.StateAuthorized, model.StateWorking, model.StateCompleted}; !slices.Equal(path, want) {
		t.Errorf("events lead to %v, want %v", path, want)
	}
	if events[0].Actor != "relay" || events[0].Trigger != model.TriggerAuthorize || !events[0].At.Equal(at) {
		t.Errorf("event 0 = %+v", events[0])
	}
	vs, err := db.TaskVerdicts(ctx, "T-1")
	if err != nil || len(vs) != 4 {
		t.Fatalf("TaskVerdicts = %v, %v", vs, err)
	}
	if vs[2].Gate != model.GateAuthority || vs[2].Detail["assurance"] != "guarded" || !vs[2].At.Equal(at) {
		t.Errorf("verdict 2 = %+v", vs[2])
	}
	// 1 submitted + 4 verdicts + 3 transitions.
	if n := count(t, db, "audit_log", ""); n != 8 {
		t.Errorf("audit rows = %d, want 8", n)
	}
	if n := count(t, db, "audit_log", "kind = 'gate.verdict' AND json_extract(data, '$.assurance') = 'guarded'"+
		" AND json_extract(data, '$.\"detail.code\"') = 'x' AND json_extract(data, '$.passed') = 'true'"); n != 1 {
		t.Errorf("gate.verdict audit row with detail keys: %d", n)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

func TestTransitionStaleAndMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	mustCreate(t, db, newTask("T-1"))
	before := count(t, db, "audit_log", "")

	_, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateWorking,
		To: model.StateCompleted, Trigger: model.TriggerComplete,
		Verdicts: []model.Verdict{{Gate: model.GateAuthority}}, Result: &model.TaskResult{Text: "no"}})
	wantCode(t, err, model.CodeStaleState)
	if !errors.Is(err, model.ErrStaleState) {
		t.Errorf("stale error does not wrap ErrStaleState: %v", err)
	}
	_, err = db.Transition(ctx, model.Transition{TaskID: "nope", From: model.StateSubmitted,
		To: model.StateAuthorized, Trigger: model.TriggerAuthorize})
	wantCode(t, err, model.CodeNotFound)

	task, _ := db.GetTask(ctx, "T-1")
	if task.State != model.StateSubmitted || task.Result != "" {
		t.Errorf("a refused transition changed the task: %+v", task)
	}
	if count(t, db, "task_events", "") != 0 || count(t, db, "task_verdicts", "") != 0 ||
		count(t, db, "audit_log", "") != before {
		t.Error("a refused transition wrote rows")
	}

	for name, tr := range map[string]model.Transition{
		"no id":       {From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize},
		"bad to":      {TaskID: "T-1", From: model.StateSubmitted, To: "paused", Trigger: model.TriggerAuthorize},
		"no trigger":  {TaskID: "T-1", From: model.StateSubmitted, To: model.StateAuthorized},
		"from a dead": {TaskID: "T-1", From: model.StateCompleted, To: model.StateWorking, Trigger: model.TriggerStart},
	} {
		_, err := db.Transition(ctx, tr)
		if code := model.ErrorCode(err); code != model.CodeInvalidArgs && code != model.CodeInvalidTransition {
			t.Errorf("%s: code %q (%v)", name, code, err)
		}
	}
}

// TestTerminalTransitionLeavesItsNotice: a transition to a terminal state
// with a NoticeID stores the relay's message to the submitter (and its
// audit row) in the same transaction, stamped with the transition's time; a
// refused transition or a non-terminal one stores none.
func TestTerminalTransitionLeavesItsNotice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	task := newTask("T-1")
	task.ContextID = "C-1"
	mustCreate(t, db, task)
	at := t0.Add(time.Minute)

	// Not terminal: no notice even with an id.
	if _, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateSubmitted, To: model.StateAuthorized,
		Trigger: model.TriggerAuthorize, At: at, NoticeID: "MSG-early"}); err != nil {
		t.Fatal(err)
	}
	// Refused (stale): nothing.
	_, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateWorking, To: model.StateCompleted,
		Trigger: model.TriggerComplete, At: at, NoticeID: "MSG-stale"})
	wantCode(t, err, model.CodeStaleState)
	if n := count(t, db, "messages", ""); n != 0 {
		t.Fatalf("%d messages after a non-terminal and a refused transition", n)
	}

	if _, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateAuthorized, To: model.StateFailed,
		Trigger: model.TriggerFail, Code: model.CodeAgentCrashed, Message: "exit 2", At: at, NoticeID: "MSG-end"}); err != nil {
		t.Fatal(err)
	}
	m, err := db.GetMessage(ctx, "MSG-end")
	if err != nil {
		t.Fatal(err)
	}
	want := "task T-1 failed (agent_crashed)\nthe relay's message, quoted:\n> exit 2"
	if m.From != model.RelayAgent || m.To != "codex" || m.Body != want || m.ContextID != "C-1" ||
		m.State != model.MessageStored || !m.CreatedAt.Equal(at) {
		t.Errorf("notice = %+v, want from relay to codex %q at %v", m, want, at)
	}
	// T-1 is not a relay-made id, so the body reads back as no notice.
	if m.Notice != nil {
		t.Errorf("notice fields %+v read from a task id the relay never makes", m.Notice)
	}
	if n := count(t, db, "audit_log", "kind = 'message.stored' AND message_id = 'MSG-end' AND actor = 'relay'"); n != 1 {
		t.Errorf("notice audited %d times", n)
	}
	verifyOK(t, db, count(t, db, "audit_log", ""))
}

// TestConcurrentTransitionsOneWins fires the same compare-and-set from many
// goroutines: exactly one commits, every other gets stale_state, and the
// losers leave no event, verdict or audit row.
func TestConcurrentTransitionsOneWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	const tasks, racers = 20, 8
	for i := range tasks {
		mustCreate(t, db, newTask(seqID("T", i)))
	}
	for i := range tasks {
		id := seqID("T", i)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		start := make(chan struct{})
		for r := range racers {
			wg.Go(func() {
				<-start
				// Half race to authorize, half to cancel: still one winner.
				to, trig := model.StateAuthorized, model.TriggerAuthorize
				if r%2 == 1 {
					to, trig = model.StateCanceled, model.TriggerCancel
				}
				_, errs[r] = db.Transition(ctx, model.Transition{TaskID: id, From: model.StateSubmitted,
					To: to, Trigger: trig, Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Passed: true}}})
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case model.ErrorCode(err) != model.CodeStaleState || !errors.Is(err, model.ErrStaleState):
				t.Errorf("%s: loser got %v, want stale_state", id, err)
			}
		}
		if wins != 1 {
			t.Errorf("%s: %d transitions won, want exactly 1", id, wins)
		}
		if n := count(t, db, "task_events", "task_id = ?", id); n != 1 {
			t.Errorf("%s: %d events, want 1", id, n)
		}
		if n := count(t, db, "task_verdicts", "task_id = ?", id); n != 1 {
			t.Errorf("%s: %d verdicts, want 1", id, n)
		}
		if n := count(t, db, "audit_log", "task_id = ? AND kind = 'task.transition'", id); n != 1 {
			t.Errorf("%s: %d transition audit rows, want 1", id, n)
		}
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

func TestTaskEventsOfUnknownTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	mustCreate(t, db, newTask("T-1"))
	if evs, err := db.TaskEvents(ctx, "T-1"); err != nil || evs == nil || len(evs) != 0 {
		t.Errorf("TaskEvents of a fresh task = %#v, %v", evs, err)
	}
	if vs, err := db.TaskVerdicts(ctx, "T-1"); err != nil || len(vs) != 0 {
		t.Errorf("TaskVerdicts of a fresh task = %#v, %v", vs, err)
	}
	_, err := db.TaskEvents(ctx, "nope")
	wantCode(t, err, model.CodeNotFound)
	_, err = db.TaskVerdicts(ctx, "nope")
	wantCode(t, err, model.CodeNotFound)
	_, err = db.GetTask(ctx, "nope")
	wantCode(t, err, model.CodeNotFound)
}

func TestListTasksFiltersAndCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	// 120 tasks: callers alternate codex/gemini, targets claude/opencode
	// every third; every fifth is rejected.
	for i := range 120 {
		task := newTask(seqID("T", i))
		if i%2 == 1 {
			task.Caller = "gemini"
		}
		if i%3 == 0 {
			task.Target = "opencode"
		}
		mustCreate(t, db, task)
		if i%5 == 0 {
			if _, err := db.Transition(ctx, model.Transition{TaskID: task.ID, From: model.StateSubmitted,
				To: model.StateRejected, Trigger: model.TriggerReject, Code: model.CodeMissingLeaseID}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Default page: 50 newest, newest first.
	page, err := db.ListTasks(ctx, model.TaskFilter{})
	if err != nil || len(page) != model.DefaultPageSize || page[0].ID != "T-0119" || page[49].ID != "T-0070" {
		t.Fatalf("first page = %v, %v", taskIDs(page), err)
	}
	// Walk every page with the cursor: all 120, no repeats, in order.
	var all []string
	before := ""
	for {
		page, err := db.ListTasks(ctx, model.TaskFilter{Limit: 7, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, taskIDs(page)...)
		before = page[len(page)-1].ID
	}
	if len(all) != 120 || all[0] != "T-0119" || all[119] != "T-0000" ||
		!slices.IsSortedFunc(all, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Errorf("walk = %d ids, %v…", len(all), all[:3])
	}

	check := func(name string, f model.TaskFilter, want func(i int) bool) {
		t.Helper()
		f.Limit = model.MaxPageSize
		got, err := db.ListTasks(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var exp []string
		for i := 119; i >= 0; i-- {
			if want(i) {
				exp = append(exp, seqID("T", i))
			}
		}
		if !slices.Equal(taskIDs(got), exp) {
			t.Errorf("%s: got %d tasks, want %d", name, len(got), len(exp))
		}
	}
	check("state", model.TaskFilter{State: model.StateRejected}, func(i int) bool { return i%5 == 0 })
	check("agent", model.TaskFilter{Agent: "opencode"}, func(i int) bool { return i%3 == 0 })
	check("caller", model.TaskFilter{Caller: "gemini"}, func(i int) bool { return i%2 == 1 })
	check("target", model.TaskFilter{Target: "claude"}, func(i int) bool { return i%3 != 0 })
	check("visible", model.TaskFilter{Visible: "gemini"}, func(i int) bool { return i%2 == 1 })
	check("visible+state", model.TaskFilter{Visible: "codex", State: model.StateRejected},
		func(i int) bool { return i%2 == 0 && i%5 == 0 })
	check("nobody", model.TaskFilter{Visible: "cursor"}, func(int) bool { return false })
	check("before", model.TaskFilter{Before: "T-0003"}, func(i int) bool { return i < 3 })

	if got, _ := db.ListTasks(ctx, model.TaskFilter{Limit: 5000}); len(got) != 120 {
		t.Errorf("limit above the cap: %d", len(got))
	}
	_, err = db.ListTasks(ctx, model.TaskFilter{Before: "nope"})
	wantCode(t, err, model.CodeNotFound)
	_, err = db.ListTasks(ctx, model.TaskFilter{State: "paused"})
	wantCode(t, err, model.CodeInvalidArgs)
}

func TestListTasksLimitIsCapped(t *testing.T) {
	t.Parallel()
	if pageSize(0) != model.DefaultPageSize || pageSize(-3) != model.DefaultPageSize || pageSize(1001) != model.MaxPageSize || pageSize(7) != 7 {
		t.Error("pageSize")
	}
}

func TestRecordDenial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	mustCreate(t, db, newTask("T-1"))

	// Not working yet: refused, nothing written.
	err := db.RecordDenial(ctx, "T-1", map[string]string{"tool_call_title": "rm -rf"})
	wantCode(t, err, model.CodeStaleState)
	wantCode(t, db.RecordDenial(ctx, "nope", nil), model.CodeNotFound)
	if count(t, db, "audit_log", "kind = 'permission.denied'") != 0 {
		t.Error("a refused denial was audited")
	}

	for _, tr := range []model.Transition{
		{TaskID: "T-1", From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize},
		{TaskID: "T-1", From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart},
	} {
		if _, err := db.Transition(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := db.RecordDenial(ctx, "T-1", map[string]string{"tool_call_title": "write", "tool_call_kind": "edit"}); err != nil {
			t.Fatal(err)
		}
	}
	task, _ := db.GetTask(ctx, "T-1")
	if task.DeniedPermissions != 3 {
		t.Errorf("denied_permissions = %d, want 3", task.DeniedPermissions)
	}
	if n := count(t, db, "audit_log", "kind = 'permission.denied' AND task_id = 'T-1'"+
		" AND json_extract(data, '$.tool_call_kind') = 'edit' AND json_extract(data, '$.target') = 'claude'"); n != 3 {
		t.Errorf("permission.denied rows = %d, want 3", n)
	}
}

// An agent that asks for permissions in a loop is denied and counted every
// time, but audited one by one only MaxDenialRows times: the log cannot
// grow as fast as an agent can ask.
func TestRecordDenialRowsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Synchronous: SyncNormal})
	mustCreate(t, db, newTask("T-1"))
	for _, tr := range []model.Transition{
		{TaskID: "T-1", From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize},
		{TaskID: "T-1", From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart},
	} {
		if _, err := db.Transition(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	const asked = 3 * MaxDenialRows
	for range asked {
		if err := db.RecordDenial(ctx, "T-1", map[string]string{"tool_call_kind": "edit"}); err != nil {
			t.Fatal(err)
		}
	}
	if task, _ := db.GetTask(ctx, "T-1"); task.DeniedPermissions != asked {
		t.Errorf("denied_permissions = %d, want %d", task.DeniedPermissions, asked)
	}
	if n := count(t, db, "audit_log", "kind = 'permission.denied'"); n != MaxDenialRows {
		t.Errorf("permission.denied rows = %d, want %d", n, MaxDenialRows)
	}
	if n := count(t, db, "audit_log", "kind = 'permission.denied' AND json_extract(data, '$.later_denials') <> ''"); n != 1 {
		t.Errorf("rows saying later denials are only counted = %d, want 1", n)
	}
}
