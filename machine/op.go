package machine

import (
	"context"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
	"github.com/qmuntal/stateless"
)

// op is one trigger fired at one task. It is the machine's external
// storage: the accessor returns the state loaded when the op began, and the
// mutator writes the new state with a compare-and-set against it.
type op struct {
	e       *Engine
	task    model.Task
	trigger model.Trigger
	code    model.Code
	message string
	actor   string
	result  *model.TaskResult
	// eval is set for the authorize trigger: the gates' memo.
	eval *evaluation
	// verdicts are stored with the transition (the evaluation's verdicts
	// for authorize, reject and block).
	verdicts []model.Verdict
	// dispatchErr is what the dispatcher said when the entry action of
	// authorized ran; the engine fails the task with dispatch_failed on it.
	dispatchErr error
	dispatched  bool
	// admitted: mutate took e.admit for reading (an authorize write); fire
	// releases it once the entry action (the dispatch) has run.
	admitted bool
}

type opKey struct{}

func withOp(ctx context.Context, o *op) context.Context { return context.WithValue(ctx, opKey{}, o) }

func opFrom(ctx context.Context) *op {
	o, _ := ctx.Value(opKey{}).(*op)
	return o
}

func (o *op) access(context.Context) (stateless.State, error) { return o.task.State, nil }

func (o *op) mutate(ctx context.Context, s stateless.State) error {
	to := s.(model.State)
	if o.trigger == model.TriggerAuthorize && !o.admitted {
		o.e.admit.RLock()
		if o.e.stopping {
			o.e.admit.RUnlock()
			return errStopping
		}
		o.admitted = true
	}
	verdicts := o.verdicts
	if o.eval != nil && to == model.StateAuthorized {
		verdicts = o.eval.verdicts
	}
	tr := model.Transition{
		TaskID: o.task.ID, From: o.task.State, To: to, Trigger: o.trigger,
		Code: o.code, Message: o.message, Actor: o.actor,
		Verdicts: verdicts, Result: o.result, At: o.e.now(),
	}
	if o.e.notify && to.Terminal() {
		tr.NoticeID = newID("MSG")
	}
	t, err := o.e.store.Transition(ctx, tr)
	if err != nil {
		return err
	}
	from := o.task.State
	o.task = t
	if (from == model.StateAuthorized || from == model.StateWorking) && to.Terminal() {
		o.e.slots.release(t.ID)
	}
	return nil
}

// fire runs the op's trigger through a freshly built machine. The caller
// holds the task's lock.
func (o *op) fire(ctx context.Context) error {
	defer func() {
		if o.admitted {
			o.admitted = false
			o.e.admit.RUnlock()
		}
	}()
	return build(o.access, o.mutate).FireCtx(withOp(ctx, o), o.trigger)
}

// dispatch is the entry action of authorized. stateless runs it after the
// mutator has durably stored authorized, and never otherwise.
func dispatch(ctx context.Context, _ ...any) error {
	o := opFrom(ctx)
	if o == nil {
		return nil
	}
	o.dispatched = true
	o.dispatchErr = o.e.dispatcher.Dispatch(context.WithoutCancel(ctx), o.task, o.e)
	return nil
}

// evaluation memoizes the gates' verdicts for one evaluation, so each gate
// (the authority adapter above all) runs at most once, and none runs after
// an earlier one failed.
type evaluation struct {
	verdicts      []model.Verdict
	answer        model.AuthorityAnswer
	authorityRuns int
	failed        bool
}

func (ev *evaluation) get(g model.Gate) (model.Verdict, bool) {
	for _, v := range ev.verdicts {
		if v.Gate == g {
			return v, true
		}
	}
	return model.Verdict{}, false
}

func (ev *evaluation) firstFailure() (model.Verdict, bool) {
	for _, v := range ev.verdicts {
		if !v.Passed {
			return v, true
		}
	}
	return model.Verdict{}, false
}

// runGate evaluates gate g for the op in ctx, once.
func runGate(ctx context.Context, g model.Gate) bool {
	o := opFrom(ctx)
	if o == nil || o.eval == nil {
		return false // outside an evaluation (a graph or a query): never pass
	}
	ev := o.eval
	if v, ok := ev.get(g); ok {
		return v.Passed
	}
	if ev.failed {
		return false // an earlier gate decided; later ones do not run
	}
	e, t := o.e, o.task
	var v model.Verdict
	switch g {
	case model.GateMissionLease:
		v = gates.MissionLease(t)
	case model.GateACPDenial:
		info, known := e.registry.Agent(ctx, t.Target)
		v = gates.ACPDenial(e.dispatcher.Policy(), info, known)
	case model.GateAuthority:
		ev.authorityRuns++
		v, ev.answer = gates.Authority(ctx, e.authority, model.AuthorityRequest{
			RequestID: newID("R"), TaskID: t.ID, MissionID: t.MissionID, LeaseID: t.LeaseID,
			Caller: t.Caller, Target: t.Target, Mode: t.Mode, RequestedAt: e.now(),
		})
	case model.GateGuardedClaude:
		v = gates.GuardedClaude(t, ev.answer)
	}
	v.Gate = g
	if v.At.IsZero() {
		v.At = e.now()
	}
	ev.verdicts = append(ev.verdicts, v)
	if !v.Passed {
		ev.failed = true
	}
	return v.Passed
}

// The guards of submitted --authorize--> authorized, in evaluation order.
// Each is a named function so stateless shows its name.

func missionLease(ctx context.Context, _ ...any) bool  { return runGate(ctx, model.GateMissionLease) }
func acpDenial(ctx context.Context, _ ...any) bool     { return runGate(ctx, model.GateACPDenial) }
func authority(ctx context.Context, _ ...any) bool     { return runGate(ctx, model.GateAuthority) }
func guardedClaude(ctx context.Context, _ ...any) bool { return runGate(ctx, model.GateGuardedClaude) }
