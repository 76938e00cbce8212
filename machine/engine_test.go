package machine_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

// A task created directly in the store, without evaluation.
func rawTask(t *testing.T, r *rig, id string) model.Task {
	t.Helper()
	task, _, err := r.db.CreateTask(context.Background(), model.Task{
		ID: id, State: model.StateSubmitted, Caller: "codex", Target: "claude",
		Mode: model.ModeReadOnly, MissionID: "M-1", LeaseID: "S-1", Prompt: "p", Cwd: r.cwd,
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestConcurrentCancelAndAuthorizeOneWins(t *testing.T) {
	t.Parallel()
	auth := &allowAuthority{}
	r := newRig(t, machine.Options{Authority: auth})
	ctx := context.Background()
	task := rawTask(t, r, "T-race")

	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				_, errs[i] = r.eng.Fire(ctx, task.ID, model.StateSubmitted, model.TriggerAuthorize, machine.FireOptions{})
			} else {
				_, errs[i] = r.eng.Fire(ctx, task.ID, model.StateSubmitted, model.TriggerCancel,
					machine.FireOptions{Code: model.CodeCanceledByOperator, Actor: "operator"})
			}
		}(i)
	}
	close(start)
	wg.Wait()

	wins := 0
	for i, err := range errs {
		switch model.ErrorCode(err) {
		case "":
			wins++
		case model.CodeStaleState:
			if !errors.Is(err, model.ErrStaleState) {
				t.Errorf("goroutine %d: stale error does not wrap ErrStaleState: %v", i, err)
			}
		default:
			t.Errorf("goroutine %d: unexpected error %v", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d transitions won, want exactly 1", wins)
	}
	final, _ := r.eng.Get(ctx, task.ID)
	evs, err := r.db.TaskEvents(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].From != model.StateSubmitted || evs[0].To != final.State {
		t.Fatalf("events %+v inconsistent with final state %s", evs, final.State)
	}
	switch final.State {
	case model.StateAuthorized:
		if r.disp.count(task.ID) != 1 || auth.n != 1 {
			t.Fatalf("authorized: dispatches=%d authority runs=%d, want 1 and 1", r.disp.count(task.ID), auth.n)
		}
	case model.StateCanceled:
		if r.disp.count(task.ID) != 0 || auth.n != 0 {
			t.Fatalf("canceled: dispatches=%d authority runs=%d, want 0 and 0", r.disp.count(task.ID), auth.n)
		}
	default:
		t.Fatalf("final state %s", final.State)
	}
}

// terminalTask drives a fresh task into the given terminal state.
func terminalTask(t *testing.T, r *rig, s model.State) model.Task {
	t.Helper()
	ctx := context.Background()
	task := rawTask(t, r, "T-"+string(s))
	fire := func(from model.State, tr model.Trigger, code model.Code) {
		t.Helper()
		var err error
		task, err = r.eng.Fire(ctx, task.ID, from, tr, machine.FireOptions{Code: code})
		if err != nil {
			t.Fatalf("%s from %s: %v", tr, from, err)
		}
	}
	switch s {
	case model.StateRejected:
		fire(model.StateSubmitted, model.TriggerReject, model.CodeMissingMissionID)
	case model.StateBlocked:
		fire(model.StateSubmitted, model.TriggerBlock, model.CodeAgentDisabled)
	case model.StateCanceled:
		fire(model.StateSubmitted, model.TriggerCancel, model.CodeCanceledBySubmitter)
	case model.StateFailed, model.StateCompleted:
		fire(model.StateSubmitted, model.TriggerAuthorize, "")
		fire(model.StateAuthorized, model.TriggerStart, "")
		if s == model.StateFailed {
			fire(model.StateWorking, model.TriggerFail, model.CodeAgentCrashed)
		} else {
			fire(model.StateWorking, model.TriggerComplete, "")
		}
	}
	if task.State != s {
		t.Fatalf("task is %s, want %s", task.State, s)
	}
	return task
}

func TestTerminalStatesRefuseEveryTrigger(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()
	for _, s := range model.AllStates() {
		if !s.Terminal() {
			continue
		}
		task := terminalTask(t, r, s)
		before, _ := r.db.TaskEvents(ctx, task.ID)
		for _, tr := range model.AllTriggers() {
			_, err := r.eng.Fire(ctx, task.ID, s, tr, machine.FireOptions{})
			wantCode(t, err, model.CodeInvalidTransition)
			var me *model.Error
			if !errors.As(err, &me) || me.Hint == "" {
				t.Errorf("%s/%s: want a typed error with a hint, got %#v", s, tr, err)
			}
		}
		_, err := r.eng.Cancel(ctx, task.ID, model.CodeCanceledByOperator, "operator")
		wantCode(t, err, model.CodeTaskNotCancelable)
		after, _ := r.db.TaskEvents(ctx, task.ID)
		got, _ := r.eng.Get(ctx, task.ID)
		if len(after) != len(before) || got.State != s {
			t.Errorf("%s changed: %d→%d events, state %s", s, len(before), len(after), got.State)
		}
	}
}

func TestNonTerminalStatesRefuseUnlistedTriggers(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()
	task := rawTask(t, r, "T-x")
	for _, tr := range []model.Trigger{model.TriggerStart, model.TriggerComplete, model.TriggerFail} {
		_, err := r.eng.Fire(ctx, task.ID, model.StateSubmitted, tr, machine.FireOptions{})
		wantCode(t, err, model.CodeInvalidTransition)
	}
}

func TestRunToCompletionKeepsResultAndDenials(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var notified []model.Task
	end := make(chan struct{}, 1)
	disp := &fakeDispatcher{policy: denyAll, run: func(task model.Task, rep model.RunReporter) {
		ctx := context.Background()
		if err := rep.Started(ctx, task.ID, ""); err != nil {
			t.Errorf("started: %v", err)
			return
		}
		for i := 0; i < 2; i++ {
			if err := rep.Denied(ctx, task.ID, model.Denial{ToolCallTitle: "rm -rf /", ToolCallKind: "execute", Outcome: "selected", OptionID: "reject"}); err != nil {
				t.Errorf("denied: %v", err)
			}
		}
		if err := rep.Finished(ctx, task.ID, model.Outcome{State: model.StateCompleted,
			Result: model.TaskResult{Text: "README says hi", StopReason: "end_turn"}}); err != nil {
			t.Errorf("finished: %v", err)
		}
	}}
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, Dispatcher: disp,
		OnTerminal: func(_ context.Context, task model.Task) {
			mu.Lock()
			notified = append(notified, task)
			mu.Unlock()
			end <- struct{}{}
		}})
	task := r.submit(t, model.SubmitRequest{})
	<-end // the gates and the run happen after Submit answered
	disp.wg.Wait()
	got, _ := r.eng.Get(context.Background(), task.ID)
	if got.State != model.StateCompleted || got.Result != "README says hi" || got.StopReason != "end_turn" || got.DeniedPermissions != 2 {
		t.Fatalf("task = %+v", got)
	}
	evs, _ := r.db.TaskEvents(context.Background(), task.ID)
	var path []string
	for _, ev := range evs {
		path = append(path, string(ev.To))
	}
	if strings.Join(path, ",") != "authorized,working,completed" {
		t.Fatalf("path %v", path)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notified) != 1 || notified[0].State != model.StateCompleted {
		t.Fatalf("OnTerminal calls: %+v", notified)
	}
}

