package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/agentshim"
	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/dispatch/supervisor"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/machine/service"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
)

func init() {
	register(command{name: "daemon", summary: "run the relay daemon for a home (socket, engine, dispatcher)", usage: "[--home DIR] [--pin-path] [--autostarted]", setup: daemonCommand, noJSON: true})
}

func sockPath(home string) string { return filepath.Join(home, "relay.sock") }

func daemonCommand(f *flags) runFunc {
	auto := f.Bool("autostarted", false, "mark the daemon as started on demand (what a facade's autostart passes): it exits after [daemon] idle_timeout with no facade connected and no task running or queued, "+
		"and takes only the locale, the time zone and [daemon] env from the environment it is started with")
	repin := f.Bool("pin-path", false, "pin this shell's PATH as the one agent commands resolve through (the first start by hand does it; this replaces it)")
	byAgent := f.String("by-agent", "", "the agent of the facade that autostarts the daemon (set by autostart)")
	byPID := f.Int("by-pid", 0, "the pid of the facade that autostarts the daemon (set by autostart)")
	byCwd := f.String("by-cwd", "", "the working directory of the facade that autostarts the daemon (set by autostart)")
	for _, n := range []string{"by-agent", "by-pid", "by-cwd"} {
		_ = f.MarkHidden(n)
	}
	return func(ctx context.Context, e *cliIO) error {
		return runDaemon(ctx, e, f, auto, repin, byAgent, byPID, byCwd)
	}
}

func runDaemon(ctx context.Context, e *cliIO, f *flags, auto *bool, repin *bool, byAgent *string, byPID *int, byCwd *string) error {
	if *repin && *auto {
		return f.usageError("--pin-path pins the PATH of a start by hand; a daemon a facade starts (--autostarted) never pins one")
	}
	home, err := resolveHome(f.home, e.getenv)
	if err != nil {
		return err
	}
	by := socketapi.StartedBy{By: "hand", PID: os.Getppid()}
	by.Cwd, _ = os.Getwd()
	if *auto {
		by.By, by.Agent = "autostart", *byAgent
		if *byPID > 0 {
			by.PID = *byPID
		}
		if *byCwd != "" {
			by.Cwd = *byCwd
		}
	}
	d := &daemon{home: home, stderr: e.stderr, autostarted: *auto, repin: *repin, startedBy: by, ownProcess: true}
	return d.run(ctx)
}

// daemon is one running relay daemon: everything it started, stopped in
// reverse order.
type daemon struct {
	home   string
	stderr io.Writer
	log    *slog.Logger
	// autostarted: a facade started this daemon on demand; it exits when
	// idle (idleWatch), and takes little of its environment
	// (daemonenv.go).
	autostarted bool
	// env is the environment the daemon runs with (environment).
	env daemonEnviron
	// repin: relay daemon --pin-path.
	repin     bool
	startedBy socketapi.StartedBy
	// ownProcess: the daemon is this process (relay daemon), whose
	// environment and working directory become the daemon's
	// (daemonenv.go). A daemon run inside another program (a benchmark)
	// leaves that program's alone.
	ownProcess bool
}

