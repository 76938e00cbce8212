package machine_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
)

// stackAuthority allows (or denies) every task and records, for each
// consultation, whether stateless was on the call stack: a consultation
// from inside a guard would have been.
type stackAuthority struct {
	deny bool

	mu       sync.Mutex
	calls    map[string]int // by task id
	inGuards int
}

func (a *stackAuthority) Consult(_ context.Context, req model.AuthorityRequest) (model.AuthorityAnswer, error) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	inMachine := false
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "github.com/qmuntal/stateless") {
			inMachine = true
		}
		if !more {
			break
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[req.TaskID]++
	if inMachine {
		a.inGuards++
	}
	if a.deny {
		return model.AuthorityAnswer{DenyCode: "lease_expired"}, nil
	}
	return model.AuthorityAnswer{Allow: true, Assurance: model.AssuranceGuarded}, nil
}

// The gates run before the machine fires, never inside it: the authority
// is consulted exactly once per evaluated submission (allowed or denied),
// and never with stateless on the stack (a guard only reads the verdicts).
// A gate that fails before the authority (missionLease) consults nothing.
func TestAuthorityIsNotConsultedInsideAGuard(t *testing.T) {
	t.Parallel()
	for _, deny := range []bool{false, true} {
		auth := &stackAuthority{deny: deny, calls: map[string]int{}}
		// Every slot to the one caller: four tasks are evaluated at once.
		r := newRig(t, machine.Options{Authority: auth, MaxDispatchPerCaller: machine.DefaultMaxDispatch})
		var ids []string
		for range 3 {
			task := r.submitSettled(t, model.SubmitRequest{})
			want := model.StateAuthorized
			if deny {
				want = model.StateRejected
			}
			if task.State != want {
				t.Fatalf("deny=%v: task %s/%s, want %s", deny, task.State, task.Code, want)
			}
			ids = append(ids, task.ID)
		}
		rejected := r.submitSettled(t, model.SubmitRequest{MissionID: "M 1", LeaseID: "S-1"})
		auth.mu.Lock()
		for _, id := range ids {
			if n := auth.calls[id]; n != 1 {
				t.Errorf("deny=%v: task %s consulted the authority %d times, want 1", deny, id, n)
			}
		}
		if n := auth.calls[rejected.ID]; n != 0 || rejected.Code != model.CodeInvalidMissionID {
			t.Errorf("a task rejected by missionLease (%s) consulted the authority %d times", rejected.Code, n)
		}
		if auth.inGuards != 0 {
			t.Errorf("deny=%v: %d consultations ran inside the state machine", deny, auth.inGuards)
		}
		auth.mu.Unlock()
	}
}
