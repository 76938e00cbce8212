package machine_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

// chainAuthority allows every task and keeps each request it was asked.
type chainAuthority struct {
	mu   sync.Mutex
	reqs []model.AuthorityRequest
}

func (a *chainAuthority) Consult(_ context.Context, r model.AuthorityRequest) (model.AuthorityAnswer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, r)
	return model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceStandard}, nil
}

func (a *chainAuthority) asked(id string) (model.AuthorityRequest, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.reqs {
		if r.TaskID == id {
			return r, true
		}
	}
	return model.AuthorityRequest{}, false
}

// A task submitted inside another is stored with its parent and the
// parent's chain and hop; the authority is asked with that chain; a
// submission back to an agent of the chain is rejected delegation_cycle,
// and one past the bound delegation_too_deep, both before the authority
// is asked and before anything is dispatched, with the chain on the
// verdict. A parent the store does not have is the relay's failure
// (internal), and stores nothing.
func TestSubmitInsideATaskRecordsAndBoundsTheChain(t *testing.T) {
	t.Parallel()
	auth := &chainAuthority{}
	r := newRig(t, machine.Options{Authority: auth, MaxDelegationDepth: 3})
	top := r.submitAs(t, "codex", model.SubmitRequest{Target: "gemini"})
	if top.ParentTaskID != "" || top.Chain == nil || len(top.Chain) != 0 {
		t.Fatalf("a top-level task: parent %q chain %#v", top.ParentTaskID, top.Chain)
	}
	if settle(t, r.eng, top.ID).State != model.StateAuthorized {
		t.Fatal("the top-level task was not authorized")
	}

	child := r.submitAs(t, "gemini", model.SubmitRequest{Target: "claude", ParentTaskID: top.ID})
	wantChain := []model.Hop{{TaskID: top.ID, Caller: "codex", Target: "gemini"}}
	if child.ParentTaskID != top.ID || !slices.Equal(child.Chain, wantChain) {
		t.Fatalf("the child: parent %q chain %v, want %s and %v", child.ParentTaskID, child.Chain, top.ID, wantChain)
	}
	if got := settle(t, r.eng, child.ID); got.State != model.StateAuthorized {
		t.Fatalf("the child: %s %s %s", got.State, got.Code, got.Message)
	}
	if req, ok := auth.asked(child.ID); !ok || req.ParentTaskID != top.ID || !slices.Equal(req.Chain, wantChain) {
		t.Errorf("the authority was asked about the child with %+v (asked: %v)", req, ok)
	}

	// Back to codex, the chain's first caller: a loop.
	loop := r.submitAs(t, "claude", model.SubmitRequest{Target: "codex", ParentTaskID: child.ID})
	got := settle(t, r.eng, loop.ID)
	if got.State != model.StateRejected || got.Code != model.CodeDelegationCycle {
		t.Fatalf("the loop: %s %s, want rejected delegation_cycle", got.State, got.Code)
	}
	if _, asked := auth.asked(loop.ID); asked {
		t.Error("the authority was asked about a loop the relay refuses")
	}
	if n := r.disp.count(loop.ID); n != 0 {
		t.Errorf("the loop was dispatched %d times", n)
	}
	vs, err := r.db.TaskVerdicts(context.Background(), loop.ID)
	if err != nil || len(vs) != 2 || vs[1].Gate != model.GateDelegation || vs[1].Detail["path"] != "codex → gemini → claude → codex" {
		t.Errorf("the loop's verdicts: %+v, %v", vs, err)
	}

	// Depth 4 with a bound of 3.
	deep := r.submitAs(t, "claude", model.SubmitRequest{Target: "opencode", ParentTaskID: child.ID})
	if got := settle(t, r.eng, deep.ID); got.State != model.StateAuthorized {
		t.Fatalf("depth 3: %s %s", got.State, got.Code)
	}
	deeper := r.submitAs(t, "opencode", model.SubmitRequest{Target: "cursor", ParentTaskID: deep.ID})
	if got := settle(t, r.eng, deeper.ID); got.State != model.StateRejected || got.Code != model.CodeDelegationTooDeep {
		t.Fatalf("depth 4: %s %s, want rejected delegation_too_deep", got.State, got.Code)
	}
	if _, asked := auth.asked(deeper.ID); asked || r.disp.count(deeper.ID) != 0 {
		t.Error("a task too deep was put to the authority or dispatched")
	}

	// The parent is part of the request an idempotency key names.
	first := r.submitAs(t, "gemini", model.SubmitRequest{Target: "hermes", ParentTaskID: top.ID, IdempotencyKey: "k"})
	if again := r.submitAs(t, "gemini", model.SubmitRequest{Target: "hermes", ParentTaskID: top.ID, IdempotencyKey: "k"}); again.ID != first.ID {
		t.Errorf("a retry inside the same task made a second task %s", again.ID)
	}
	_, _, err = r.eng.Submit(context.Background(), "gemini", model.SubmitRequest{Target: "hermes", Prompt: "summarize README.md",
		MissionID: "M-1", LeaseID: "S-1", Cwd: r.cwd, IdempotencyKey: "k"})
	wantCode(t, err, model.CodeIdempotencyConflict)

	before, _ := r.eng.List(context.Background(), model.TaskFilter{})
	_, _, err = r.eng.Submit(context.Background(), "gemini", model.SubmitRequest{Target: "hermes", Prompt: "p",
		MissionID: "M-1", LeaseID: "S-1", Cwd: r.cwd, ParentTaskID: "T-00000000000000000000000000"})
	wantCode(t, err, model.CodeInternal)
	if after, _ := r.eng.List(context.Background(), model.TaskFilter{}); len(after) != len(before) {
		t.Errorf("a submission inside an unknown task stored %d tasks", len(after)-len(before))
	}
}
