package machine

import (
	"context"
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
	"github.com/qmuntal/stateless"
)

// guards maps each gate to its guard function. The functions are named after
// the gates so that stateless's descriptions (graphs, unmet-guard lists)
// show missionLease, not func1.
var guards = map[model.Gate]stateless.GuardFunc{
	model.GateMissionLease:  missionLease,
	model.GateDelegation:    delegation,
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

// unhandled replaces stateless's untyped errors with an *model.Error
// carrying CodeInvalidTransition: a trigger the lifecycle does not permit
// from the state, or authorize fired with verdicts that do not pass every
// gate (the engine fires authorize only when they all passed, so that is
// a defect, refused all the same).
func unhandled(_ context.Context, state stateless.State, trigger stateless.Trigger, unmet []string) error {
	st, _ := state.(model.State)
	tr, _ := trigger.(model.Trigger)
	if len(unmet) > 0 {
		return &model.Error{Code: model.CodeInvalidTransition,
			Message: fmt.Sprintf("trigger %q from state %q: guards %s not met", tr, st, strings.Join(unmet, ", ")),
			Hint:    "authorize follows a gate evaluation in which every gate passed"}
	}
	hint := "see `relay fsm dot` for the permitted transitions"
	if st.Terminal() {
		hint = "terminal states never change; a follow-up is a new task in the same context_id"
	}
	return &model.Error{Code: model.CodeInvalidTransition,
		Message: fmt.Sprintf("trigger %q is not permitted from state %q", tr, st), Hint: hint}
}
