package dispatch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		dispatchtest.Cleanup()
		os.Exit(code)
	}))
}

// recorder is a model.RunReporter that records every call.
type recorder struct {
	mu       sync.Mutex
	calls    []string
	notes    []string
	denials  []model.Denial
	outcomes []model.Outcome
	startErr error

	startedOnce sync.Once
	started     chan struct{}
	finished    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{started: make(chan struct{}), finished: make(chan struct{}, 16)}
}

func (r *recorder) Started(_ context.Context, taskID string, note string) error {
	r.mu.Lock()
	r.calls = append(r.calls, "started")
	r.notes = append(r.notes, note)
	err := r.startErr
	r.mu.Unlock()
	r.startedOnce.Do(func() { close(r.started) })
	return err
}

func (r *recorder) Denied(_ context.Context, taskID string, d model.Denial) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "denied")
	r.denials = append(r.denials, d)
	return nil
}

func (r *recorder) Finished(_ context.Context, taskID string, out model.Outcome) error {
	r.mu.Lock()
	r.calls = append(r.calls, "finished")
	r.outcomes = append(r.outcomes, out)
	r.mu.Unlock()
	r.finished <- struct{}{}
	return nil
}

func (r *recorder) snapshot() ([]string, []model.Denial, []model.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...), append([]model.Denial(nil), r.denials...), append([]model.Outcome(nil), r.outcomes...)
}

func (r *recorder) waitStarted(tb testing.TB) {
	tb.Helper()
	select {
	case <-r.started:
	case <-time.After(20 * time.Second):
		tb.Fatal("Started was not reported")
	}
}

func (r *recorder) waitFinished(tb testing.TB) model.Outcome {
	tb.Helper()
	select {
	case <-r.finished:
	case <-time.After(30 * time.Second):
		tb.Fatal("Finished was not reported")
	}
	_, _, outs := r.snapshot()
	if len(outs) != 1 {
		tb.Fatalf("Finished reported %d times", len(outs))
	}
	return outs[0]
}

// env is one dispatcher over the fake agent, with its own home, cwd, agent
// event log and pid file.
type env struct {
	bin      string
	d        *dispatch.Dispatcher
	reg      *dispatch.Registry
	home     string
	cwd      string
	agentLog string
	pidFile  string
	probes   map[string]dispatch.Probe
	probesMu sync.Mutex
}

func newEnv(tb testing.TB, tweak ...func(*dispatch.Options)) *env {
	tb.Helper()
	bin := dispatchtest.BuildFakeAgent(tb)
	dir := tb.TempDir()
	e := &env{bin: bin, home: filepath.Join(dir, "home"), cwd: filepath.Join(dir, "work"),
		agentLog: filepath.Join(dir, "agent.jsonl"), pidFile: filepath.Join(dir, "grandchild.pid"),
		probes: map[string]dispatch.Probe{}}
	if err := os.MkdirAll(e.cwd, 0o700); err != nil {
		tb.Fatal(err)
	}
	// The scripted agent writes these from inside its sandbox, where they
	// are bound writable, each file alone (a directory bound writable
	// would show what the masks hide in it): they must exist first.
	for _, f := range []string{e.agentLog, e.pidFile} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	specs := []dispatch.AgentSpec{
		{Name: "fake", Command: []string{bin}, Enabled: true},
		{Name: "auth", Command: []string{bin, "auth"}, Enabled: true},
		// Named for their login hints, without the real agents' profiles,
		// which would refuse them: they are not the adapters they name.
		{Name: "claude", Command: []string{bin, "auth"}, Enabled: true, Profiles: []*hardening.Profile{}},
		{Name: "codex", Command: []string{bin, "auth-init"}, Enabled: true, Profiles: []*hardening.Profile{}},
		{Name: "modes", Command: []string{bin, "modes"}, Enabled: true},
		{Name: "hang", Command: []string{bin, "hang"}, Enabled: true},
		{Name: "hanginit", Command: []string{bin, "hang-init"}, Enabled: true},
		{Name: "hangnew", Command: []string{bin, "hang-new"}, Enabled: true},
		{Name: "v2", Command: []string{bin, "v2"}, Enabled: true},
		{Name: "missing", Command: []string{filepath.Join(dir, "no-such-agent")}, Enabled: true},
		{Name: "off", Command: []string{bin}, Enabled: false},
		{Name: "served", Command: []string{bin}, Enabled: true, MCPServers: []dispatch.MCPServer{
			{Name: "hai", Command: []string{"hai-mcp", "serve"}, Env: map[string]string{"K": "v"}}}},
		// Agents under test profiles (hardening_test.go).
		{Name: "guarded", Command: []string{bin, "modes"}, Enabled: true, Profiles: []*hardening.Profile{planProfile(true)}},
		{Name: "lazy", Command: []string{bin, "modes"}, Enabled: true, Profiles: []*hardening.Profile{planProfile(false)}},
		{Name: "stubborn", Command: []string{bin, "modes-refuse"}, Enabled: true, Profiles: []*hardening.Profile{planProfile(true)}},
		{Name: "fragile", Command: []string{bin, "modes-die"}, Enabled: true, Profiles: []*hardening.Profile{planProfile(true)}},
		{Name: "modeless", Command: []string{bin, "nomodes"}, Enabled: true, Profiles: []*hardening.Profile{planProfile(true)}},
		{Name: "optioned", Command: []string{bin, "options"}, Enabled: true, Profiles: []*hardening.Profile{{
			Name: "test-options", VerifiedOn: []string{"9.9"},
			Rules: map[model.Mode]hardening.Rule{model.ModeReadOnly: {
				Options: []hardening.OptionPin{{ID: "mode", Value: "plan"}}, Env: []string{"FAKEAGENT_PROFILE_ENV=on"},
				Summary: "option mode plan"}},
		}}},
	}
	e.reg = dispatch.NewRegistry(specs, nil, nil)
	o := dispatch.Options{
		Registry: e.reg, Home: e.home, CancelGrace: time.Second, SandboxExec: []string{dispatchtest.BuildShim(tb), sandbox.ExecCommand},
		Env: []string{"FAKEAGENT_LOG=" + e.agentLog, "FAKEAGENT_PIDFILE=" + e.pidFile},
		OnProbe: func(name string, p dispatch.Probe) {
			e.probesMu.Lock()
			e.probes[name] = p
			e.probesMu.Unlock()
		},
	}
	sandboxWritable(&o, e.agentLog, e.pidFile)
	for _, f := range tweak {
		f(&o)
	}
	e.d = dispatch.New(o)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.d.Stop(ctx); err != nil {
			tb.Errorf("stop: %v", err)
		}
		e.assertAgentsDead(tb)
	})
	return e
}

