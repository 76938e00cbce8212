package spec_test

import (
	"slices"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// contractEdges are the transitions the lifecycle contract permits (drawn
// in spec/lifecycle.dot), as from → to pairs, written out here as the
// independent source the table is checked against.
var contractEdges = [][2]model.State{
	{model.StateSubmitted, model.StateAuthorized},
	{model.StateSubmitted, model.StateRejected},
	{model.StateSubmitted, model.StateBlocked},
	{model.StateSubmitted, model.StateCanceled},
	{model.StateAuthorized, model.StateWorking},
	{model.StateAuthorized, model.StateFailed},
	{model.StateAuthorized, model.StateCanceled},
	{model.StateWorking, model.StateCompleted},
	{model.StateWorking, model.StateFailed},
	{model.StateWorking, model.StateCanceled},
}

// contractGates are the guards of the authorize transition, in order, as
// spec/lifecycle.dot draws them.
var contractGates = []model.Gate{"missionLease", "delegation", "acpDenial", "authority", "guardedClaude"}

func TestLifecycleStates(t *testing.T) {
	t.Parallel()
	seen := map[model.State]bool{}
	for _, e := range spec.Lifecycle() {
		for _, s := range []model.State{e.From, e.To} {
			if !s.Valid() {
				t.Errorf("edge %v uses unknown state %q", e, s)
			}
			seen[s] = true
		}
	}
	for _, s := range model.AllStates() {
		if !seen[s] {
			t.Errorf("state %s appears in no edge", s)
		}
	}
	if spec.InitialState != model.StateSubmitted || spec.InitialState.Terminal() {
		t.Errorf("InitialState = %s, want submitted", spec.InitialState)
	}
}

func TestLifecycleTerminalStatesHaveNoExit(t *testing.T) {
	t.Parallel()
	for _, e := range spec.Lifecycle() {
		if e.From.Terminal() {
			t.Errorf("terminal state %s has an outgoing edge %s → %s", e.From, e.Trigger, e.To)
		}
	}
	for _, s := range model.AllStates() {
		for _, tr := range model.AllTriggers() {
			if to, ok := spec.Next(s, tr); ok && s.Terminal() {
				t.Errorf("Next(%s, %s) = %s; terminal states never change", s, tr, to)
			}
		}
	}
}

func TestLifecycleCancel(t *testing.T) {
	t.Parallel()
	for _, s := range model.AllStates() {
		to, ok := spec.Next(s, model.TriggerCancel)
		switch {
		case s.Terminal() && ok:
			t.Errorf("terminal state %s can be canceled", s)
		case !s.Terminal() && (!ok || to != model.StateCanceled):
			t.Errorf("Next(%s, cancel) = %q, %v; every live task can be canceled", s, to, ok)
		}
	}
}

func TestLifecycleGates(t *testing.T) {
	t.Parallel()
	if !slices.Equal(model.AllGates(), contractGates) {
		t.Errorf("model.AllGates() = %v, want the order of spec/lifecycle.dot %v", model.AllGates(), contractGates)
	}
	guarded := 0
	for _, e := range spec.Lifecycle() {
		if e.Trigger != model.TriggerAuthorize {
			if len(e.Gates) != 0 {
				t.Errorf("edge %s --%s--> %s carries gates %v; only authorize does", e.From, e.Trigger, e.To, e.Gates)
			}
			continue
		}
		guarded++
		if e.From != model.StateSubmitted || e.To != model.StateAuthorized {
			t.Errorf("authorize goes %s → %s, want submitted → authorized", e.From, e.To)
		}
		if !slices.Equal(e.Gates, model.AllGates()) {
			t.Errorf("authorize gates = %v, want every gate in order %v", e.Gates, model.AllGates())
		}
	}
	if guarded != 1 {
		t.Errorf("%d authorize edges, want 1", guarded)
	}
	// Dispatch happens only on entry to authorized, so authorize must be the
	// only way in.
	for _, e := range spec.Lifecycle() {
		if e.To == model.StateAuthorized && e.Trigger != model.TriggerAuthorize {
			t.Errorf("edge %s --%s--> authorized bypasses the gates", e.From, e.Trigger)
		}
	}
}

func TestLifecycleTriggers(t *testing.T) {
	t.Parallel()
	for _, tr := range model.AllTriggers() {
		if !slices.ContainsFunc(spec.Lifecycle(), func(e spec.Edge) bool { return e.Trigger == tr }) {
			t.Errorf("trigger %s is used by no edge", tr)
		}
	}
	for _, e := range spec.Lifecycle() {
		if !slices.Contains(model.AllTriggers(), e.Trigger) {
			t.Errorf("edge %s → %s uses unknown trigger %q", e.From, e.To, e.Trigger)
		}
	}
}

func TestLifecycleDeterministic(t *testing.T) {
	t.Parallel()
	type key struct {
		from model.State
		tr   model.Trigger
	}
	seen := map[key]bool{}
	for _, e := range spec.Lifecycle() {
		k := key{e.From, e.Trigger}
		if seen[k] {
			t.Errorf("two edges leave %s on %s", e.From, e.Trigger)
		}
		seen[k] = true
		if to, ok := spec.Next(e.From, e.Trigger); !ok || to != e.To {
			t.Errorf("Next(%s, %s) = %s, %v; the table says %s", e.From, e.Trigger, to, ok, e.To)
		}
	}
	if to, ok := spec.Next(model.StateSubmitted, model.TriggerComplete); ok {
		t.Errorf("Next(submitted, complete) = %s; no such edge", to)
	}
}

func TestLifecycleMatchesContract(t *testing.T) {
	t.Parallel()
	var got [][2]model.State
	for _, e := range spec.Lifecycle() {
		got = append(got, [2]model.State{e.From, e.To})
	}
	for _, want := range contractEdges {
		if !slices.Contains(got, want) {
			t.Errorf("the edge %s → %s of spec/lifecycle.dot is missing", want[0], want[1])
		}
	}
	for _, g := range got {
		if !slices.Contains(contractEdges, g) {
			t.Errorf("edge %s → %s is not in spec/lifecycle.dot", g[0], g[1])
		}
	}
}

// Every state is reachable from the initial one, and every live state can
// still reach a terminal one.
func TestLifecycleReachable(t *testing.T) {
	t.Parallel()
	reach := map[model.State]bool{spec.InitialState: true}
	for changed := true; changed; {
		changed = false
		for _, e := range spec.Lifecycle() {
			if reach[e.From] && !reach[e.To] {
				reach[e.To], changed = true, true
			}
		}
	}
	for _, s := range model.AllStates() {
		if !reach[s] {
			t.Errorf("state %s is unreachable from %s", s, spec.InitialState)
		}
		if !s.Terminal() && !slices.ContainsFunc(spec.Lifecycle(), func(e spec.Edge) bool {
			return e.From == s && e.To.Terminal()
		}) {
			t.Errorf("live state %s has no edge to a terminal state", s)
		}
	}
}
