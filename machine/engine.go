package machine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// Options wires an Engine to its ports.
type Options struct {
	Store      model.Store
	Dispatcher model.Dispatcher
	Registry   model.Registry
	// Authority is the authority adapter client; nil means none is
	// configured, and every task is blocked with authority_not_configured.
	Authority model.Authority
	// MaxDispatch is the global dispatch limit (default 4).
	MaxDispatch int
	// MaxDispatchPerCaller is how many of those slots the tasks of one
	// caller may hold at once (default DefaultMaxDispatchPerCaller: all
	// but one); a caller's further tasks wait in submitted, and others'
	// tasks are served meanwhile.
	MaxDispatchPerCaller int
	// MaxPromptBytes bounds a task's prompt (default model.DefaultMessageBytes).
	MaxPromptBytes int
	// MaxDelegationDepth bounds a task's delegation depth, checked by the
	// delegation gate (limits.max_delegation_depth; default
	// model.DefaultMaxDelegationDepth, at most model.MaxDelegationDepth).
	MaxDelegationDepth int
	// NotifySubmitter makes every transition to a terminal state leave the
	// task's submitter a passive message from the relay (model.EndNotice),
	// in the transition's own transaction, so a task never ends without it.
	NotifySubmitter bool
	// OnTerminal, if set, is called once after a task entered a terminal
	// state (its transaction committed).
	OnTerminal func(ctx context.Context, t model.Task)
	Clock      func() time.Time
	Logger     *slog.Logger
}

// Engine runs the task lifecycle.
type Engine struct {
	store      model.Store
	dispatcher model.Dispatcher
	registry   model.Registry
	authority  model.Authority
	maxPrompt  int
	maxDepth   int
	onTerminal func(context.Context, model.Task)
	notify     bool
	now        func() time.Time
	log        *slog.Logger

	slots *slots

	// changes wakes the followers of task events (Changed).
	changes changes

	mu    sync.Mutex
	locks map[string]*taskLock

	// admit guards authorizations against a stop: an authorize transition
	// holds it for reading from its compare-and-set write to the end of
	// its dispatch; Quiesce takes it for writing to set stopping, so once
	// Quiesce returns no task is being or will be authorized.
	admit    sync.RWMutex
	stopping bool

	// bg counts background evaluations; bgMu orders each bg.Add before
	// Stop's bg.Wait: once bgClosed is set, nothing new is started.
	bg       sync.WaitGroup
	bgMu     sync.Mutex
	bgClosed bool
}

// errStopping abandons an evaluation whose gates passed after Quiesce: the
// task is not authorized and stays submitted.
var errStopping = errors.New("the engine is stopping; the task stays submitted")

type taskLock struct {
	mu   sync.Mutex
	refs int
}

// New returns an Engine. Call Start to recover tasks a previous daemon left.
func New(o Options) *Engine {
	if o.MaxDispatch <= 0 {
		o.MaxDispatch = DefaultMaxDispatch
	}
	if o.MaxPromptBytes <= 0 {
		o.MaxPromptBytes = model.DefaultMessageBytes
	}
	if o.MaxDelegationDepth <= 0 {
		o.MaxDelegationDepth = model.DefaultMaxDelegationDepth
	}
	o.MaxDelegationDepth = min(o.MaxDelegationDepth, model.MaxDelegationDepth)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{
		store: o.Store, dispatcher: o.Dispatcher, registry: o.Registry,
		authority: o.Authority, maxPrompt: o.MaxPromptBytes, maxDepth: o.MaxDelegationDepth, onTerminal: o.OnTerminal, notify: o.NotifySubmitter,
		now: func() time.Time { return o.Clock().UTC() }, log: o.Logger,
		slots: newSlots(o.MaxDispatch, o.MaxDispatchPerCaller), locks: map[string]*taskLock{},
	}
	e.slots.freed = e.evaluateLater
	return e
}

// lock serializes every operation on one task.
func (e *Engine) lock(id string) func() {
	e.mu.Lock()
	l := e.locks[id]
	if l == nil {
		l = &taskLock{}
		e.locks[id] = l
	}
	l.refs++
	e.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		e.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(e.locks, id)
		}
		e.mu.Unlock()
	}
}