// run runs the daemon until ctx ends, an operator or the idle watch asks
// it to stop, or the socket server fails. It starts in phases, each
// returning what the next needs and how to close it, and stops in the
// reverse order: open the home (lock, log), load the config, open the
// store, wire the core (registry, dispatcher, authority, engine,
// service), recover, serve; then drain, stop the dispatcher and the
// engine, and close what the phases opened, the store before the home.
func (d *daemon) run(ctx context.Context) (err error) {
	h, err := d.openHome()
	if err != nil {
		return err
	}
	defer h.close()
	// From here on a refusal to start is in relay.log too, with its code,
	// message and hint, not only on the stderr of whoever started the
	// daemon (autostart discards it). Only in the file: stderr gets it
	// once, from the command's error.
	ready := false
	defer func() {
		if err != nil && !ready {
			logStartFailure(h.fileLog, err)
		}
	}()
	cfg, path, shim, err := d.loadConfig()
	if err != nil {
		return err
	}
	db, closeStore, err := d.openStore(ctx, h.lock, cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	c, err := d.wireCore(ctx, db, cfg, path, shim)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.eng.Start(ctx); err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	s, err := d.serve(ctx, db, c, cfg, path)
	if err != nil {
		return err
	}
	defer s.close()
	d.log.Info("relay daemon ready", "home", d.home, "socket", sockPath(d.home), "pid", os.Getpid(), "version", Version)
	h.logFile.startupDone()
	ready = true

	err = d.waitForStop(ctx, s)
	d.stop(ctx, c, s)
	return err
}

// openedHome is the home the daemon runs on, opened: its single-instance
// lock and its log.
type openedHome struct {
	lock    *homeLock
	logFile *rotatingLog
	// fileLog writes to relay.log only.
	fileLog *slog.Logger
}

// close closes the log, then lets the lock go.
func (h *openedHome) close() {
	h.logFile.Close()
	h.lock.release()
}

// openHome secures the home, takes its lock and opens its log, which it
// makes the daemon's (d.log: stderr and relay.log). Before anything in
// the home is opened, read or run, the home must be ours and private,
// and so must every file of ours in it (a link or another user's file
// planted there is refused, untouched).
func (d *daemon) openHome() (*openedHome, error) {
	_, fix, err := secureHome(d.home, true, model.CodeInvalidArgs)
	if err != nil {
		return nil, err
	}
	if err := checkHomeFiles(d.home, model.CodeInvalidArgs); err != nil {
		return nil, err
	}
	lock, err := lockHome(d.home)
	if err != nil {
		return nil, err
	}
	logFile, err := openRotatingLog(filepath.Join(d.home, "relay.log"), logMaxBytes, logGenerations)
	if err != nil {
		lock.release()
		var me *model.Error
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, homeUnwritable(d.home, "the log", err)
	}
	fileLog := slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})
	d.log = slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(d.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}),
		fileLog,
	))
	if fix != nil {
		d.log.Warn("the relay home was open to group or others; access taken away",
			"home", d.home, "mode_was", fmt.Sprintf("%04o", fix.from), "mode_now", fmt.Sprintf("%04o", fix.to))
	}
	return &openedHome{lock: lock, logFile: logFile, fileLog: slog.New(fileLog)}, nil
}

// loadConfig checks the socket path, reads config.toml, rebuilds the
// daemon's environment and resolves every relative program in the
// config. It returns the config, the daemon's PATH and the shim agents
// and the authority adapter run under.
func (d *daemon) loadConfig() (config.Config, daemonPath, []string, error) {
	// A socket path the kernel cannot take is refused before the database
	// is opened and anything is recovered or run: bind(2) would fail only
	// after recovery, with a bare "invalid argument".
	if err := socketapi.CheckSocketPath(sockPath(d.home)); err != nil {
		return config.Config{}, daemonPath{}, nil, err
	}
	cfg, err := loadHomeConfig(d.home, model.CodeInvalidArgs)
	if err != nil {
		return config.Config{}, daemonPath{}, nil, err
	}
	// The test switches are read before the environment is rebuilt (a
	// release build has none: testswitch.go).
	shim := []string{"/proc/self/exe", agentshim.Command}
	if s := testShim(); s != nil {
		shim = s
	}
	path, err := d.environment(cfg.Daemon)
	if err != nil {
		return config.Config{}, daemonPath{}, nil, err
	}
	// Every relative program is resolved now, once: against the home
	// (config.toml's directory) when it has a slash, through the daemon's
	// PATH (daemonpath.go) when it is a bare name. An agent runs in its
	// task's cwd, where a relative program would otherwise be looked up.
	bare := cfg
	cfg = cfg.ResolveCommands(d.home, path.lookPath)
	d.logResolved(bare, path)
	return cfg, path, shim, nil
}

