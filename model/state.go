package model

// State is a task's lifecycle state. Names follow A2A where A2A has one.
type State string

// The task states of the lifecycle (spec/lifecycle.dot draws it).
const (
	// StateSubmitted: the envelope is persisted and audited; gates not yet passed.
	StateSubmitted State = "submitted"
	// StateAuthorized: every gate passed; dispatch starts on entry, and only here.
	StateAuthorized State = "authorized"
	// StateWorking: the target's ACP session is running.
	StateWorking State = "working"
	// StateCompleted: the agent ended its turn (end_turn). Terminal.
	StateCompleted State = "completed"
	// StateFailed: dispatch or the run failed, timed out or was interrupted. Terminal.
	StateFailed State = "failed"
	// StateCanceled: the submitter or an operator canceled the task. Terminal.
	StateCanceled State = "canceled"
	// StateRejected: a gate said no (a policy decision). Terminal.
	StateRejected State = "rejected"
	// StateBlocked: fail-closed; the authority or the target adapter could not
	// be consulted or used. Terminal.
	StateBlocked State = "blocked"
)

// AllStates lists every State, in lifecycle order.
func AllStates() []State {
	return []State{StateSubmitted, StateAuthorized, StateWorking, StateCompleted,
		StateFailed, StateCanceled, StateRejected, StateBlocked}
}

// Terminal reports whether no trigger may leave s.
func (s State) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCanceled, StateRejected, StateBlocked:
		return true
	}
	return false
}

// Valid reports whether s is one of AllStates.
func (s State) Valid() bool {
	for _, v := range AllStates() {
		if v == s {
			return true
		}
	}
	return false
}

// Trigger names a lifecycle transition.
type Trigger string

// The lifecycle triggers.
const (
	// TriggerAuthorize: submitted → authorized, guarded by the gates.
	TriggerAuthorize Trigger = "authorize"
	// TriggerReject: submitted → rejected, when a gate makes a policy refusal.
	TriggerReject Trigger = "reject"
	// TriggerBlock: submitted → blocked, when a gate fails closed.
	TriggerBlock Trigger = "block"
	// TriggerStart: authorized → working, the ACP session started.
	TriggerStart Trigger = "start"
	// TriggerComplete: working → completed, the agent ended its turn.
	TriggerComplete Trigger = "complete"
	// TriggerFail: authorized|working → failed.
	TriggerFail Trigger = "fail"
	// TriggerCancel: submitted|authorized|working → canceled.
	TriggerCancel Trigger = "cancel"
)

// AllTriggers lists every Trigger.
func AllTriggers() []Trigger {
	return []Trigger{TriggerAuthorize, TriggerReject, TriggerBlock, TriggerStart,
		TriggerComplete, TriggerFail, TriggerCancel}
}

// Mode is a task's operation mode.
type Mode string

// The operation modes.
const (
	// ModeReadOnly is the default: the agent may read, not change state.
	ModeReadOnly Mode = "read_only"
	// ModeStateChanging is allowed only for guarded Claude.
	ModeStateChanging Mode = "state_changing"
)

// AllModes lists every Mode.
func AllModes() []Mode { return []Mode{ModeReadOnly, ModeStateChanging} }

// Valid reports whether m is one of AllModes.
func (m Mode) Valid() bool { return m == ModeReadOnly || m == ModeStateChanging }

// Assurance is the authority adapter's statement about how the target runs.
type Assurance string

// The assurance levels an authority may state.
const (
	// AssuranceStandard is the default when the authority says nothing.
	AssuranceStandard Assurance = "standard"
	// AssuranceGuarded is required for state_changing tasks.
	AssuranceGuarded Assurance = "guarded"
)

// AllAssurances lists every Assurance.
func AllAssurances() []Assurance { return []Assurance{AssuranceStandard, AssuranceGuarded} }

// MessageState is a passive message's delivery state.
type MessageState string

// The passive message states.
const (
	// MessageStored: persisted, not yet read.
	MessageStored MessageState = "stored"
	// MessageRead: returned to the recipient by check_inbox.
	MessageRead MessageState = "read"
	// MessageAcked: acknowledged by the recipient.
	MessageAcked MessageState = "acked"
)

// AllMessageStates lists every MessageState.
func AllMessageStates() []MessageState {
	return []MessageState{MessageStored, MessageRead, MessageAcked}
}

// Gate names one of the guards of the authorize transition (the gate
// table, with what each checks and its codes, is spec.Gates). The names
// equal the guard functions' names, so graphs and errors agree.
type Gate string

// The gates, in evaluation order.
const (
	GateMissionLease  Gate = "missionLease"
	GateDelegation    Gate = "delegation"
	GateACPDenial     Gate = "acpDenial"
	GateAuthority     Gate = "authority"
	GateGuardedClaude Gate = "guardedClaude"
)

// AllGates lists the gates in the order they are evaluated.
func AllGates() []Gate {
	return []Gate{GateMissionLease, GateDelegation, GateACPDenial, GateAuthority, GateGuardedClaude}
}

// CoreAgents are the six agents the relay knows without configuration.
func CoreAgents() []string {
	return []string{"claude", "codex", "cursor", "gemini", "opencode", "hermes"}
}

// RelayAgent is the sender name of messages the relay itself writes (task
// outcome notifications). No agent may use it.
const RelayAgent = "relay"
