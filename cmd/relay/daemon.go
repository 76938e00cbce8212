package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/agentshim"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/machine/service"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
)

func init() {
	register(command{name: "daemon", summary: "run the relay daemon for a home (socket, engine, dispatcher)", run: runDaemon, noJSON: true})
}

func sockPath(home string) string { return filepath.Join(home, "relay.sock") }

func runDaemon(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "daemon", "[--home DIR] [--pin-path] [--autostarted]")
	auto := f.Bool("autostarted", false, "mark the daemon as started on demand (what a facade's autostart passes): it exits after [daemon] idle_timeout with no facade connected and no task running or queued, "+
		"and takes only the locale, the time zone and [daemon] env from the environment it is started with")
	repin := f.Bool("pin-path", false, "pin this shell's PATH as the one agent commands resolve through (the first start by hand does it; this replaces it)")
	byAgent := f.String("by-agent", "", "the agent of the facade that autostarts the daemon (set by autostart)")
	byPID := f.Int("by-pid", 0, "the pid of the facade that autostarts the daemon (set by autostart)")
	byCwd := f.String("by-cwd", "", "the working directory of the facade that autostarts the daemon (set by autostart)")
	for _, n := range []string{"by-agent", "by-pid", "by-cwd"} {
		_ = f.MarkHidden(n)
	}
	if err := f.parse(args, 0); err != nil {
		return err
	}
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