// openStore opens the database, checking it first if the last daemon did
// not leave it cleanly, and records the start in it. The function it
// returns closes it and, if that succeeds, marks the stop clean in the
// lock file.
func (d *daemon) openStore(ctx context.Context, lock *homeLock, cfg config.Config) (*persistence.DB, func(), error) {
	// A database the last daemon did not leave cleanly (it crashed, or the
	// file changed since) is checked before it is used: a corrupt one is
	// refused, untouched, rather than served until a read hits the damage.
	check := !lock.stoppedClean(dbPath(d.home))
	if fi, err := os.Stat(dbPath(d.home)); err != nil || fi.Size() == 0 {
		check = false // a new database: nothing to check
	}
	t0 := time.Now()
	o := storeLimits(cfg)
	o.Synchronous, o.Check = cfg.Storage.Synchronous, check
	db, err := persistence.Open(ctx, dbPath(d.home), o)
	if err != nil {
		return nil, nil, openError(dbPath(d.home), err)
	}
	if check {
		d.log.Info("checked the database (quick_check), the last stop was not clean", "db", dbPath(d.home),
			"took", time.Since(t0).Round(time.Millisecond))
	}
	closeStore := func() {
		if db.Close() == nil {
			lock.markClean(dbPath(d.home))
		}
	}
	// The database must take writes before anyone is served: a read-only
	// file, or another process holding it (an open transaction, an
	// exclusive lock), makes the daemon refuse to start rather than fail
	// every request later. The row records the start in the audit trail.
	if err := db.Audit(ctx, model.AuditEvent{At: time.Now().UTC(), Kind: "daemon.started", Actor: model.RelayAgent,
		Data: map[string]string{"pid": strconv.Itoa(os.Getpid()), "version": Version}}); err != nil {
		closeStore()
		return nil, nil, &model.Error{Code: model.CodeInternal, Err: err,
			Message: "cannot write to " + dbPath(d.home) + ": " + err.Error(),
			Hint: "another process may hold the database (an open transaction or an exclusive lock), or it or its directory is read-only; " +
				"stop that process or fix the permissions (the file is left as it is), or pass another --home"}
	}
	return db, closeStore, nil
}

// core is the daemon's wired core: the agent registry, the dispatcher,
// the engine and the application service over them.
type core struct {
	registry *dispatch.Registry
	disp     *dispatch.Dispatcher
	eng      *machine.Engine
	svc      *service.Service
	// authStarter starts the authority adapter; it stops last, when no
	// consultation can run any more.
	authStarter *supervisor.Starter
}

// close stops what the core started on its own.
func (c *core) close() { c.authStarter.Stop() }

// wireCore builds the core on the store: the registry with the probes and
// verifications it last saved, the dispatcher (after killing the agents a
// crashed daemon left behind), the authority, the engine and the
// service. It recovers nothing yet: that is the engine's Start.
func (d *daemon) wireCore(ctx context.Context, db *persistence.DB, cfg config.Config, path daemonPath, shim []string) (*core, error) {
	registry := newRegistry(cfg, path.lookPath)
	if err := loadProbes(ctx, db, registry); err != nil {
		return nil, err
	}
	if err := loadVerifications(ctx, db, registry); err != nil {
		return nil, err
	}
	disp := d.newDispatcher(db, registry, cfg, shim)
	// Agents a crashed daemon left behind (an adapter's native child
	// survives Pdeathsig) are killed before recovery fails their tasks.
	if n, err := disp.Reap(ctx); err != nil {
		d.log.Warn("reap left-behind agents", "err", err)
	} else if n > 0 {
		d.log.Warn("killed left-behind agent processes", "count", n)
	}
	// The authority adapter runs under the same shim as agents, so that
	// nothing it starts outlives a consultation or the daemon, with only
	// the environment its config names.
	authStarter := supervisor.NewStarter()
	authority := gates.NewAuthority(cfg.Authority.Command, cfg.Authority.Timeout, gates.WithDir(d.home),
		gates.WithShim(shim...), gates.WithStart(authStarter.Start), gates.WithEnv(cfg.Authority.Environ(os.Getenv)...))
	eng := machine.New(machine.Options{
		Store: db, Dispatcher: disp, Registry: registry,
		Authority:   authority,
		MaxDispatch: cfg.Limits.MaxDispatch, MaxDispatchPerCaller: cfg.Limits.DispatchPerCaller(),
		MaxPromptBytes:     cfg.Limits.MessageBytes,
		MaxDelegationDepth: cfg.Limits.MaxDelegationDepth,
		NotifySubmitter:    true, Logger: d.log,
	})
	svc := service.New(service.Options{
		Engine: eng, Store: db, Messages: db, Registry: registry,
		MessageBytes: cfg.Limits.MessageBytes, Probe: func(ctx context.Context, name string, timeout time.Duration) (model.AgentInfo, error) {
			if timeout <= 0 {
				timeout = cfg.Limits.ProbeTimeout // limits.probe_timeout
			}
			return disp.Probe(ctx, name, timeout)
		}, Verify: verify.New(disp).Run, Logger: d.log,
	})
	return &core{registry: registry, disp: disp, eng: eng, svc: svc, authStarter: authStarter}, nil
}