var taskSeq struct {
	sync.Mutex
	n int
}

func (e *env) task(target, prompt string, mode model.Mode) model.Task {
	taskSeq.Lock()
	taskSeq.n++
	id := "T-" + strconv.Itoa(taskSeq.n)
	taskSeq.Unlock()
	return model.Task{ID: id, Target: target, Prompt: prompt, Mode: mode, Cwd: e.cwd, State: model.StateAuthorized}
}

// run dispatches one task and waits for its outcome; it checks that every
// agent process the env started is dead by then.
func (e *env) run(tb testing.TB, t model.Task) (model.Outcome, *recorder) {
	tb.Helper()
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), t, r); err != nil {
		tb.Fatalf("dispatch: %v", err)
	}
	out := r.waitFinished(tb)
	e.assertAgentsDead(tb)
	return out, r
}

// events returns the fake agent's recorded events of a kind ("" for all).
func (e *env) events(tb testing.TB, kind string) []map[string]any {
	tb.Helper()
	f, err := os.Open(e.agentLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			tb.Fatalf("agent log line %q: %v", sc.Text(), err)
		}
		if kind == "" || m["event"] == kind {
			out = append(out, m)
		}
	}
	return out
}

// assertAgentsDead checks that every fake agent process that ever started
// in this env is gone.
func (e *env) assertAgentsDead(tb testing.TB) {
	tb.Helper()
	for _, ev := range e.events(tb, "start") {
		if pid := hostPID(ev); pid != 0 {
			waitDead(tb, pid, "agent")
		}
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// state is the field after the parenthesised command name
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func waitDead(tb testing.TB, pid int, what string) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("%s pid %d is still alive", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantOutcome(tb testing.TB, out model.Outcome, state model.State, code model.Code) {
	tb.Helper()
	if out.State != state || out.Code != code {
		tb.Fatalf("outcome = %s/%s (%q), want %s/%s", out.State, out.Code, out.Message, state, code)
	}
}

// grandchild waits for the fake agent's `grandchild` behaviour to write its
// child's pid and returns it.
func (e *env) grandchild(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(e.pidFile)
		if pid := dispatchtest.HostPID(string(b)); pid != 0 {
			return pid
		}
		if len(b) > 0 && time.Now().After(deadline.Add(-9*time.Second)) {
			// Reported, and gone already (a run that ended at once, with
			// its sandbox): a pid no process has.
			return goneOrNeverPID
		}
		if time.Now().After(deadline) {
			t.Fatal("no grandchild pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hostPID returns the host's pid of the process a fake agent's event was
// written by (it reports its sandbox's pid and its start time), or 0 when
// it is gone.
func hostPID(ev map[string]any) int {
	start, _ := ev["start"].(float64)
	ns, _ := ev["pidns"].(string)
	return dispatchtest.HostPIDOf(int(ev["pid"].(float64)), uint64(start), ns)
}

// goneOrNeverPID is above any pid_max: no process has it.
const goneOrNeverPID = 1 << 30