func TestDispatchErrorFailsTask(t *testing.T) {
	t.Parallel()
	disp := &fakeDispatcher{policy: denyAll, fail: errors.New("exec: claude-agent-acp: not found")}
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, Dispatcher: disp})
	task := ended(t, r.eng, r.submit(t, model.SubmitRequest{}).ID)
	if task.State != model.StateFailed || task.Code != model.CodeDispatchFailed {
		t.Fatalf("task %s/%s, want failed/dispatch_failed", task.State, task.Code)
	}
	// The slot is released right after the failure is stored.
	eventually(t, "the slot released", func() bool { held, _ := r.eng.Slots(); return held == 0 })
}

func TestCancelWorkingStopsTheRun(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	disp := &fakeDispatcher{policy: denyAll, run: func(task model.Task, rep model.RunReporter) {
		_ = rep.Started(context.Background(), task.ID, "")
		close(started)
	}}
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, Dispatcher: disp})
	ctx := context.Background()
	task := r.submit(t, model.SubmitRequest{})
	<-started
	disp.wg.Wait()
	got, err := r.eng.Cancel(ctx, task.ID, model.CodeCanceledBySubmitter, "codex")
	if err != nil || got.State != model.StateCanceled || got.Code != model.CodeCanceledBySubmitter {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	disp.mu.Lock()
	canceled := fmt.Sprint(disp.canceled)
	disp.mu.Unlock()
	if canceled != "["+task.ID+"]" {
		t.Fatalf("dispatcher cancels %s", canceled)
	}
	// The run's late report cannot change a terminal task.
	err = r.eng.Finished(ctx, task.ID, model.Outcome{State: model.StateCompleted})
	wantCode(t, err, model.CodeStaleState)
	if held, _ := r.eng.Slots(); held != 0 {
		t.Fatalf("%d slots still held", held)
	}
}