// newDispatcher builds the dispatcher, which saves probe and verification
// outcomes in the store. Inside its sandbox, each agent is executed by
// this binary's sandbox step (found by its path at start: the sandbox
// cannot see /proc/self/exe).
func (d *daemon) newDispatcher(db *persistence.DB, registry *dispatch.Registry, cfg config.Config, shim []string) *dispatch.Dispatcher {
	o := dispatch.Options{
		Registry: registry, Home: d.home, TaskTimeout: cfg.Limits.TaskTimeout, StartTimeout: cfg.Limits.StartTimeout, Logger: d.log,
		SandboxExec: sandboxExec(shim), Autostarted: d.autostarted,
		OnProbe: func(name string, p dispatch.Probe) {
			if err := db.RecordProbe(context.Background(), persistence.Probe{Name: name, WorkedLive: p.OK, At: p.At, Reason: p.Reason,
				Fingerprint: p.Fingerprint}); err != nil {
				d.log.Error("save probe", "agent", name, "err", err)
			}
		},
		OnVerify: func(v model.Verification) {
			if err := db.RecordVerification(context.Background(), v); err != nil {
				d.log.Error("save verification", "agent", v.Agent, "err", err)
			}
		},
	}
	testDispatchOptions(&o, d.log)
	// Said at start: without the sandbox no task runs.
	if st := sandboxStatus(); st.OK {
		d.log.Info("every agent runs in the sandbox", "layers", st.Layers)
	} else {
		d.log.Warn("the sandbox cannot run here: every task will fail agent_sandbox_unavailable", "problem", st.Problem, "fix", st.Fix)
	}
	return dispatch.New(o)
}

// serving is the daemon serving: its socket server and what runs beside
// it (retention, the idle watch).
type serving struct {
	srv *socketapi.Server
	// served gets the socket server's error when it stops on its own.
	served chan error
	// stopAsked gets why the daemon stops on its own: an operator's
	// `relay daemon stop` (POST /v1/operator/stop) or an idle period.
	stopAsked chan string
	// stopWatch stops the idle watch (a no-op if there is none).
	stopWatch func()
	// stopRetention stops the retention policy between two batches and
	// waits for it.
	stopRetention func()
}

// close stops the idle watch, then the retention policy; the store
// closes after it.
func (s *serving) close() {
	s.stopWatch()
	s.stopRetention()
}

// askStop asks the daemon to stop, for why; a request already made wins.
func (s *serving) askStop(why string) {
	select {
	case s.stopAsked <- why:
	default:
	}
}

// serve pins the PATH if asked, listens on the socket and serves the API
// on it, starts the retention policy and, for an autostarted daemon, the
// idle watch. The PATH a first start by hand pins is written once the
// daemon has opened and recovered its database: a start refused before
// that changes nothing in the home; the socket, which clients wait for,
// comes after it.
func (d *daemon) serve(ctx context.Context, db *persistence.DB, c *core, cfg config.Config, path daemonPath) (*serving, error) {
	if err := d.savePath(path); err != nil {
		return nil, err
	}
	ln, err := socketapi.Listen(sockPath(d.home))
	if err != nil {
		return nil, err
	}
	srv := socketapi.NewServer(c.svc, socketapi.ServerOptions{
		Version: Version, Logger: d.log, KnownAgent: c.registry.Known, ProbeTimeout: cfg.Limits.ProbeTimeout,
		// A facade whose process runs in a task's sandbox acts inside that
		// task, only as its target: the dispatcher knows its sandboxes.
		// Both kinds of refusal are audited, bounded per minute.
		TaskOf:            c.disp.PlaceProcess,
		OnIdentityRefused: (&refusalAudit{store: db, now: time.Now}).identity,
		OnRefused:         (&refusalAudit{store: db, now: time.Now}).record,
	})
	started := time.Now()
	s := &serving{srv: srv, served: make(chan error, 1), stopAsked: make(chan string, 1), stopWatch: func() {}}
	// The retention policy: a pass now, then every hour; stopped (between
	// two batches) before the database closes.
	ret := newRetention(db, cfg, d.home, d.log)
	retCtx, cancelRetention := context.WithCancel(context.WithoutCancel(ctx))
	retDone := make(chan struct{})
	go func() { defer close(retDone); ret.run(retCtx) }()
	s.stopRetention = func() { cancelRetention(); <-retDone }
	srv.ServeDaemon(socketapi.DaemonHooks{
		Status: func(ctx context.Context) (socketapi.DaemonStatus, error) {
			return d.status(ctx, c.eng, cfg, path, started)
		},
		Stop:  func() { s.askStop("operator") },
		Prune: ret.prune,
	})
	go func() { s.served <- srv.Serve(ln) }()
	if d.autostarted && cfg.Daemon.IdleTimeout > 0 {
		watchCtx, stopWatch := context.WithCancel(ctx)
		s.stopWatch = stopWatch
		go d.idleWatch(watchCtx, cfg.Daemon.IdleTimeout, srv, c.eng, s.askStop)
	}
	return s, nil
}

