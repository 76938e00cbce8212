package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hai-relay/relay/dispatch/supervisor"
	"github.com/hai-relay/relay/model"
)

// Defaults of Options.
const (
	DefaultTaskTimeout  = 30 * time.Minute
	DefaultStartTimeout = 60 * time.Second
	DefaultCancelGrace  = 3 * time.Second
	DefaultLogLimit     = 1 << 20
	DefaultProbeTimeout = model.DefaultProbeTimeout
)

// Options configures a Dispatcher.
type Options struct {
	// Registry holds the agents' launch specs.
	Registry *Registry
	// Home is the relay home; each task's agent log goes to
	// Home/logs/tasks/<task_id>.log and each probe's to
	// Home/logs/probes/<agent>.log (the last probe's only; dirs 0700,
	// files 0600). While an agent's process group may be alive, its run
	// record is kept in Home/run/agents/<task_id>.json (a probe's in
	// Home/run/probes/), for Reap after a crash. Empty: no logs, no
	// records.
	Home string
	// TaskTimeout bounds a run from spawn to the end of its turn
	// (default 30m): then session/cancel, CancelGrace, kill → task_timeout.
	TaskTimeout time.Duration
	// StartTimeout bounds a task's start-up, from spawn until its session
	// is set up (initialize, session/new and the hardening's mode and
	// options), default 60s: an agent still starting then is killed and
	// the task fails agent_start_timeout, so that an agent that never
	// answers does not hold a dispatch slot for the whole TaskTimeout.
	// Probes and verifications have their own timeouts and no start-up
	// deadline.
	StartTimeout time.Duration
	// CancelGrace is how long a canceled or timed-out turn may take to end
	// after session/cancel before the process group is killed (default 3s).
	CancelGrace time.Duration
	// LogLimit bounds each per-run log file in bytes (default 1 MiB).
	LogLimit int64
	// Logger receives the dispatcher's own log lines (default: discard).
	Logger *slog.Logger
	// Env is appended to the daemon's environment for every agent.
	Env []string
	// Autostarted says the daemon was started by a facade, with an
	// allow-listed environment: a login the agent finds in its
	// environment (an API key) may be missing for that reason alone, and
	// the messages that ask for a login say where to put it.
	Autostarted bool
	// SandboxExec is the command that applies Landlock inside an agent's
	// sandbox and executes the agent (the relay binary's hidden
	// sandbox.ExecCommand; it must be a path the sandbox can see). Empty:
	// no Landlock step.
	SandboxExec []string
	// OnProbe, when set, is called with every recorded probe outcome so
	// the daemon can persist it.
	OnProbe func(name string, p Probe)
	// OnVerify, when set, is called with every recorded hardening
	// verification so the daemon can persist it.
	OnVerify func(v model.Verification)
	// testOptions are the options a test build adds (-tags relaytest;
	// testswitch_relaytest.go); in a release build it has none.
	//lint:ignore U1000 empty in a release build, used in the test build
	testOptions
}

// Dispatcher is the relay's ACP dispatcher: one agent process per task,
// deny-all permissions, no fs or terminal, bounded in time and output. It
// implements model.Dispatcher.
type Dispatcher struct {
	o       Options
	log     *slog.Logger
	policy  model.DispatchPolicy
	spawner *supervisor.Starter

	mu     sync.Mutex
	closed bool
	runs   map[string]*session   // task id → run
	probes map[*session]struct{} // running probes
	live   map[liveKey]struct{}  // agents whose run record is written
	wg     sync.WaitGroup        // one per run or probe

	recMu sync.Mutex // held while a run record is written, and by Reap while it reads one

	profMu  sync.Mutex
	profDir string // see profileDir

	stopOnce sync.Once
}

var _ model.Dispatcher = (*Dispatcher)(nil)

