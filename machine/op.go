package machine

import (
	"context"
	"errors"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
	"github.com/qmuntal/stateless"
)

// step is one transition the engine fires at a task: its trigger and what
// its event records.
type step struct {
	trigger model.Trigger
	code    model.Code
	message string
	actor   string
	result  *model.TaskResult
	// verdicts are the evaluation's (authorize, reject and block): the
	// authorize guards read them, and they are stored with the transition.
	verdicts gates.Verdicts
}

// decider chooses the step to fire from the task as read under its lock,
// or refuses (stale_state, task_not_cancelable, …), and then nothing is
// fired. The authorize decider evaluates the gates: the only I/O of a
// firing other than the write itself and the dispatch.
type decider func(ctx context.Context, t model.Task) (step, error)

// transition is the engine's one firing protocol; every transition (Fire,
// a submission's gates, Started, Finished, Cancel, recovery) goes through
// it:
//
//  1. lock the task, so operations on one task never interleave;
//  2. read it from the store — unless the caller names the state it
//     holds the task in (known: a run's start report knows its task is
//     authorized), and then the compare-and-set is the only check;
//  3. decide the step from what was read;
//  4. fire the step's one trigger through a freshly built machine whose
//     accessor answers the state read and whose mutator is the store's
//     compare-and-set write (state, event, verdicts and audit row in one
//     transaction; a task that moved since the read gets stale_state);
//     on entry to authorized, the dispatch. A dispatch that fails fires
//     fail the same way, under the same lock;
//  5. unlock; if the task left authorized and working (or never got there),
//     its dispatch slot is released, and a terminal task is reported to
//     OnTerminal.
func (e *Engine) transition(ctx context.Context, id string, known model.State, decide decider) (model.Task, error) {
	unlock := e.lock(id)
	t, wrote, err := e.fireLocked(ctx, id, known, decide)
	unlock()
	if wrote && t.State != model.StateAuthorized && t.State != model.StateWorking {
		e.slots.release(id) // a no-op unless the task holds one
		if t.State.Terminal() {
			e.terminal(ctx, t)
		}
	}
	return t, err
}

// fireLocked is steps 2–4 of transition; the caller holds the task's
// lock. wrote reports that the returned task is as this call stored it.
func (e *Engine) fireLocked(ctx context.Context, id string, known model.State, decide decider) (t model.Task, wrote bool, err error) {
	if known != "" {
		t = model.Task{ID: id, State: known}
	} else if t, err = e.store.GetTask(ctx, id); err != nil {
		return t, false, err
	}
	s, err := decide(ctx, t)
	if err != nil {
		return t, false, err
	}
	o := &op{e: e, task: t, step: s}
	err = o.fire(ctx)
	switch {
	case errors.Is(err, errStopping):
		e.abandoned(ctx, t, s.verdicts)
		return t, false, nil
	case err != nil:
		return o.task, o.wrote, err
	case o.dispatchErr != nil:
		failed, wrote, err := e.fireLocked(ctx, id, model.StateAuthorized, func(context.Context, model.Task) (step, error) {
			return step{trigger: model.TriggerFail, code: dispatchCode(o.dispatchErr),
				message: model.Public(o.dispatchErr).Message, actor: model.RelayAgent}, nil
		})
		if err != nil {
			return o.task, true, err
		}
		e.log.Warn("dispatch failed", "task_id", id, "err", o.dispatchErr)
		return failed, wrote, nil
	}
	return o.task, o.wrote, nil
}

// op is one step fired at one task. It is the machine's external storage:
// the accessor returns the state read when the op began, and the mutator
// writes the new state with a compare-and-set against it.
type op struct {
	e    *Engine
	task model.Task
	step step
	// wrote: the mutator stored the transition, and task is as stored.
	wrote bool
	// dispatchErr is what the dispatcher said when the entry action of
	// authorized ran; the engine fails the task with dispatch_failed on it.
	dispatchErr error
	// admitted: mutate took e.admit for reading (an authorize write); fire
	// releases it once the entry action (the dispatch) has run.
	admitted bool
}

func (o *op) access(context.Context) (stateless.State, error) { return o.task.State, nil }

func (o *op) mutate(ctx context.Context, s stateless.State) error {
	to := s.(model.State)
	if o.step.trigger == model.TriggerAuthorize && !o.admitted {
		o.e.admit.RLock()
		if o.e.stopping {
			o.e.admit.RUnlock()
			return errStopping
		}
		o.admitted = true
	}
	tr := model.Transition{
		TaskID: o.task.ID, From: o.task.State, To: to, Trigger: o.step.trigger,
		Code: o.step.code, Message: o.step.message, Actor: o.step.actor,
		Verdicts: o.step.verdicts, Result: o.step.result, At: o.e.now(),
	}
	if o.e.notify && to.Terminal() {
		tr.NoticeID = model.NewID("MSG")
	}
	t, err := o.e.store.Transition(ctx, tr)
	if err != nil {
		return err
	}
	o.task, o.wrote = t, true
	o.e.changes.committed()
	return nil
}

// fire fires the op's one trigger through a freshly built machine, passing
// the step's verdicts (for the guards) and the op (for the entry action)
// as the trigger's arguments. The caller holds the task's lock.
func (o *op) fire(ctx context.Context) error {
	defer func() {
		if o.admitted {
			o.admitted = false
			o.e.admit.RUnlock()
		}
	}()
	return build(o.access, o.mutate).FireCtx(ctx, o.step.trigger, o.step.verdicts, o)
}

// dispatch is the entry action of authorized. stateless runs it after the
// mutator has durably stored authorized, and never otherwise.
func dispatch(ctx context.Context, args ...any) error {
	for _, a := range args {
		if o, ok := a.(*op); ok {
			o.dispatchErr = o.e.dispatcher.Dispatch(context.WithoutCancel(ctx), o.task, o.e)
			return nil
		}
	}
	return nil
}

// passed reports whether the verdicts among a firing's arguments say gate
// g passed; a firing without verdicts (a graph, any trigger but
// authorize) never passes.
func passed(args []any, g model.Gate) bool {
	for _, a := range args {
		if vs, ok := a.(gates.Verdicts); ok {
			return vs.Passed(g)
		}
	}
	return false
}

// The guards of submitted --authorize--> authorized, in evaluation order.
// Each is a named function so stateless shows its name. They are pure:
// they read the verdicts gates.Evaluate computed before Fire and passed as
// the trigger's argument; no gate runs inside the machine.

func missionLease(_ context.Context, args ...any) bool  { return passed(args, model.GateMissionLease) }
func delegation(_ context.Context, args ...any) bool    { return passed(args, model.GateDelegation) }
func acpDenial(_ context.Context, args ...any) bool     { return passed(args, model.GateACPDenial) }
func authority(_ context.Context, args ...any) bool     { return passed(args, model.GateAuthority) }
func guardedClaude(_ context.Context, args ...any) bool { return passed(args, model.GateGuardedClaude) }

// dispatchCode is the code a task whose dispatch failed ends with: the
// dispatcher's own when it is a task code for a failed run
// (agent_sandbox_unavailable), else dispatch_failed.
func dispatchCode(err error) model.Code {
	if c := model.ErrorCode(err); c == model.CodeAgentSandboxUnavailable {
		return c
	}
	return model.CodeDispatchFailed
}