// status is what `relay daemon status` shows of this daemon.
func (d *daemon) status(ctx context.Context, eng *machine.Engine, cfg config.Config, path daemonPath, started time.Time) (socketapi.DaemonStatus, error) {
	st := socketapi.DaemonStatus{PID: os.Getpid(), Home: d.home, Version: Version, StartedAt: started.UTC(),
		UptimeSeconds: int64(time.Since(started) / time.Second), Autostarted: d.autostarted,
		StartedBy: d.startedBy, Path: path.String(), PathSource: path.source, PathPinned: path.pinned,
		PathSkipped: nonNilSlice(path.skipped), Env: nonNilSlice(d.env.names()), EnvRemoved: nonNilSlice(d.env.removed)}
	if d.autostarted {
		st.IdleTimeout = cfg.Daemon.IdleTimeout.String()
	}
	st.Sandbox = sandboxStatus()
	var err error
	if st.TasksRunning, err = eng.Count(ctx, model.StateAuthorized, model.StateWorking); err != nil {
		return st, err
	}
	st.TasksQueued, err = eng.Count(ctx, model.StateSubmitted)
	return st, err
}

// waitForStop waits for a reason to stop: ctx ends (a signal), a stop is
// asked, or the socket server fails, whose error it returns.
func (d *daemon) waitForStop(ctx context.Context, s *serving) error {
	select {
	case <-ctx.Done():
		d.log.Info("stopping", "reason", "signal")
	case why := <-s.stopAsked:
		d.log.Info("stopping", "reason", why)
	case err := <-s.served:
		d.log.Error("socket server stopped", "err", err)
		return err
	}
	return nil
}

// stop is the graceful stop: nothing more is authorized (queued tasks,
// and those still in their gates, stay submitted and run after the
// restart; a slot freed by a stopped run is not handed on), no new
// connections, in-flight requests finish, then running agents are
// stopped (their tasks fail dispatch_interrupted), then the engine.
func (d *daemon) stop(ctx context.Context, c *core, s *serving) {
	c.eng.Quiesce()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(stopCtx); err != nil {
		d.log.Warn("shutdown", "err", err)
	}
	c.disp.Stop(stopCtx)
	if err := c.eng.Stop(stopCtx); err != nil {
		d.log.Warn("engine stop", "err", err)
	}
	d.log.Info("relay daemon stopped")
}

// idleWatch asks the daemon to stop once it has been idle for timeout:
// no facade connected (a facade that announced itself and whose process
// runs; see socketapi.Server.Facades), no request being served, none
// ended within timeout, and no task queued or running. It looks every
// quarter of the timeout (between 100 ms and 15 s), so the daemon stops
// between timeout and 1.25 × timeout after it went idle.
//
// A request may arrive as it decides: idleStop stops serving, looks
// again, and only then stops the daemon (requests held meanwhile are
// answered daemon_unavailable, nothing done) or serves on. So a task
// whose submit was answered is never left queued by an idle exit.
func (d *daemon) idleWatch(ctx context.Context, timeout time.Duration, srv *socketapi.Server, eng *machine.Engine, stop func(string)) {
	tick := time.NewTicker(min(max(timeout/4, 100*time.Millisecond), 15*time.Second))
	defer tick.Stop()
	busySince := time.Now() // the daemon starts busy: whoever started it calls next
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := time.Now()
		inFlight, last := srv.Activity()
		busy := inFlight > 0 || len(srv.Facades()) > 0 || d.tasksPending(ctx, eng)
		if busy {
			busySince = at
			continue
		}
		if last.After(busySince) {
			busySince = last
		}
		idle := at.Sub(busySince)
		if idle < timeout {
			continue
		}
		if !d.idleStop(ctx, srv, eng, at) {
			busySince = time.Now()
			continue
		}
		d.log.Info("idle: no facade connected, no request and no task queued or running", "idle_for", idle.Round(time.Millisecond), "idle_timeout", timeout)
		stop("idle")
		return
	}
}