// New returns a running dispatcher. Call Stop (or Close) to end it.
func New(o Options) *Dispatcher {
	if o.Registry == nil {
		o.Registry = NewRegistry(nil, nil, nil)
	}
	if o.TaskTimeout <= 0 {
		o.TaskTimeout = DefaultTaskTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = DefaultCancelGrace
	}
	if o.LogLimit <= 0 {
		o.LogLimit = DefaultLogLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{
		o: o, log: o.Logger, policy: derivePolicy(), spawner: supervisor.NewStarter(),
		runs: map[string]*session{}, probes: map[*session]struct{}{}, live: map[liveKey]struct{}{},
	}
}

// Policy implements model.Dispatcher. It is derived from the capabilities
// the client advertises and the permission decision it applies (see
// derivePolicy), not stated separately.
func (d *Dispatcher) Policy() model.DispatchPolicy { return d.policy }

// Running returns the number of task runs in progress.
func (d *Dispatcher) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs)
}

func dispatchErr(format string, args ...any) *model.Error {
	return model.Errorf(model.CodeDispatchFailed, format, args...)
}

// Dispatch implements model.Dispatcher: it starts the target's agent for t
// and returns at once; the run reports through r on its own goroutine. An
// error means nothing was started.
func (d *Dispatcher) Dispatch(_ context.Context, t model.Task, r model.RunReporter) error {
	if t.Target == "" {
		return dispatchErr("task %s has no target agent", t.ID)
	}
	spec, ok := d.o.Registry.Spec(t.Target)
	switch {
	case !ok:
		return dispatchErr("no launch spec for agent %q", t.Target).WithHint("add [agents." + t.Target + "] command = [...] to config.toml")
	case !spec.Enabled:
		return dispatchErr("agent %q is disabled", t.Target).WithHint("set enabled = true under [agents." + t.Target + "]")
	case len(spec.Command) == 0 || spec.Command[0] == "":
		return dispatchErr("agent %q has no command", t.Target).WithHint("set [agents." + t.Target + "] command")
	case t.ID == "":
		return dispatchErr("task has no id")
	case !filepath.IsAbs(t.Cwd):
		return dispatchErr("task %s: cwd %q is not an absolute path", t.ID, t.Cwd)
	}
	logDir := ""
	if d.o.Home != "" {
		logDir = filepath.Join(d.o.Home, "logs", "tasks")
	}
	lg, err := openLog(logDir, t.ID, d.o.LogLimit, false)
	if err != nil {
		return &model.Error{Code: model.CodeDispatchFailed, Message: "could not open the task's agent log", Err: err}
	}
	s := newSession(d, spec, t.ID, t.Mode, t.Cwd, promptBlocks(t.Prompt, t.Artifacts), d.o.TaskTimeout, lg)
	s.startTimeout = d.o.StartTimeout

	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		_ = lg.Close()
		return dispatchErr("the dispatcher is stopping")
	}
	if _, dup := d.runs[t.ID]; dup {
		d.mu.Unlock()
		_ = lg.Close()
		return dispatchErr("task %s is already running", t.ID)
	}
	d.runs[t.ID] = s
	d.wg.Add(1)
	d.mu.Unlock()

	if err := s.start(); err != nil {
		d.forget(t.ID)
		d.wg.Done()
		_ = lg.Close()
		d.log.Warn("agent spawn failed", "task_id", t.ID, "agent", t.Target, "err", err)
		hint := "check [agents." + t.Target + "] command and that it is installed on the daemon's PATH"
		if errors.Is(err, errRunRecord) {
			hint = "check that the relay home's run directory is writable"
		}
		if isSandboxErr(err) {
			return sandboxRefusal(t.Target, err)
		}
		return &model.Error{Code: model.CodeDispatchFailed,
			Message: fmt.Sprintf("could not start agent %s (%s): %v", t.Target, spec.Command[0], err),
			Hint:    hint, Err: err}
	}
	d.log.Info("agent started", "task_id", t.ID, "agent", t.Target, "pid", s.p.pid, "mode", t.Mode)
	go d.runTask(s, t.ID, r)
	return nil
}