func (d *daemon) run(ctx context.Context) (err error) {
	// Before anything in the home is opened, read or run: it must be
	// ours and private, and so must every file of ours in it (a link or
	// another user's file planted there is refused, untouched).
	_, fix, err := secureHome(d.home, true, model.CodeInvalidArgs)
	if err != nil {
		return err
	}
	if err := checkHomeFiles(d.home, model.CodeInvalidArgs); err != nil {
		return err
	}
	lock, err := lockHome(d.home)
	if err != nil {
		return err
	}
	defer lock.release()

	logFile, err := openRotatingLog(filepath.Join(d.home, "relay.log"), logMaxBytes, logGenerations)
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return err
		}
		return homeUnwritable(d.home, "the log", err)
	}
	defer logFile.Close()
	fileLog := slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})
	d.log = slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(d.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}),
		fileLog,
	))
	// From here on a refusal to start is in relay.log too, with its code,
	// message and hint, not only on the stderr of whoever started the
	// daemon (autostart discards it). Only in the file: stderr gets it
	// once, from the command's error.
	ready := false
	defer func() {
		if err != nil && !ready {
			logStartFailure(slog.New(fileLog), err)
		}
	}()
	if fix != nil {
		d.log.Warn("the relay home was open to group or others; access taken away",
			"home", d.home, "mode_was", fmt.Sprintf("%04o", fix.from), "mode_now", fmt.Sprintf("%04o", fix.to))
	}
	// A socket path the kernel cannot take is refused before the database
	// is opened and anything is recovered or run: bind(2) would fail only
	// after recovery, with a bare "invalid argument".
	if err := socketapi.CheckSocketPath(sockPath(d.home)); err != nil {
		return err
	}

	cfg, err := loadHomeConfig(d.home, model.CodeInvalidArgs)
	if err != nil {
		return err
	}
	// The test switches are read before the environment is rebuilt (a
	// release build has none: testswitch.go).
	shim := []string{"/proc/self/exe", agentshim.Command}
	if s := testShim(); s != nil {
		shim = s
	}
	path, err := d.environment(cfg.Daemon)
	if err != nil {
		return err
	}
	// Every relative program is resolved now, once: against the home
	// (config.toml's directory) when it has a slash, through the daemon's
	// PATH (daemonpath.go) when it is a bare name. An agent runs in its
	// task's cwd, where a relative program would otherwise be looked up.
	bare := cfg
	cfg = cfg.ResolveCommands(d.home, path.lookPath)
	d.logResolved(bare, path)
	// A database the last daemon did not leave cleanly (it crashed, or the
	// file changed since) is checked before it is used: a corrupt one is
	// refused, untouched, rather than served until a read hits the damage.
	check := !lock.stoppedClean(dbPath(d.home))
	if fi, err := os.Stat(dbPath(d.home)); err != nil || fi.Size() == 0 {
		check = false // a new database: nothing to check
	}
	t0 := time.Now()
	inboxMessages, inboxBytes, minFree := storeLimits(cfg)
	db, err := persistence.Open(ctx, dbPath(d.home), persistence.Options{Synchronous: cfg.Storage.Synchronous, Check: check,
		InboxMessages: inboxMessages, InboxBytes: inboxBytes, MinFreeBytes: minFree})
	if err != nil {
		return openError(dbPath(d.home), err)
	}
	if check {
		d.log.Info("checked the database (quick_check), the last stop was not clean", "db", dbPath(d.home),
			"took", time.Since(t0).Round(time.Millisecond))
	}
	defer func() {
		if db.Close() == nil {
			lock.markClean(dbPath(d.home))
		}
	}()
	// The database must take writes before anyone is served: a read-only
	// file, or another process holding it (an open transaction, an
	// exclusive lock), makes the daemon refuse to start rather than fail
	// every request later. The row records the start in the audit trail.
	if err := db.Audit(ctx, model.AuditEvent{At: time.Now().UTC(), Kind: "daemon.started", Actor: model.RelayAgent,
		Data: map[string]string{"pid": strconv.Itoa(os.Getpid()), "version": Version}}); err != nil {
		return &model.Error{Code: model.CodeInternal, Err: err,
			Message: "cannot write to " + dbPath(d.home) + ": " + err.Error(),
			Hint: "another process may hold the database (an open transaction or an exclusive lock), or it or its directory is read-only; " +
				"stop that process or fix the permissions (the file is left as it is), or pass another --home"}
	}

	registry := newRegistry(cfg, path.lookPath)
	if err := loadProbes(ctx, db, registry); err != nil {
		return err
	}
	if err := loadVerifications(ctx, db, registry); err != nil {
		return err
	}
	// Agents and the authority adapter run under this very binary's shim
	// (shim, above), even if the file is replaced while the daemon runs:
	// /proc/self/exe is resolved in the forked child.
	disp := dispatch.New(dispatch.Options{
		Registry: registry, Home: d.home, TaskTimeout: cfg.Limits.TaskTimeout, StartTimeout: cfg.Limits.StartTimeout, Logger: d.log,
		Shim: shim,
		OnProbe: func(name string, p dispatch.Probe) {
			if err := db.RecordProbe(context.Background(), persistence.Probe{Name: name, WorkedLive: p.OK, At: p.At, Reason: p.Reason}); err != nil {
				d.log.Error("save probe", "agent", name, "err", err)
			}
		},
		OnVerify: func(v model.Verification) {
			if err := db.RecordVerification(context.Background(), v); err != nil {
				d.log.Error("save verification", "agent", v.Agent, "err", err)
			}
		},
		Unhardened: testUnhardened(d.log),
	})
	// Agents a crashed daemon left behind (an adapter's native child
	// survives Pdeathsig) are killed before recovery fails their tasks.
	if n, err := disp.Reap(ctx); err != nil {
		d.log.Warn("reap left-behind agents", "err", err)
	} else if n > 0 {
		d.log.Warn("killed left-behind agent processes", "count", n)
	}
	// The authority adapter runs under the same shim as agents, so that
	// nothing it starts outlives a consultation or the daemon, with only
	// the environment its config names. Its starter stops last, when no
	// consultation can run any more.
	authStarter := dispatch.NewStarter()
	defer authStarter.Stop()
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
	if err := eng.Start(ctx); err != nil {
		return fmt.Errorf("recovery: %w", err)
	}

	// The PATH a first start by hand pins is written once the daemon has
	// opened and recovered its database: a start refused before that
	// changes nothing in the home; the socket, which clients wait for,
	// comes after it.
	if err := d.savePath(path); err != nil {
		return err
	}
	ln, err := socketapi.Listen(sockPath(d.home))
	if err != nil {
		return err
	}
	srv := socketapi.NewServer(svc, socketapi.ServerOptions{
		Version: Version, Logger: d.log, KnownAgent: registry.Known, ProbeTimeout: cfg.Limits.ProbeTimeout,
		// A facade whose process descends from a running task's agent
		// acts inside that task: the dispatcher knows its agents.
		TaskOf: disp.TaskOfProcess,
		OnRefused: func(ctx context.Context, uid, pid int) {
			_ = db.Audit(ctx, model.AuditEvent{At: time.Now().UTC(), Kind: "socket.refused", Actor: "uid:" + strconv.Itoa(uid),
				Data: map[string]string{"uid": strconv.Itoa(uid), "pid": strconv.Itoa(pid)}})
		},
	})
	started := time.Now()
	// The retention policy: a pass now, then every hour; stopped (between
	// two batches) before the database closes.
	ret := newRetention(db, cfg, d.home, d.log)
	retCtx, stopRetention := context.WithCancel(context.WithoutCancel(ctx))
	retDone := make(chan struct{})
	go func() { defer close(retDone); ret.run(retCtx) }()
	defer func() { stopRetention(); <-retDone }()
	// stopAsked gets why the daemon stops on its own: an operator's
	// `relay daemon stop` (POST /v1/operator/stop) or an idle period.
	stopAsked := make(chan string, 1)
	askStop := func(why string) {
		select {
		case stopAsked <- why:
		default:
		}
	}
	srv.ServeDaemon(socketapi.DaemonHooks{
		Status: func(ctx context.Context) (socketapi.DaemonStatus, error) {
			st := socketapi.DaemonStatus{PID: os.Getpid(), Home: d.home, Version: Version, StartedAt: started.UTC(),
				UptimeSeconds: int64(time.Since(started) / time.Second), Autostarted: d.autostarted,
				StartedBy: d.startedBy, Path: path.String(), PathSource: path.source, PathPinned: path.pinned,
				PathSkipped: nonNilSlice(path.skipped), Env: nonNilSlice(d.env.names()), EnvRemoved: nonNilSlice(d.env.removed)}
			if d.autostarted {
				st.IdleTimeout = cfg.Daemon.IdleTimeout.String()
			}
			var err error
			if st.TasksRunning, err = countTasks(ctx, eng, model.StateAuthorized, model.StateWorking); err != nil {
				return st, err
			}
			st.TasksQueued, err = countTasks(ctx, eng, model.StateSubmitted)
			return st, err
		},
		Stop:  func() { askStop("operator") },
		Prune: ret.prune,
	})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if d.autostarted && cfg.Daemon.IdleTimeout > 0 {
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go d.idleWatch(watchCtx, cfg.Daemon.IdleTimeout, srv, eng, askStop)
	}
	d.log.Info("relay daemon ready", "home", d.home, "socket", sockPath(d.home), "pid", os.Getpid(), "version", Version)
	logFile.startupDone()
	ready = true

	select {
	case <-ctx.Done():
		d.log.Info("stopping", "reason", "signal")
	case why := <-stopAsked:
		d.log.Info("stopping", "reason", why)
	case err = <-served:
		d.log.Error("socket server stopped", "err", err)
	}
	// Graceful stop: nothing more is authorized (queued tasks, and those
	// still in their gates, stay submitted and run after the restart; a
	// slot freed by a stopped run is not handed on), no new connections,
	// in-flight requests finish, then running agents are stopped (their
	// tasks fail dispatch_interrupted).
	eng.Quiesce()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if serr := srv.Shutdown(stopCtx); serr != nil {
		d.log.Warn("shutdown", "err", serr)
	}
	disp.Stop(stopCtx)
	if serr := eng.Stop(stopCtx); serr != nil {
		d.log.Warn("engine stop", "err", serr)
	}
	d.log.Info("relay daemon stopped")
	return err
}

// countTasks counts the tasks in the given states, paging through them.
func countTasks(ctx context.Context, eng *machine.Engine, states ...model.State) (int, error) {
	n := 0
	for _, st := range states {
		f := model.TaskFilter{State: st, Limit: 1000}
		for {
			page, err := eng.List(ctx, f)
			if err != nil {
				return 0, err
			}
			if len(page) == 0 {
				break
			}
			n += len(page)
			f.Before = page[len(page)-1].ID
		}
	}
	return n, nil
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
	n, err := countTasks(ctx, eng, model.StateSubmitted, model.StateAuthorized, model.StateWorking)
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
		r.SetProbe(p.Name, dispatch.Probe{OK: p.WorkedLive, At: p.At, Reason: p.Reason})
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