// Started relies on the transition's compare-and-set alone: a run that
// reports after its task moved on changes nothing.
func TestStartedOnlyFromAuthorized(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()

	task := r.submitSettled(t, model.SubmitRequest{})
	if err := r.eng.Started(ctx, task.ID, ""); err != nil {
		t.Fatalf("started: %v", err)
	}
	wantCode(t, r.eng.Started(ctx, task.ID, ""), model.CodeStaleState) // working already

	task = r.submitSettled(t, model.SubmitRequest{})
	if _, err := r.eng.Cancel(ctx, task.ID, model.CodeCanceledBySubmitter, "codex"); err != nil {
		t.Fatal(err)
	}
	before, _ := r.db.TaskEvents(ctx, task.ID)
	wantCode(t, r.eng.Started(ctx, task.ID, ""), model.CodeStaleState)
	after, _ := r.db.TaskEvents(ctx, task.ID)
	got, _ := r.eng.Get(ctx, task.ID)
	if got.State != model.StateCanceled || len(after) != len(before) {
		t.Fatalf("late start changed the task: %s, %d→%d events", got.State, len(before), len(after))
	}
	wantCode(t, r.eng.Started(ctx, "T-missing", ""), model.CodeNotFound)
}

func TestDispatchLimitHoldsTasksInSubmitted(t *testing.T) {
	t.Parallel()
	// One caller's tasks, allowed every slot: the global limit alone.
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, MaxDispatch: 2, MaxDispatchPerCaller: 2})
	ctx := context.Background()
	var tasks []model.Task
	for i := 0; i < 5; i++ {
		tasks = append(tasks, r.submit(t, model.SubmitRequest{}))
	}
	states := func() string {
		var s []string
		for _, task := range tasks {
			got, _ := r.eng.Get(ctx, task.ID)
			s = append(s, string(got.State))
		}
		return strings.Join(s, ",")
	}
	// The first two took the two slots, in submission order; the others
	// wait for one.
	settle(t, r.eng, tasks[0].ID)
	settle(t, r.eng, tasks[1].ID)
	if got := states(); got != "authorized,authorized,submitted,submitted,submitted" {
		t.Fatalf("states %s", got)
	}
	eventually(t, "two dispatches", func() bool { return r.disp.total() == 2 })
	if held, waiting := r.eng.Slots(); held != 2 || waiting != 3 {
		t.Fatalf("slots held=%d waiting=%d, want 2 and 3", held, waiting)
	}
	// A slot frees when a task leaves authorized: the oldest waiting task
	// is evaluated next.
	if _, err := r.eng.Cancel(ctx, tasks[0].ID, model.CodeCanceledByOperator, "operator"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "third task authorized", func() bool {
		got, _ := r.eng.Get(ctx, tasks[2].ID)
		return got.State == model.StateAuthorized
	})
	if got := states(); got != "canceled,authorized,authorized,submitted,submitted" {
		t.Fatalf("states %s", got)
	}
	// Canceling a waiting task needs no slot.
	if _, err := r.eng.Cancel(ctx, tasks[4].ID, model.CodeCanceledBySubmitter, "codex"); err != nil {
		t.Fatal(err)
	}
	if held, waiting := r.eng.Slots(); held != 2 || waiting > 2 {
		t.Fatalf("slots held=%d waiting=%d", held, waiting)
	}
}

