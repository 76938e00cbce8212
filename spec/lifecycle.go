package spec

import "github.com/hai-relay/relay/model"

// Edge is one permitted transition of the task lifecycle.
type Edge struct {
	From    model.State
	Trigger model.Trigger
	To      model.State
	// Gates guard the edge, evaluated in this order; the first failing gate
	// decides the outcome and no later gate runs.
	Gates []model.Gate
}

// Lifecycle is the task lifecycle as a table (spec/lifecycle.dot draws it).
// The machine package builds its state machine from this table and nothing
// else.
func Lifecycle() []Edge {
	return []Edge{
		{model.StateSubmitted, model.TriggerAuthorize, model.StateAuthorized, model.AllGates()},
		{model.StateSubmitted, model.TriggerReject, model.StateRejected, nil},
		{model.StateSubmitted, model.TriggerBlock, model.StateBlocked, nil},
		{model.StateSubmitted, model.TriggerCancel, model.StateCanceled, nil},
		{model.StateAuthorized, model.TriggerStart, model.StateWorking, nil},
		{model.StateAuthorized, model.TriggerFail, model.StateFailed, nil},
		{model.StateAuthorized, model.TriggerCancel, model.StateCanceled, nil},
		{model.StateWorking, model.TriggerComplete, model.StateCompleted, nil},
		{model.StateWorking, model.TriggerFail, model.StateFailed, nil},
		{model.StateWorking, model.TriggerCancel, model.StateCanceled, nil},
	}
}

// InitialState is the state every task is created in.
const InitialState = model.StateSubmitted
