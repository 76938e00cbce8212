package spec_test

import (
	"slices"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// The gate table has every gate, in evaluation order, and each gate's
// codes are task codes of the catalogue that end a task rejected or
// blocked; no code belongs to two gates.
func TestGateTable(t *testing.T) {
	var got []model.Gate
	seen := map[model.Code]model.Gate{}
	for _, g := range spec.Gates() {
		got = append(got, g.Gate)
		if g.Checks == "" || len(g.Codes) == 0 {
			t.Errorf("gate %s: no checks text or no codes", g.Gate)
		}
		for _, c := range g.Codes {
			ci, ok := spec.Lookup(c)
			if !ok || ci.Kind != spec.KindTask || (ci.State != model.StateRejected && ci.State != model.StateBlocked) {
				t.Errorf("gate %s: code %s is not a task code that rejects or blocks (%+v)", g.Gate, c, ci)
			}
			if other, dup := seen[c]; dup {
				t.Errorf("code %s belongs to %s and %s", c, other, g.Gate)
			}
			seen[c] = g.Gate
		}
	}
	if !slices.Equal(got, model.AllGates()) {
		t.Errorf("spec.Gates() = %v, model.AllGates() = %v", got, model.AllGates())
	}
}
