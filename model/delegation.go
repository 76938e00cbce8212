package model

import "strings"

// Delegation chains.
//
// An agent running a relay task may itself reach the relay (its own MCP
// client starts `relay mcp`): what it sends and submits then is part of
// that task. The daemon tells so from the process tree, never from the
// client's word: a facade whose process descends from a running task's
// agent acts inside that task. A task submitted there has that task as
// its parent (Task.ParentTaskID) and carries its chain (Task.Chain): the
// hops it was delegated through, from the top-level task down to its
// parent. The delegation gate refuses a task whose target is already in
// its chain (CodeDelegationCycle) or whose depth passes
// limits.max_delegation_depth (CodeDelegationTooDeep), before anything
// runs; the authority adapter is asked with the chain.

// Hop is one delegation of a chain: a task, who submitted it and to whom.
type Hop struct {
	TaskID string `json:"task_id"`
	Caller string `json:"caller"`
	Target string `json:"target"`
}

// Bounds of delegation chains.
const (
	// DefaultMaxDelegationDepth is the default of
	// limits.max_delegation_depth: a top-level task (depth 1) and two
	// levels of delegation below it.
	DefaultMaxDelegationDepth = 3
	// MaxDelegationDepth is the largest limits.max_delegation_depth: no
	// task deeper than it ever runs, so no stored chain holds more hops
	// than it.
	MaxDelegationDepth = 16
)

// Depth is the number of delegations from the top-level caller to t's
// target: 1 for a task submitted outside any task, its parent's depth plus
// one for a task submitted inside one.
func (t Task) Depth() int { return len(t.Chain) + 1 }

// Path is t's chain and t's own hop, as one line for people: the
// top-level caller, then each target in turn ("claude → codex → gemini").
// A hop whose caller is not the previous hop's target (a facade inside a
// task launched as another agent) names it: "claude → codex (as gemini) →
// opencode".
func (t Task) Path() string {
	return ChainPath(append(append([]Hop(nil), t.Chain...), Hop{TaskID: t.ID, Caller: t.Caller, Target: t.Target}))
}

// ChainPath renders hops as Task.Path does.
func ChainPath(hops []Hop) string {
	if len(hops) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(hops[0].Caller)
	for i, h := range hops {
		if i > 0 && h.Caller != hops[i-1].Target {
			b.WriteString(" (as " + h.Caller + ")")
		}
		b.WriteString(" → " + h.Target)
	}
	return b.String()
}

// ChainOf is the chain of a task submitted inside parent: parent's chain
// and parent's own hop.
func ChainOf(parent Task) []Hop {
	return append(append(make([]Hop, 0, len(parent.Chain)+1), parent.Chain...),
		Hop{TaskID: parent.ID, Caller: parent.Caller, Target: parent.Target})
}