// idleStop confirms an idle decision taken at at: it holds new requests
// (socketapi.Server.Pause), waits for those being served, and looks
// again. It returns true, still holding them, when nothing happened since
// at (no request began or ended, none is held, no facade, no task queued
// or running); else it serves on (Resume) and returns false.
func (d *daemon) idleStop(ctx context.Context, srv *socketapi.Server, eng *machine.Engine, at time.Time) bool {
	testStep := func() {
		if step := testIdleStep(); step > 0 {
			time.Sleep(step) // a test aims requests at the decision (testswitch.go)
		}
	}
	testStep()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	err := srv.Pause(pctx)
	cancel()
	testStep()
	if err == nil {
		_, last := srv.Activity()
		if !last.After(at) && srv.Held() == 0 && len(srv.Facades()) == 0 && !d.tasksPending(ctx, eng) {
			return true
		}
	}
	srv.Resume()
	d.log.Debug("idle exit called off: a request came as the daemon decided to stop")
	return false
}

// tasksPending reports whether a task is queued or running; a store that
// cannot answer is not proof of idleness.
func (d *daemon) tasksPending(ctx context.Context, eng *machine.Engine) bool {
	n, err := eng.Count(ctx, model.StateSubmitted, model.StateAuthorized, model.StateWorking)
	return err != nil || n > 0
}

// logStartFailure logs why the daemon did not start: the code, message
// and hint the operator sees, and the internal error behind them.
func logStartFailure(log *slog.Logger, err error) {
	attrs := []any{"code", string(model.ErrorCode(err))}
	var me *model.Error
	switch {
	case errors.As(err, &me):
		attrs = append(attrs, "message", me.Message, "hint", me.Hint)
		if me.Err != nil {
			attrs = append(attrs, "err", me.Err.Error())
		}
	default:
		attrs = append(attrs, "err", err.Error())
	}
	log.Error("relay daemon cannot start", attrs...)
}

// newRegistry builds the agent registry from the config; lookPath is the
// daemon's (daemonPath.lookPath), for the configured signal.
func newRegistry(cfg config.Config, lookPath func(string) (string, error)) *dispatch.Registry {
	var specs []dispatch.AgentSpec
	for _, n := range cfg.AgentNames() {
		a, _ := cfg.Agent(n)
		var servers []dispatch.MCPServer
		for _, m := range a.MCPServers {
			servers = append(servers, dispatch.MCPServer{Name: m.Name, Command: m.Command, Env: m.Env})
		}
		specs = append(specs, dispatch.AgentSpec{Name: n, Command: a.Command, Enabled: a.Enabled, EnabledSet: a.EnabledSet, MCPServers: servers,
			RequireVerified: a.RequireVerified, VerifiedWithin: a.VerifiedWithin})
	}
	return dispatch.NewRegistry(specs, lookPath, nil)
}

// loadProbes restores the last probe outcome of each agent.
func loadProbes(ctx context.Context, db *persistence.DB, r *dispatch.Registry) error {
	probes, err := db.Probes(ctx)
	if err != nil {
		return err
	}
	for _, p := range probes {
		r.SetProbe(p.Name, dispatch.Probe{OK: p.WorkedLive, At: p.At, Reason: p.Reason, Fingerprint: p.Fingerprint})
	}
	return nil
}

