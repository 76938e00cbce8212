package gates

import (
	"context"
	"time"

	"github.com/hai-relay/relay/model"
)

// Sources are what the gates of an evaluation consult besides the task. Each
// is called only when its gate runs (after every earlier gate passed).
type Sources struct {
	// Policy returns the dispatcher's permission policy (acpDenial).
	Policy func() model.DispatchPolicy
	// Agent looks the target up in the registry (acpDenial).
	Agent func(ctx context.Context, name string) (model.AgentInfo, bool)
	// Authority is the authority adapter client; nil fails the authority
	// gate with authority_not_configured.
	Authority model.Authority
	// Now stamps the verdicts and the authority request; nil is
	// time.Now.
	Now func() time.Time
	// MaxDelegationDepth bounds a task's delegation depth (delegation);
	// zero or less is model.DefaultMaxDelegationDepth.
	MaxDelegationDepth int
}

// evaluation is one run of the gates: the task, its environment, and what
// a gate leaves for a later one (the authority's answer, which
// guardedClaude reads).
type evaluation struct {
	t   model.Task
	src Sources
	now func() time.Time
	ans model.AuthorityAnswer
}

// evaluators evaluate each gate of model.AllGates: a gate without one
// fails closed (internal) at run time, and TestEveryGateHasAnEvaluator
// fails before that.
var evaluators = map[model.Gate]func(context.Context, *evaluation) model.Verdict{
	model.GateMissionLease: func(_ context.Context, e *evaluation) model.Verdict { return MissionLease(e.t) },
	model.GateDelegation: func(_ context.Context, e *evaluation) model.Verdict {
		return Delegation(e.t, e.src.MaxDelegationDepth)
	},
	model.GateACPDenial: func(ctx context.Context, e *evaluation) model.Verdict {
		info, known := e.src.Agent(ctx, e.t.Target)
		return ACPDenial(e.src.Policy(), info, known, e.t.Mode)
	},
	model.GateAuthority: func(ctx context.Context, e *evaluation) model.Verdict {
		var v model.Verdict
		v, e.ans = Authority(ctx, e.src.Authority, NewAuthorityRequest(e.t, e.now()))
		return v
	},
	model.GateGuardedClaude: func(_ context.Context, e *evaluation) model.Verdict { return GuardedClaude(e.t, e.ans) },
}

// Verdicts are the verdicts of one evaluation, in gate order
// (model.AllGates), up to and including the first failing one: no gate
// runs after one failed.
type Verdicts []model.Verdict

// Passed reports whether gate g ran and passed.
func (vs Verdicts) Passed(g model.Gate) bool {
	for _, v := range vs {
		if v.Gate == g {
			return v.Passed
		}
	}
	return false
}

// Failed returns the first failing verdict, which decides the outcome.
func (vs Verdicts) Failed() (model.Verdict, bool) {
	for _, v := range vs {
		if !v.Passed {
			return v, true
		}
	}
	return model.Verdict{}, false
}

// Evaluate runs the gates of the authorize transition as a pipeline, in
// the order of model.AllGates (the gate table is spec.Gates), and stops at
// the first that fails. The authority adapter is consulted at most once,
// and only after the cheaper gates passed. Every verdict gets its gate's
// name and is stamped with src.Now.
//
// Evaluate is the only place a gate does I/O; the machine's guards then
// only read the verdicts it returned.
func Evaluate(ctx context.Context, t model.Task, src Sources) Verdicts {
	now := src.Now
	if now == nil {
		now = time.Now
	}
	vs := make(Verdicts, 0, len(model.AllGates()))
	run := &evaluation{t: t, src: src, now: now}
	for _, g := range model.AllGates() {
		var v model.Verdict
		if eval, ok := evaluators[g]; ok {
			v = eval(ctx, run)
		} else {
			v = fail(g, model.CodeInternal, "gate "+string(g)+" has no evaluation", nil)
		}
		v.Gate = g
		if v.At.IsZero() {
			v.At = now().UTC()
		}
		vs = append(vs, v)
		if !v.Passed {
			break
		}
	}
	return vs
}