func TestRecoveryFailsInterruptedAndResumesSubmitted(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()
	sub := rawTask(t, r, "T-sub")
	auth := rawTask(t, r, "T-auth")
	work := rawTask(t, r, "T-work")
	tr := func(id string, from, to model.State, trig model.Trigger) {
		if _, err := r.db.Transition(ctx, model.Transition{TaskID: id, From: from, To: to, Trigger: trig}); err != nil {
			t.Fatal(err)
		}
	}
	tr(auth.ID, model.StateSubmitted, model.StateAuthorized, model.TriggerAuthorize)
	tr(work.ID, model.StateSubmitted, model.StateAuthorized, model.TriggerAuthorize)
	tr(work.ID, model.StateAuthorized, model.StateWorking, model.TriggerStart)

	// A new engine on the same store, as after a daemon crash.
	disp := &fakeDispatcher{policy: denyAll}
	eng := machine.New(machine.Options{Store: r.db, Dispatcher: disp, Registry: healthyRegistry(), Authority: &allowAuthority{}})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	for _, id := range []string{auth.ID, work.ID} {
		got, _ := eng.Get(ctx, id)
		if got.State != model.StateFailed || got.Code != model.CodeDispatchInterrupted {
			t.Errorf("%s: %s/%s, want failed/dispatch_interrupted", id, got.State, got.Code)
		}
		if disp.count(id) != 0 {
			t.Errorf("%s dispatched again after a crash", id)
		}
	}
	eventually(t, "submitted task evaluated", func() bool {
		got, _ := eng.Get(ctx, sub.ID)
		return got.State == model.StateAuthorized
	})
	// Dispatch runs on entry to authorized, once that state is committed:
	// a reader may see the state a moment before the dispatch call.
	eventually(t, "resumed task dispatched", func() bool { return disp.count(sub.ID) >= 1 })
	if disp.count(sub.ID) != 1 {
		t.Fatalf("resumed task dispatched %d times", disp.count(sub.ID))
	}
	// A second recovery changes nothing and dispatches nothing.
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if disp.total() != 1 {
		t.Fatalf("%d dispatches after a second recovery", disp.total())
	}
}

func TestSubmitRefusesBadRequestsAndWritesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, MaxPromptBytes: 1024})
	ctx := context.Background()
	cases := []struct {
		name string
		req  model.SubmitRequest
		code model.Code
	}{
		{"unknown target", model.SubmitRequest{Target: "clippy"}, model.CodeUnknownAgent},
		{"unknown mode", model.SubmitRequest{Mode: "yolo"}, model.CodeInvalidArgs},
		{"oversized prompt", model.SubmitRequest{Prompt: strings.Repeat("x", 1025)}, model.CodePayloadTooLarge},
		{"relative cwd", model.SubmitRequest{Cwd: "src"}, model.CodeInvalidCwd},
		{"dotdot cwd", model.SubmitRequest{Cwd: r.cwd + "/../" + "x"}, model.CodeInvalidCwd},
		{"missing cwd dir", model.SubmitRequest{Cwd: r.cwd + "/nope"}, model.CodeInvalidCwd},
		{"bad artifact", model.SubmitRequest{Artifacts: []model.Artifact{{URI: "no-scheme"}}}, model.CodeInvalidArgs},
	}
	for _, c := range cases {
		req := c.req
		if req.Target == "" {
			req.Target = "claude"
		}
		if req.Prompt == "" {
			req.Prompt = "p"
		}
		if req.Cwd == "" {
			req.Cwd = r.cwd
		}
		_, _, err := r.eng.Submit(ctx, "codex", req)
		if model.ErrorCode(err) != c.code {
			t.Errorf("%s: code %q (%v), want %q", c.name, model.ErrorCode(err), err, c.code)
		}
		if pe := model.Public(err); pe.Hint == "" {
			t.Errorf("%s: no hint", c.name)
		}
	}
	ts, _ := r.eng.List(ctx, model.TaskFilter{})
	if len(ts) != 0 {
		t.Fatalf("%d tasks persisted by refused requests", len(ts))
	}
}