// loadVerifications restores the last hardening verification of each
// agent.
func loadVerifications(ctx context.Context, db *persistence.DB, r *dispatch.Registry) error {
	vs, err := db.Verifications(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs {
		r.SetVerification(v.Agent, v)
	}
	return nil
}

// lockHome takes the home's single-instance lock. A second daemon on the
// same home fails here, before it touches the socket or the database. The
// lock file holds the running daemon's pid; after a clean stop it holds
// the mark that stop left (see homeLock.markClean), which lockHome reads
// before writing its own pid.
func lockHome(home string) (*homeLock, error) {
	p := filepath.Join(home, "relay.lock")
	f, err := openHomeFile(p, os.O_RDWR|os.O_CREATE, 0o600, model.CodeInvalidArgs)
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return nil, err
		}
		return nil, homeUnwritable(home, "the lock file", err)
	}
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			// The file holds the running daemon's pid, unless whoever
			// holds the lock is not a daemon that wrote one.
			msg := "another relay daemon is running on " + home
			b, _ := os.ReadFile(p)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				msg += fmt.Sprintf(" (pid %d)", pid)
			}
			return nil, &model.Error{Code: model.CodeDaemonAlreadyRunning, Message: msg,
				Hint: fmt.Sprintf("use that daemon (`relay daemon status --home %s` shows it), stop it first with `relay daemon stop --home %s`, or pass another --home", home, home)}
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	prev := make([]byte, 256)
	n, _ := unix.Pread(fd, prev, 0)
	_ = unix.Ftruncate(fd, 0)
	_, _ = unix.Pwrite(fd, []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &homeLock{f: f, prev: string(prev[:max(n, 0)])}, nil
}

// homeLock is the home's single-instance lock, held from start to stop.
type homeLock struct {
	f *os.File
	// prev is what the lock file held before this daemon took it.
	prev string
}

// release lets the lock go.
func (l *homeLock) release() { l.f.Close() }

// cleanMark is what a clean stop leaves in the lock file: the database
// file as that stop left it, fully checkpointed (no WAL).
func cleanMark(db string) (string, bool) {
	var st unix.Stat_t
	if err := unix.Stat(db, &st); err != nil {
		return "", false
	}
	if wal, err := os.Stat(db + "-wal"); err == nil && wal.Size() > 0 {
		return "", false
	}
	return fmt.Sprintf("clean %s size=%d mtime=%d.%09d ino=%d\n", filepath.Base(db), st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ino), true
}

// stoppedClean reports whether the last daemon on this home stopped
// cleanly and nothing changed the database since: the lock file holds its
// clean mark, and the file still matches it (size, modification time,
// inode, and no WAL). A crash leaves the pid instead; any write since
// (another program, a restore, bytes overwritten) changes the mark.
func (l *homeLock) stoppedClean(db string) bool {
	mark, ok := cleanMark(db)
	return ok && l.prev == mark
}

// markClean records a clean stop, once the database is closed (and so
// fully checkpointed, its WAL removed): the next start skips the
// integrity check if the file is still as it was left.
func (l *homeLock) markClean(db string) {
	mark, ok := cleanMark(db)
	if !ok {
		return
	}
	fd := int(l.f.Fd())
	if err := unix.Ftruncate(fd, 0); err != nil {
		return
	}
	if _, err := unix.Pwrite(fd, []byte(mark), 0); err == nil {
		_ = unix.Fsync(fd)
	}
}

// homeUnwritable is the error of a home the daemon cannot write in.
func homeUnwritable(home, what string, err error) error {
	return &model.Error{Code: model.CodeInternal, Err: err,
		Message: fmt.Sprintf("cannot write %s in the relay home %s: %v", what, home, err),
		Hint:    "the daemon needs a home it can write: check its owner and mode (chmod 700 " + home + ") and that its filesystem is not read-only, or pass another --home"}
}

// sandboxExec is the command that applies Landlock inside an agent's
// sandbox and executes the agent: this binary by its path (the sandbox
// cannot resolve /proc/self/exe to it), or a test shim's, which has the
// same subcommand.
func sandboxExec(shim []string) []string {
	exe := shim[0]
	if exe == "/proc/self/exe" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil
		}
	}
	return []string{exe, sandbox.ExecCommand}
}

// sandboxStatus says whether the sandbox every agent runs in can run for
// this daemon (package sandbox; a success is kept a minute).
func sandboxStatus() socketapi.SandboxStatus {
	st := sandbox.Check("bwrap", exec.LookPath)
	out := socketapi.SandboxStatus{OK: st.OK, Problem: st.Problem, Fix: st.Fix}
	if st.OK {
		out.Layers = st.Layers()
	}
	return out
}
