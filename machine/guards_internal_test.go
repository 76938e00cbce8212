package machine

import (
	"context"
	"testing"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// The guards are pure reads of the verdicts they are given: the same
// verdicts give the same answers however often they are asked, a gate
// passes only if its verdict says so, and without verdicts (a graph, a
// trigger other than authorize) nothing passes.
func TestGuardsOnlyReadTheVerdicts(t *testing.T) {
	ctx := context.Background()
	all := gates.Verdicts{}
	for _, g := range model.AllGates() {
		all = append(all, model.Verdict{Gate: g, Passed: true})
	}
	failedAt := gates.Verdicts{
		{Gate: model.GateMissionLease, Passed: true},
		{Gate: model.GateACPDenial, Passed: true},
		{Gate: model.GateAuthority, Passed: false, Code: model.CodeAuthorityDenied},
	}
	for _, g := range model.AllGates() {
		guard := guards[g]
		for range 2 {
			if !guard(ctx, all, (*op)(nil)) {
				t.Errorf("%s: refused verdicts that all passed", g)
			}
			if want := g == model.GateMissionLease || g == model.GateACPDenial; guard(ctx, failedAt) != want {
				t.Errorf("%s: %v on verdicts failing at authority, want %v", g, !want, want)
			}
			if guard(ctx) || guard(ctx, gates.Verdicts(nil)) {
				t.Errorf("%s: passed without verdicts", g)
			}
		}
	}
}

// Every gate of the table guards the authorize transition.
func TestEveryGateHasAGuard(t *testing.T) {
	for _, g := range spec.Gates() {
		if guards[g.Gate] == nil {
			t.Errorf("gate %s has no guard in package machine", g.Gate)
		}
	}
}