// Start recovers after a crash: authorized and working tasks (whose outcome
// is unknown) fail with dispatch_interrupted and are never dispatched again;
// submitted tasks resume gate evaluation, oldest first.
func (e *Engine) Start(ctx context.Context) error {
	for _, st := range []model.State{model.StateAuthorized, model.StateWorking} {
		ts, err := e.all(ctx, model.TaskFilter{State: st})
		if err != nil {
			return err
		}
		for _, t := range ts {
			_, err := e.Fire(ctx, t.ID, st, model.TriggerFail, FireOptions{
				Code: model.CodeDispatchInterrupted, Actor: model.RelayAgent,
				Message: "the daemon stopped while the task was " + string(st) + "; its outcome is unknown",
			})
			if err != nil && model.ErrorCode(err) != model.CodeStaleState {
				return fmt.Errorf("recover %s: %w", t.ID, err)
			}
		}
	}
	ts, err := e.all(ctx, model.TaskFilter{State: model.StateSubmitted})
	if err != nil {
		return err
	}
	for i := len(ts) - 1; i >= 0; i-- { // oldest first
		e.evaluateSoon(ts[i])
	}
	return nil
}

// all pages through every task matching f, newest first.
func (e *Engine) all(ctx context.Context, f model.TaskFilter) ([]model.Task, error) {
	var out []model.Task
	err := e.pages(ctx, f, func(page []model.Task) { out = append(out, page...) })
	return out, err
}