func TestMissingIDsArePersistedThenRejected(t *testing.T) {
	t.Parallel()
	auth := &allowAuthority{}
	r := newRig(t, machine.Options{Authority: auth})
	task := r.submitSettled(t, model.SubmitRequest{MissionID: "", LeaseID: "S-1"})
	if task.State != model.StateRejected || task.Code != model.CodeMissingMissionID {
		t.Fatalf("task %s/%s", task.State, task.Code)
	}
	vs, _ := r.db.TaskVerdicts(context.Background(), task.ID)
	if len(vs) != 1 || vs[0].Gate != model.GateMissionLease || vs[0].Passed {
		t.Fatalf("verdicts %+v: want one failing missionLease verdict and no later gate", vs)
	}
	if auth.runs() != 0 || r.disp.total() != 0 {
		t.Fatalf("authority ran %d times, %d dispatches", auth.runs(), r.disp.total())
	}
}

func TestIdempotentSubmitReturnsFirstTask(t *testing.T) {
	t.Parallel()
	auth := &allowAuthority{}
	r := newRig(t, machine.Options{Authority: auth})
	ctx := context.Background()
	req := model.SubmitRequest{Target: "claude", Prompt: "p", Cwd: r.cwd, MissionID: "M-1", LeaseID: "S-1",
		IdempotencyKey: "k1", ReferenceTaskIDs: []string{}, Artifacts: []model.Artifact{{URI: "file:///a", Name: "a"}}}
	a := r.submitSettled(t, req)
	// A retry: the same request (the default mode spelled out, an empty
	// list given as none) is the first task, whatever state it is in now.
	retry := req
	retry.Mode, retry.ReferenceTaskIDs = model.ModeReadOnly, nil
	b, existed, err := r.eng.Submit(ctx, "codex", retry)
	if err != nil || !existed || b.ID != a.ID || b.State != model.StateAuthorized {
		t.Fatalf("retry: %v existed=%v %s/%s, want %s/authorized", err, existed, b.ID, b.State, a.ID)
	}
	c := r.submitAs(t, "gemini", model.SubmitRequest{IdempotencyKey: "k1"})
	if c.ID == a.ID {
		t.Fatal("the key is per caller, another caller got the first task")
	}
	settle(t, r.eng, c.ID)
	eventually(t, "two dispatches", func() bool { return r.disp.total() == 2 })
	if auth.runs() != 2 {
		t.Fatalf("authority ran %d times; want 2", auth.runs())
	}
}

