package gates_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

type countingAuthority struct {
	ans model.AuthorityAnswer
	mu  sync.Mutex
	n   int
}

func (a *countingAuthority) Consult(context.Context, model.AuthorityRequest) (model.AuthorityAnswer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	return a.ans, nil
}

// Evaluate runs the gates in order and stops at the first that fails; the
// authority is consulted once, and only when the gates before it passed;
// every verdict is named and stamped.
func TestEvaluatePipeline(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ready := model.AgentInfo{Name: "claude", Enabled: true, Configured: true}
	task := model.Task{ID: "T-1", MissionID: "M-1", LeaseID: "S-1", Caller: "codex", Target: "claude",
		Mode: model.ModeStateChanging}
	loop := task
	loop.ParentTaskID, loop.Chain = "T-0", []model.Hop{{TaskID: "T-0", Caller: "claude", Target: "codex"}}
	for _, c := range []struct {
		name    string
		task    model.Task
		agent   model.AgentInfo
		ans     model.AuthorityAnswer
		gates   int
		code    model.Code
		consult int
	}{
		{"all pass", task, ready, model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceGuarded}, 5, "", 1},
		{"missionLease fails", model.Task{Target: "claude"}, ready, model.AuthorityAnswer{Allow: true}, 1, model.CodeMissingMissionID, 0},
		{"delegation fails", loop, ready, model.AuthorityAnswer{Allow: true}, 2, model.CodeDelegationCycle, 0},
		{"acpDenial fails", task, model.AgentInfo{Name: "claude"}, model.AuthorityAnswer{Allow: true}, 3, model.CodeAgentDisabled, 0},
		{"authority denies", task, ready, model.AuthorityAnswer{DenyCode: "lease_expired"}, 4, model.CodeAuthorityDenied, 1},
		{"guardedClaude fails", task, ready, model.AuthorityAnswer{Allow: true}, 5, model.CodeStateChangingRequiresGuardedClaude, 1},
	} {
		auth := &countingAuthority{ans: c.ans}
		vs := gates.Evaluate(context.Background(), c.task, gates.Sources{
			Policy:    func() model.DispatchPolicy { return model.DispatchPolicy{DeniesAllPermissions: true} },
			Agent:     func(context.Context, string) (model.AgentInfo, bool) { return c.agent, true },
			Authority: auth, Now: func() time.Time { return at },
		})
		if len(vs) != c.gates || auth.n != c.consult {
			t.Fatalf("%s: %d verdicts, %d consultations; want %d and %d", c.name, len(vs), auth.n, c.gates, c.consult)
		}
		for i, v := range vs {
			if v.Gate != model.AllGates()[i] || !v.At.Equal(at) {
				t.Errorf("%s: verdict %d is %s at %v", c.name, i, v.Gate, v.At)
			}
		}
		f, failed := vs.Failed()
		if failed != (c.code != "") || f.Code != c.code {
			t.Errorf("%s: failed=%v %s, want %s", c.name, failed, f.Code, c.code)
		}
		if f, _ := vs.Failed(); failed && f.Gate != vs[len(vs)-1].Gate {
			t.Errorf("%s: the failing verdict is not the last", c.name)
		}
		for i, g := range model.AllGates() {
			if want := i < len(vs) && vs[i].Passed; vs.Passed(g) != want {
				t.Errorf("%s: Passed(%s) = %v", c.name, g, !want)
			}
		}
	}
}

// Every gate of the table has an evaluator (a gate added to model.AllGates
// without one would fail every task closed, internal).
func TestEveryGateHasAnEvaluator(t *testing.T) {
	for _, g := range spec.Gates() {
		if !gates.HasEvaluator(g.Gate) {
			t.Errorf("gate %s has no evaluator in package gates", g.Gate)
		}
	}
}
