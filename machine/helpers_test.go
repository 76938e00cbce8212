package machine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	gatestest.RemoveFakeAuthority()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// denyAll is the policy a correct dispatcher promises.
var denyAll = model.DispatchPolicy{DeniesAllPermissions: true}

// fakeDispatcher records dispatches; run, when set, plays the agent's part
// on its own goroutine after Dispatch returns, as a real dispatcher does.
type fakeDispatcher struct {
	policy model.DispatchPolicy
	fail   error
	run    func(t model.Task, r model.RunReporter)

	mu         sync.Mutex
	dispatched []string
	canceled   []string
	wg         sync.WaitGroup
}

func (d *fakeDispatcher) Policy() model.DispatchPolicy { return d.policy }

func (d *fakeDispatcher) Dispatch(_ context.Context, t model.Task, r model.RunReporter) error {
	d.mu.Lock()
	d.dispatched = append(d.dispatched, t.ID)
	d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	if d.run != nil {
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.run(t, r) }()
	}
	return nil
}

func (d *fakeDispatcher) Cancel(id string) {
	d.mu.Lock()
	d.canceled = append(d.canceled, id)
	d.mu.Unlock()
}

func (d *fakeDispatcher) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, x := range d.dispatched {
		if x == id {
			n++
		}
	}
	return n
}

func (d *fakeDispatcher) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dispatched)
}

// fakeRegistry is a fixed registry.
type fakeRegistry map[string]model.AgentInfo

func (r fakeRegistry) Known(name string) bool {
	_, ok := r[name]
	return ok
}

func (r fakeRegistry) Agent(_ context.Context, name string) (model.AgentInfo, bool) {
	a, ok := r[name]
	return a, ok
}

func (r fakeRegistry) Agents(context.Context) []model.AgentInfo {
	var out []model.AgentInfo
	for _, a := range r {
		out = append(out, a)
	}
	return out
}

func healthyRegistry() fakeRegistry {
	r := fakeRegistry{}
	for _, n := range model.CoreAgents() {
		r[n] = model.AgentInfo{Name: n, Enabled: true, Configured: true}
	}
	return r
}

// allowAuthority is an in-process authority for tests that are not about
// the adapter (the adapter itself is tested as a subprocess).
type allowAuthority struct {
	assurance model.Assurance
	mu        sync.Mutex
	n         int
}

func (a *allowAuthority) Consult(context.Context, model.AuthorityRequest) (model.AuthorityAnswer, error) {
	a.mu.Lock()
	a.n++
	a.mu.Unlock()
	return model.AuthorityAnswer{Allow: true, Assurance: a.assurance}, nil
}

func (a *allowAuthority) runs() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

type rig struct {
	db   *persistence.DB
	eng  *machine.Engine
	disp *fakeDispatcher
	cwd  string
}

func newRig(t *testing.T, o machine.Options) *rig {
	t.Helper()
	db := persistencetest.MustOpenTemp(t)
	disp, _ := o.Dispatcher.(*fakeDispatcher)
	if disp == nil {
		disp = &fakeDispatcher{policy: denyAll}
		o.Dispatcher = disp
	}
	if o.Registry == nil {
		o.Registry = healthyRegistry()
	}
	o.Store = db
	eng := machine.New(o)
	t.Cleanup(func() {
		disp.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &rig{db: db, eng: eng, disp: disp, cwd: t.TempDir()}
}

func (r *rig) submit(t *testing.T, req model.SubmitRequest) model.Task {
	t.Helper()
	return r.submitAs(t, "codex", req)
}

func (r *rig) submitAs(t *testing.T, caller string, req model.SubmitRequest) model.Task {
	t.Helper()
	if req.Target == "" {
		req.Target = "claude"
	}
	if req.Prompt == "" {
		req.Prompt = "summarize README.md"
	}
	if req.Cwd == "" {
		req.Cwd = r.cwd
	}
	if req.MissionID == "" && req.LeaseID == "" {
		req.MissionID, req.LeaseID = "M-1", "S-1"
	}
	task, _, err := r.eng.Submit(context.Background(), caller, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return task
}

// submitSettled submits like submit, then waits for the task's gates,
// which run after Submit has answered: it returns the task once it has left
// submitted (authorized, rejected, blocked or failed).
func (r *rig) submitSettled(t *testing.T, req model.SubmitRequest) model.Task {
	t.Helper()
	return settle(t, r.eng, r.submit(t, req).ID)
}

// settle waits until task id has left submitted and returns it. The gates
// run in the background after Submit answers; the engine has no event for
// their end, so this reads the stored task until it moves.
func settle(t *testing.T, eng *machine.Engine, id string) model.Task {
	t.Helper()
	var task model.Task
	eventually(t, "task "+id+" gated", func() bool {
		var err error
		task, err = eng.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return task.State != model.StateSubmitted
	})
	return task
}

// ended waits until task id is in a terminal state and returns it.
func ended(t *testing.T, eng *machine.Engine, id string) model.Task {
	t.Helper()
	var task model.Task
	eventually(t, "task "+id+" ended", func() bool {
		var err error
		task, err = eng.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return task.State.Terminal()
	})
	return task
}

func wantCode(t *testing.T, err error, code model.Code) {
	t.Helper()
	if got := model.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var _ = errors.New