// The same idempotency_key with any field of the request changed is
// refused (idempotency_conflict, naming the field), and nothing is
// stored; a context_id named in one request and left to the relay in the
// other is a change too.
func TestIdempotencyKeyReusedForAnotherRequestConflicts(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()
	other := t.TempDir()
	base := model.SubmitRequest{Target: "claude", Prompt: "p", Cwd: r.cwd, MissionID: "M-1", LeaseID: "S-1",
		IdempotencyKey: "k1", Artifacts: []model.Artifact{{URI: "file:///a"}}}
	first := r.submitSettled(t, base)
	for field, change := range map[string]func(*model.SubmitRequest){
		"target":             func(q *model.SubmitRequest) { q.Target = "codex" },
		"prompt":             func(q *model.SubmitRequest) { q.Prompt = "p2" },
		"mission_id":         func(q *model.SubmitRequest) { q.MissionID = "M-2" },
		"lease_id":           func(q *model.SubmitRequest) { q.LeaseID = "S-2" },
		"mode":               func(q *model.SubmitRequest) { q.Mode = model.ModeStateChanging },
		"context_id":         func(q *model.SubmitRequest) { q.ContextID = first.ContextID }, // the first named none
		"cwd":                func(q *model.SubmitRequest) { q.Cwd = other },
		"reference_task_ids": func(q *model.SubmitRequest) { q.ReferenceTaskIDs = []string{first.ID} },
		"artifacts":          func(q *model.SubmitRequest) { q.Artifacts = []model.Artifact{{URI: "file:///a", Name: "a"}} },
	} {
		q := base
		change(&q)
		got, existed, err := r.eng.Submit(ctx, "codex", q)
		wantCode(t, err, model.CodeIdempotencyConflict)
		pe := model.Public(err)
		if existed || got.ID != "" || !strings.Contains(pe.Message, first.ID) || !strings.Contains(pe.Message, field) || pe.Hint == "" {
			t.Errorf("%s changed: %+v existed=%v %q (hint %q); want the conflict naming %s and the field", field, got.ID, existed, pe.Message, pe.Hint, first.ID)
		}
	}
	if ts, _ := r.eng.List(ctx, model.TaskFilter{}); len(ts) != 1 {
		t.Fatalf("%d tasks stored, want the first only", len(ts))
	}
}

// TestNotifySubmitterAtEveryEnd: with NotifySubmitter, each way a task
// ends (rejected by a gate, blocked, canceled, completed) leaves its
// submitter exactly one message from the relay, stamped with the engine's
// clock; a task that has not ended has none.
func TestNotifySubmitterAtEveryEnd(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	clock := func() time.Time { return at }
	ctx := context.Background()
	notices := func(t *testing.T, r *rig, caller string) []model.Message {
		t.Helper()
		ms, err := r.db.ListMessages(ctx, model.MessageFilter{To: caller, From: model.RelayAgent})
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}

	r := newRig(t, machine.Options{Authority: &allowAuthority{}, NotifySubmitter: true, Clock: clock})
	rejected := r.submitSettled(t, model.SubmitRequest{MissionID: "M-1", LeaseID: "bad lease!"})
	if rejected.State != model.StateRejected {
		t.Fatalf("task = %+v", rejected)
	}
	running := settle(t, r.eng, r.submitAs(t, "gemini", model.SubmitRequest{}).ID)
	if got := notices(t, r, "gemini"); len(got) != 0 {
		t.Fatalf("notice before the end: %+v", got)
	}
	if _, err := r.eng.Cancel(ctx, running.ID, model.CodeCanceledBySubmitter, "gemini"); err != nil {
		t.Fatal(err)
	}
	for caller, task := range map[string]model.Task{"codex": rejected, "gemini": running} {
		got := notices(t, r, caller)
		if len(got) != 1 || !strings.HasPrefix(got[0].Body, "task "+task.ID+" ") || !got[0].CreatedAt.Equal(at) {
			t.Errorf("%s's notices = %+v", caller, got)
		}
	}

	blocked := newRig(t, machine.Options{NotifySubmitter: true, Clock: clock}) // no authority
	task := blocked.submitSettled(t, model.SubmitRequest{})
	got := notices(t, blocked, "codex")
	if task.State != model.StateBlocked || len(got) != 1 ||
		got[0].Body != "task "+task.ID+" blocked (authority_not_configured)\nthe relay's message, quoted:\n> "+task.Message ||
		got[0].Notice == nil || *got[0].Notice != (model.Notice{TaskID: task.ID, State: task.State, Code: task.Code, Message: task.Message, Result: task.Result}) {
		t.Errorf("blocked task %+v, notices %+v", task, got)
	}
}

// blockingAuthority allows every task, but only once release is closed;
// consulted is signalled at each call.
type blockingAuthority struct {
	consulted chan struct{}
	release   chan struct{}
}

func (a *blockingAuthority) Consult(ctx context.Context, _ model.AuthorityRequest) (model.AuthorityAnswer, error) {
	a.consulted <- struct{}{}
	<-a.release
	return model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceGuarded}, nil
}