// profileDir returns the private directory hardening profiles' files are
// written to: Home/profiles (0700), or a temporary directory of the
// dispatcher's own without a Home.
func (d *Dispatcher) profileDir() (string, error) {
	d.profMu.Lock()
	defer d.profMu.Unlock()
	if d.profDir != "" {
		return d.profDir, nil
	}
	var dir string
	var err error
	if d.o.Home != "" {
		dir = filepath.Join(d.o.Home, "profiles")
		err = os.MkdirAll(dir, 0o700)
	} else {
		dir, err = os.MkdirTemp("", "relay-profiles-")
	}
	if err != nil {
		return "", err
	}
	d.profDir = dir
	return dir, nil
}

func (d *Dispatcher) forget(taskID string) {
	d.mu.Lock()
	delete(d.runs, taskID)
	d.mu.Unlock()
}

// runTask drives one task's session and reports it.
func (d *Dispatcher) runTask(s *session, taskID string, r model.RunReporter) {
	defer d.wg.Done()
	defer s.log.Close()
	ctx := context.Background()
	began := time.Now()

	var stopDenials chan struct{}
	var denialsDone chan struct{}
	res := s.drive(func(note string) error {
		if err := r.Started(ctx, taskID, note); err != nil {
			return err
		}
		stopDenials, denialsDone = make(chan struct{}), make(chan struct{})
		go d.reportDenials(ctx, s, taskID, r, stopDenials, denialsDone)
		return nil
	})
	s.teardown()
	out := s.outcome(res)
	if stopDenials != nil {
		close(stopDenials)
		<-denialsDone
	} else {
		for _, dn := range s.client.takeDenials() {
			s.log.Printf("denial before the run started (not reported): %q %s", dn.ToolCallTitle, dn.Outcome)
		}
	}
	s.log.Printf("outcome: %s %s %s", out.State, out.Code, out.Message)
	d.forget(taskID) // the agent is gone: no longer Running once Finished
	if err := r.Finished(ctx, taskID, out); err != nil {
		lvl := slog.LevelWarn
		if c := model.ErrorCode(err); c == model.CodeStaleState || c == model.CodeInvalidTransition {
			lvl = slog.LevelDebug // the task was canceled or failed meanwhile
		}
		d.log.Log(ctx, lvl, "report finished", "task_id", taskID, "err", err)
	}
	d.log.Info("agent run ended", "task_id", taskID, "agent", s.agent, "state", out.State,
		"code", out.Code, "elapsed", time.Since(began).Round(time.Millisecond))
}

// reportDenials reports queued denials in order until stop, then the rest.
func (d *Dispatcher) reportDenials(ctx context.Context, s *session, taskID string, r model.RunReporter, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	flush := func() {
		for _, dn := range s.client.takeDenials() {
			if err := r.Denied(ctx, taskID, dn); err != nil {
				d.log.Warn("report denial", "task_id", taskID, "err", err)
			}
		}
	}
	for {
		flush()
		select {
		case <-s.client.denialSignal:
		case <-stop:
			flush()
			return
		}
	}
}

// Cancel implements model.Dispatcher: session/cancel, CancelGrace, then
// kill; the run reports canceled/canceled_by_submitter. Unknown tasks are
// ignored. It never blocks.
func (d *Dispatcher) Cancel(taskID string) {
	d.mu.Lock()
	s := d.runs[taskID]
	d.mu.Unlock()
	if s != nil {
		s.stop(causeCancel)
	}
}

// Stop stops every run and probe (session/cancel, CancelGrace, kill; runs
// report failed/dispatch_interrupted), waits for them, and ends the
// dispatcher. When ctx ends first, every process group is killed at once.
// It is idempotent; later Dispatch calls fail.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	all := make([]*session, 0, len(d.runs)+len(d.probes))
	for _, s := range d.runs {
		all = append(all, s)
	}
	for s := range d.probes {
		all = append(all, s)
	}
	d.mu.Unlock()
	for _, s := range all {
		s.stop(causeShutdown)
	}
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, s := range all {
			s.kill()
		}
		<-done
	}
	d.stopOnce.Do(d.spawner.Stop)
	return err
}

// Close is Stop without a deadline beyond CancelGrace per run.
func (d *Dispatcher) Close() error { return d.Stop(context.Background()) }