// Count counts the tasks in the given states, a page at a time (nothing
// is held but the count): the daemon's status and its idle watch.
func (e *Engine) Count(ctx context.Context, states ...model.State) (int, error) {
	n := 0
	for _, st := range states {
		if err := e.pages(ctx, model.TaskFilter{State: st}, func(page []model.Task) { n += len(page) }); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// pages calls fn with each page of the tasks matching f, newest first.
func (e *Engine) pages(ctx context.Context, f model.TaskFilter, fn func([]model.Task)) error {
	f.Limit = model.MaxPageSize
	for {
		page, err := e.store.ListTasks(ctx, f)
		if err != nil {
			return err
		}
		fn(page)
		if len(page) < f.Limit {
			return nil
		}
		f.Before = page[len(page)-1].ID
	}
}

// Quiesce stops the engine from authorizing anything: after it returns, no
// task is authorized (so none is dispatched); tasks waiting for a slot, and
// those whose gates are still being evaluated, stay submitted and are
// evaluated again by the next Start. A transition already authorizing
// finishes its dispatch first. Everything else (a run's reports, cancels)
// goes on. The daemon calls it before stopping the dispatcher, so a slot
// freed by a stopped run is not handed to a queued task that would then
// fail for want of a dispatcher. It is idempotent; Stop implies it.
func (e *Engine) Quiesce() {
	e.admit.Lock()
	e.stopping = true
	e.admit.Unlock()
	e.slots.stop()
	e.bgMu.Lock()
	e.bgClosed = true
	e.bgMu.Unlock()
}

func (e *Engine) quiescing() bool {
	e.admit.RLock()
	defer e.admit.RUnlock()
	return e.stopping
}

// Stop quiesces the engine and waits for background evaluations to finish.
// It is idempotent.
func (e *Engine) Stop(ctx context.Context) error {
	e.Quiesce()
	done := make(chan struct{})
	go func() { e.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// evaluateSoon queues a submitted task for evaluation: it takes a dispatch
// slot now, so tasks get slots in the order they are queued (within their
// caller's share), or waits in submitted for one to be handed to it; the
// evaluation itself runs in the background.
func (e *Engine) evaluateSoon(t model.Task) {
	if e.quiescing() || !e.slots.acquire(t.ID, t.Caller) {
		return // recovery, or a freed slot, evaluates it
	}
	e.evaluateLater(t.ID)
}

// evaluateLater evaluates, in the background, the gates of a submitted
// task that holds a dispatch slot.
func (e *Engine) evaluateLater(id string) {
	e.bgMu.Lock()
	if e.bgClosed {
		e.bgMu.Unlock()
		e.slots.release(id) // a slot taken for it goes back; a no-op otherwise
		return              // a stopped engine starts nothing; recovery picks it up
	}
	e.bg.Add(1)
	e.bgMu.Unlock()
	go func() {
		defer e.bg.Done()
		ctx := context.Background()
		if _, err := e.evaluateHeld(ctx, id); err != nil && model.ErrorCode(err) != model.CodeStaleState {
			e.log.Error("evaluate task", "task_id", id, "err", err)
		}
	}()
}

// Submit validates and persists a task and returns it, submitted, as soon
// as it is stored: its gates are evaluated afterwards, in the background,
// once a dispatch slot is free (until then it waits in submitted). The
// answer never waits for a gate, so a slow authority cannot make a client
// time out on a task that was accepted (and a retry duplicate it); the
// outcome is recorded on the task (get_task, list_tasks, the submitter's
// notice). A task stored but not yet gated when the daemon dies is gated
// by the next Start. A request-level problem (unknown target, bad mode,
// oversized prompt, bad cwd) creates nothing. The cwd is stored canonical
// (CanonicalCwd), and a retry is compared on it. Missing or malformed mission
// and lease IDs are not request errors: the task is persisted and audited,
// then rejected by missionLease. existed reports an idempotent retry: the
// caller's idempotency_key found its first task, created by the very same
// request (every field compared, see requestSHA256), which is returned as
// it is now. The same key with any field changed is refused with
// CodeIdempotencyConflict and stores nothing.
//
// r.ParentTaskID, set by the transport when the caller acts inside a
// running task (its facade descends from that task's agent), makes the
// task a delegation: it is stored with that parent and the parent's chain
// and hop (model.ChainOf), and the delegation gate refuses it, rejected,
// when its target is already in that chain or it is too deep. The parent
// must exist.
func (e *Engine) Submit(ctx context.Context, caller string, r model.SubmitRequest) (t model.Task, existed bool, err error) {
	if err := e.validate(caller, &r); err != nil {
		return model.Task{}, false, err
	}
	var chain []model.Hop
	if r.ParentTaskID != "" {
		parent, err := e.store.GetTask(ctx, r.ParentTaskID)
		if err != nil {
			// The transport found it running: not finding it is the
			// relay's failure, never the caller's not_found.
			return model.Task{}, false, &model.Error{Code: model.CodeInternal, Err: err,
				Message: "the task this submission was made inside could not be read", Hint: spec.Hint(model.CodeInternal)}
		}
		chain = model.ChainOf(parent)
	}
	now := e.now()
	asked := r // as the caller asked, after validate's defaults (the cwd canonical)
	sum := requestSHA256(asked)
	if r.ContextID == "" {
		r.ContextID = model.NewID("C") // a new thread; follow-ups name it
	}
	t, existed, err = e.store.CreateTask(ctx, model.Task{
		ID: model.NewID("T"), State: spec.InitialState, Caller: caller, Target: r.Target,
		Mode: r.Mode, MissionID: r.MissionID, LeaseID: r.LeaseID, ContextID: r.ContextID,
		Prompt: r.Prompt, Cwd: r.Cwd, Artifacts: r.Artifacts,
		ReferenceTaskIDs: r.ReferenceTaskIDs, IdempotencyKey: r.IdempotencyKey,
		ParentTaskID: r.ParentTaskID, Chain: chain,
		RequestSHA256: sum, CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return model.Task{}, false, err
	}
	if existed {
		if err := checkRetry(asked, sum, t); err != nil {
			return model.Task{}, false, err
		}
		return t, true, nil
	}
	e.changes.committed()
	// The evaluation belongs to the task now, not to the request: it runs
	// in the background, whatever becomes of the caller.
	e.evaluateSoon(t)
	return t, false, nil
}

func (e *Engine) validate(caller string, r *model.SubmitRequest) error {
	if caller == "" {
		return model.InvalidArgs("caller is required")
	}
	if r.Target == "" {
		return model.InvalidArgs("target is required")
	}
	if !e.registry.Known(r.Target) {
		return spec.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(r.Target))
	}
	if r.Mode == "" {
		r.Mode = model.ModeReadOnly
	}
	if !r.Mode.Valid() {
		return model.InvalidArgs("mode %q is not read_only or state_changing", model.Echo(string(r.Mode)))
	}
	if r.Prompt == "" {
		return model.InvalidArgs("prompt is required")
	}
	if len(r.Prompt) > e.maxPrompt {
		return spec.Errorf(model.CodePayloadTooLarge, "prompt is %d bytes; the limit is %d", len(r.Prompt), e.maxPrompt)
	}
	if err := r.CheckBounds(); err != nil {
		return err
	}
	cwd, err := CanonicalCwd(r.Cwd)
	if err != nil {
		return err
	}
	r.Cwd = cwd
	return model.CheckArtifacts(r.Artifacts)
}

// CanonicalCwd requires an absolute, clean path to an existing directory
// and returns it canonical: every symlink in it, the last component's and
// its parents', resolved. The cwd is resolved once, here, at submit: the
// task stores, shows and dispatches that one path, so the checks and
// masks made before the agent starts are made on the directory it runs
// in, never on a symlink's name for it (a symlink to a project with
// planted agent configuration would otherwise be checked as the link's
// parent and run in the project).
func CanonicalCwd(cwd string) (string, error) {
	bad := func(why string) error {
		return spec.Errorf(model.CodeInvalidCwd, "cwd %q %s", model.Echo(cwd), why)
	}
	if cwd == "" {
		return "", bad("is empty")
	}
	if !filepath.IsAbs(cwd) || filepath.Clean(cwd) != cwd {
		return "", bad("is not a clean absolute path")
	}
	resolved, err := filepath.EvalSymlinks(cwd)
	if errors.Is(err, fs.ErrNotExist) {
		return "", bad("does not exist")
	}
	if err != nil {
		return "", bad("cannot be resolved")
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", bad("does not exist")
	}
	if !fi.IsDir() {
		return "", bad("is not a directory")
	}
	return resolved, nil
}

// tryEvaluate evaluates a submitted task's gates when a dispatch slot is
// free for it; otherwise the task waits in submitted until one is handed
// to it.
func (e *Engine) tryEvaluate(ctx context.Context, t model.Task) (model.Task, error) {
	if e.quiescing() || !e.slots.acquire(t.ID, t.Caller) {
		return e.store.GetTask(ctx, t.ID)
	}
	return e.evaluateHeld(ctx, t.ID)
}

// evaluateHeld evaluates the gates of a task that holds a dispatch slot:
// it keeps the slot if it was authorized, and gives it back otherwise (a
// task that ended meanwhile, whose slot went back when it ended, has
// nothing to give back).
func (e *Engine) evaluateHeld(ctx context.Context, id string) (model.Task, error) {
	if e.quiescing() {
		e.slots.release(id) // no hand-over once quiesced: it stays free
		return e.store.GetTask(ctx, id)
	}
	t, err := e.transition(ctx, id, "", e.evaluate)
	if t.State != model.StateAuthorized && t.State != model.StateWorking {
		e.slots.release(id) // no-op if a transition already released it
	}
	return t, err
}

// evaluate decides a submitted task's step from its gates, evaluated
// before anything is fired (gates.Evaluate, stopping at the first that
// fails): authorize when every gate passed, else reject or block as the
// first failing gate's code leads (gates.Outcome), with that code.
func (e *Engine) evaluate(ctx context.Context, t model.Task) (step, error) {
	if t.State != model.StateSubmitted {
		return step{}, staleErr(t.ID, model.StateSubmitted, t.State)
	}
	vs := gates.Evaluate(ctx, t, gates.Sources{Policy: e.dispatcher.Policy, Agent: e.registry.Agent,
		Authority: e.authority, Now: e.now, MaxDelegationDepth: e.maxDepth})
	v, failed := vs.Failed()
	if !failed {
		return step{trigger: model.TriggerAuthorize, actor: model.RelayAgent, verdicts: vs}, nil
	}
	trig := model.TriggerReject
	if gates.Outcome(v) == model.StateBlocked {
		trig = model.TriggerBlock
	}
	msg := v.Message
	if msg == "" {
		msg = fmt.Sprintf("gate %s failed", v.Gate)
	}
	return step{trigger: trig, code: v.Code, message: msg, actor: model.RelayAgent, verdicts: vs}, nil
}

// abandoned records an evaluation whose gates all passed but that the stop
// kept from authorizing. Its verdicts belong to no transition, so none is
// stored with the task (the next Start evaluates every gate again and
// stores those); one audit row says the gates were consulted and why
// nothing followed — the authority adapter may have logged an answer that
// led to no authorization.
func (e *Engine) abandoned(ctx context.Context, t model.Task, vs gates.Verdicts) {
	var gs []string
	for _, v := range vs {
		gs = append(gs, string(v.Gate))
	}
	data := map[string]string{"reason": "the daemon is stopping", "gates_passed": strings.Join(gs, ",")}
	if err := e.store.Audit(context.WithoutCancel(ctx), model.AuditEvent{At: e.now(), Kind: "task.evaluation_abandoned",
		Actor: model.RelayAgent, TaskID: t.ID, Data: data}); err != nil {
		e.log.Warn("audit abandoned evaluation", "task_id", t.ID, "err", err)
	}
	e.log.Info("evaluation abandoned: the daemon is stopping; the task stays submitted", "task_id", t.ID)
}

func staleErr(id string, want, got model.State) error {
	return &model.Error{Code: model.CodeStaleState, Err: model.ErrStaleState,
		Message: fmt.Sprintf("task %s is %s, not %s", model.Echo(id), got, want), Hint: spec.Hint(model.CodeStaleState)}
}

// FireOptions carry what a transition records besides its states.
type FireOptions struct {
	Code    model.Code
	Message string
	Actor   string
	Result  *model.TaskResult
}

// Fire fires trigger at task id, which the caller saw in state expect. If
// the task is no longer in expect, nothing happens and the error has
// CodeStaleState; a trigger the lifecycle does not permit from expect has
// CodeInvalidTransition. authorize runs the gates (and dispatch) exactly as
// a submission does, within the dispatch limit.
func (e *Engine) Fire(ctx context.Context, id string, expect model.State, trigger model.Trigger, fo FireOptions) (model.Task, error) {
	if trigger == model.TriggerAuthorize && expect == model.StateSubmitted {
		t, err := e.store.GetTask(ctx, id)
		if err != nil {
			return t, err
		}
		if t.State != expect {
			return t, staleErr(id, expect, t.State)
		}
		return e.tryEvaluate(ctx, t)
	}
	return e.transition(ctx, id, "", func(_ context.Context, t model.Task) (step, error) {
		if t.State != expect {
			return step{}, staleErr(id, expect, t.State)
		}
		return step{trigger: trigger, code: fo.Code, message: fo.Message, actor: fo.Actor, result: fo.Result}, nil
	})
}

// Cancel cancels a task that is not yet terminal. A running agent is told
// to stop (session/cancel, a grace, then kill) after the cancel is stored.
func (e *Engine) Cancel(ctx context.Context, id string, code model.Code, actor string) (model.Task, error) {
	var from model.State
	t, err := e.transition(ctx, id, "", func(_ context.Context, t model.Task) (step, error) {
		if t.State.Terminal() {
			return step{}, spec.Errorf(model.CodeTaskNotCancelable, "task %s is already %s", model.Echo(id), t.State)
		}
		from = t.State
		return step{trigger: model.TriggerCancel, code: code, message: "canceled by " + actor, actor: actor}, nil
	})
	if err == nil && (from == model.StateAuthorized || from == model.StateWorking) {
		e.dispatcher.Cancel(id)
	}
	return t, err
}

func (e *Engine) terminal(ctx context.Context, t model.Task) {
	if e.onTerminal != nil {
		e.onTerminal(context.WithoutCancel(ctx), t)
	}
}

// Started implements model.RunReporter: authorized → working.
//
// Unlike Fire it does not read the task first: a run exists only for a
// task that was authorized, and the transition's compare-and-set from
// authorized is the check that it still is (a task canceled or failed
// meanwhile gets CodeStaleState from it). The read would sit between the
// agent's answer to session/new and the working stamp.
func (e *Engine) Started(ctx context.Context, taskID string, note string) error {
	_, err := e.transition(ctx, taskID, model.StateAuthorized, func(context.Context, model.Task) (step, error) {
		return step{trigger: model.TriggerStart, actor: model.RelayAgent, message: note}, nil
	})
	return err
}

// Denied implements model.RunReporter: count and audit a refused
// permission request.
func (e *Engine) Denied(ctx context.Context, taskID string, d model.Denial) error {
	return e.store.RecordDenial(ctx, taskID, map[string]string{
		"tool_call_title": d.ToolCallTitle, "tool_call_kind": d.ToolCallKind,
		"option_id": d.OptionID, "outcome": d.Outcome,
	})
}

// Finished implements model.RunReporter: the run ended. A task canceled or
// failed meanwhile keeps its state (the report gets CodeStaleState).
func (e *Engine) Finished(ctx context.Context, taskID string, out model.Outcome) error {
	trig := map[model.State]model.Trigger{
		model.StateCompleted: model.TriggerComplete,
		model.StateFailed:    model.TriggerFail,
		model.StateCanceled:  model.TriggerCancel,
	}[out.State]
	if trig == "" {
		return fmt.Errorf("finished: outcome state %q is not completed, failed or canceled", out.State)
	}
	res := out.Result
	_, err := e.transition(ctx, taskID, "", func(_ context.Context, t model.Task) (step, error) {
		if t.State.Terminal() {
			return step{}, staleErr(taskID, model.StateWorking, t.State)
		}
		return step{trigger: trig, code: out.Code, message: out.Message, actor: model.RelayAgent, result: &res}, nil
	})
	return err
}

// Get returns a task.
func (e *Engine) Get(ctx context.Context, id string) (model.Task, error) {
	return e.store.GetTask(ctx, id)
}

// List lists tasks.
func (e *Engine) List(ctx context.Context, f model.TaskFilter) ([]model.Task, error) {
	return e.store.ListTasks(ctx, f)
}

// Slots reports dispatch slots held and tasks waiting for one.
func (e *Engine) Slots() (held, waiting int) { return e.slots.inUse() }