// Once the engine quiesces (the daemon is stopping), a slot freed by a
// run that ends does not authorize the next queued task: it stays
// submitted, untouched, and the next engine on the store runs it.
func TestQuiesceKeepsQueuedTasksSubmitted(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}, MaxDispatch: 1})
	ctx := context.Background()
	first := r.submitSettled(t, model.SubmitRequest{})
	queued := r.submit(t, model.SubmitRequest{})
	if first.State != model.StateAuthorized || queued.State != model.StateSubmitted {
		t.Fatalf("before the stop: %s, %s", first.State, queued.State)
	}
	r.eng.Quiesce()
	// The running task ends (as a stopped run reports): its slot frees.
	if _, err := r.eng.Fire(ctx, first.ID, model.StateAuthorized, model.TriggerFail,
		machine.FireOptions{Code: model.CodeDispatchInterrupted, Actor: model.RelayAgent}); err != nil {
		t.Fatal(err)
	}
	// An operator's authorize is refused the same way: it stays submitted.
	if got, err := r.eng.Fire(ctx, queued.ID, model.StateSubmitted, model.TriggerAuthorize, machine.FireOptions{}); err != nil || got.State != model.StateSubmitted {
		t.Fatalf("authorize while quiesced: %s, %v", got.State, err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.eng.Stop(ctx2); err != nil {
		t.Fatal(err)
	}
	got, _ := r.eng.Get(ctx, queued.ID)
	evs, _ := r.db.TaskEvents(ctx, queued.ID)
	vs, _ := r.db.TaskVerdicts(ctx, queued.ID)
	if got.State != model.StateSubmitted || len(vs) != 0 || len(evs) > 1 || r.disp.total() != 1 {
		t.Fatalf("queued task after the stop: %s, %d events, %d verdicts; %d dispatches, want submitted, untouched, 1",
			got.State, len(evs), len(vs), r.disp.total())
	}

	// The next daemon's engine resumes it.
	next := machine.New(machine.Options{Store: r.db, Dispatcher: r.disp, Registry: healthyRegistry(), Authority: &allowAuthority{}, MaxDispatch: 1})
	t.Cleanup(func() { _ = next.Stop(context.Background()) })
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "queued task authorized by the next engine", func() bool {
		got, _ := next.Get(ctx, queued.ID)
		return got.State == model.StateAuthorized
	})
}

// An evaluation still in its gates when the engine quiesces is abandoned:
// Quiesce does not wait for the authority, nothing is authorized or
// dispatched, no verdict or event is stored with the task (the next
// evaluation stores its own), and one audit row records the abandoned
// evaluation; the chain verifies.
func TestQuiesceAbandonsAnEvaluationInItsGates(t *testing.T) {
	t.Parallel()
	auth := &blockingAuthority{consulted: make(chan struct{}, 1), release: make(chan struct{})}
	r := newRig(t, machine.Options{Authority: auth})
	ctx := context.Background()
	task := r.submit(t, model.SubmitRequest{})
	<-auth.consulted
	r.eng.Quiesce() // returns while the authority is still deciding
	close(auth.release)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.eng.Stop(stopCtx); err != nil { // waits for the evaluation
		t.Fatal(err)
	}
	if got, _ := r.eng.Get(ctx, task.ID); got.State != model.StateSubmitted {
		t.Fatalf("task evaluated during the stop: %s, want submitted", got.State)
	}
	evs, _ := r.db.TaskEvents(ctx, task.ID)
	vs, _ := r.db.TaskVerdicts(ctx, task.ID)
	if r.disp.total() != 0 || len(vs) != 0 || len(evs) > 1 {
		t.Fatalf("%d dispatches, %d verdicts, %d events; want none", r.disp.total(), len(vs), len(evs))
	}
	db, err := sql.Open("sqlite", "file:"+r.db.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var data string
	if err := db.QueryRow(`SELECT count(*), coalesce(max(data), '') FROM audit_log WHERE kind = 'task.evaluation_abandoned' AND task_id = ?`, task.ID).Scan(&n, &data); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !strings.Contains(data, "authority") {
		t.Fatalf("%d task.evaluation_abandoned rows (%s), want 1 naming the gates passed", n, data)
	}
	if rep, err := r.db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("audit verify: %+v %v", rep, err)
	}
}

