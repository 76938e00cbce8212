package machine

import (
	"context"
	"fmt"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
	"github.com/qmuntal/stateless"
)

// guards maps each gate to its guard function. The functions are named after
// the gates so that stateless's descriptions (graphs, unmet-guard lists)
// show missionLease, not func1.
var guards = map[model.Gate]stateless.GuardFunc{
	model.GateMissionLease:  missionLease,
	model.GateACPDenial:     acpDenial,
	model.GateAuthority:     authority,
	model.GateGuardedClaude: guardedClaude,
}

// build returns the lifecycle machine over the given storage. It is the one
// definition both the engine and the DOT graph use.
func build(accessor func(context.Context) (stateless.State, error),
	mutator func(context.Context, stateless.State) error) *stateless.StateMachine {
	sm := stateless.NewStateMachineWithExternalStorage(accessor, mutator, stateless.FiringQueued)
	for _, s := range model.AllStates() {
		sm.Configure(s) // every state gets a node, terminal ones too
	}
	for _, e := range spec.Lifecycle() {
		gs := make([]stateless.GuardFunc, 0, len(e.Gates))
		for _, g := range e.Gates {
			gs = append(gs, guards[g])
		}
		sm.Configure(e.From).Permit(e.Trigger, e.To, gs...)
	}
	sm.Configure(model.StateAuthorized).OnEntry(dispatch)
	sm.OnUnhandledTrigger(unhandled)
	return sm
}

// UnmetGatesError is returned by the machine when the authorize trigger is
// refused because a gate failed. Failed is the first failing gate's verdict;
// it decides the outcome.
type UnmetGatesError struct {
	State   model.State
	Trigger model.Trigger
	Unmet   []string
	Failed  model.Verdict
}

func (e *UnmetGatesError) Error() string {
	return fmt.Sprintf("trigger %s from %s: gate %s failed: %s", e.Trigger, e.State, e.Failed.Gate, e.Failed.Code)
}

// unhandled replaces stateless's untyped errors: a refused guard becomes an
// *UnmetGatesError, any other unpermitted trigger an *model.Error with
// CodeInvalidTransition.
func unhandled(ctx context.Context, state stateless.State, trigger stateless.Trigger, unmet []string) error {
	st, _ := state.(model.State)
	tr, _ := trigger.(model.Trigger)
	if len(unmet) > 0 {
		e := &UnmetGatesError{State: st, Trigger: tr, Unmet: unmet}
		if op := opFrom(ctx); op != nil && op.eval != nil {
			e.Failed, _ = op.eval.firstFailure()
		}
		return e
	}
	hint := "see `relay fsm dot` for the permitted transitions"
	if st.Terminal() {
		hint = "terminal states never change; a follow-up is a new task in the same context_id"
	}
	return &model.Error{Code: model.CodeInvalidTransition,
		Message: fmt.Sprintf("trigger %q is not permitted from state %q", tr, st), Hint: hint}
}