// Submit answers once the task is durably submitted, before any gate runs:
// an authority that takes its time cannot hold the
// answer, so no client timeout can turn an accepted submit into an error.
// The gates run in the background; their outcome is recorded as before
// (verdicts, one authorized event, one dispatch).
func TestSubmitAnswersBeforeTheGates(t *testing.T) {
	t.Parallel()
	auth := &blockingAuthority{consulted: make(chan struct{}, 1), release: make(chan struct{})}
	r := newRig(t, machine.Options{Authority: auth})
	ctx := context.Background()
	type res struct {
		task model.Task
		err  error
	}
	done := make(chan res, 1)
	go func() {
		task, _, err := r.eng.Submit(ctx, "codex", model.SubmitRequest{Target: "claude", Prompt: "p",
			MissionID: "M-1", LeaseID: "S-1", Cwd: r.cwd})
		done <- res{task, err}
	}()
	var got res
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		close(auth.release)
		<-done
		t.Fatal("Submit waited for the authority's answer")
	}
	if got.err != nil || got.task.State != model.StateSubmitted || got.task.ID == "" {
		t.Fatalf("submit: %+v, %v; want the task, submitted", got.task, got.err)
	}
	stored, err := r.eng.Get(ctx, got.task.ID)
	if err != nil || stored.State != model.StateSubmitted {
		t.Fatalf("stored task %+v, %v; want it submitted while the authority decides", stored, err)
	}
	<-auth.consulted // the gates run after the answer
	close(auth.release)
	eventually(t, "the task authorized", func() bool {
		got, _ := r.eng.Get(ctx, got.task.ID)
		return got.State == model.StateAuthorized
	})
	eventually(t, "the task dispatched", func() bool { return r.disp.count(got.task.ID) == 1 })
	vs, _ := r.db.TaskVerdicts(ctx, got.task.ID)
	evs, _ := r.db.TaskEvents(ctx, got.task.ID)
	if len(vs) != len(model.AllGates()) || len(evs) != 1 || evs[0].To != model.StateAuthorized {
		t.Fatalf("%d verdicts and events %+v; want a verdict per gate and one authorized event", len(vs), evs)
	}
}

// A task stored before the relay kept request hashes (migrated from an
// older database) is compared field by field with what it stored: the
// same fields are a retry, a changed one a conflict.
func TestIdempotencyKeyOfATaskWithoutRequestHash(t *testing.T) {
	t.Parallel()
	r := newRig(t, machine.Options{Authority: &allowAuthority{}})
	ctx := context.Background()
	old, _, err := r.db.CreateTask(ctx, model.Task{ID: "T-01JZ0000000000000000000000", State: model.StateSubmitted,
		Caller: "codex", Target: "claude", Mode: model.ModeReadOnly, MissionID: "M-1", LeaseID: "S-1",
		ContextID: "C-old", Prompt: "p", Cwd: r.cwd, IdempotencyKey: "k-old"})
	if err != nil || old.RequestSHA256 != "" {
		t.Fatalf("an old task: %+v, %v", old, err)
	}
	req := model.SubmitRequest{Target: "claude", Prompt: "p", Cwd: r.cwd, MissionID: "M-1", LeaseID: "S-1", IdempotencyKey: "k-old"}
	got, existed, err := r.eng.Submit(ctx, "codex", req)
	if err != nil || !existed || got.ID != old.ID {
		t.Fatalf("retry of an old task: %s existed=%v %v", got.ID, existed, err)
	}
	req.ContextID = "C-old"
	if got, existed, err = r.eng.Submit(ctx, "codex", req); err != nil || !existed || got.ID != old.ID {
		t.Fatalf("retry naming its context_id: %s existed=%v %v", got.ID, existed, err)
	}
	req.Prompt = "p2"
	_, _, err = r.eng.Submit(ctx, "codex", req)
	wantCode(t, err, model.CodeIdempotencyConflict)
}
