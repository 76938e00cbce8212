package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "daemon status", summary: "show the home's daemon: pid, version, uptime, tasks running and queued, connected facades, who started it, its PATH and the names of its environment's variables", usage: "[--home DIR] [--json]", setup: daemonStatusCommand})
	register(command{name: "daemon stop", summary: "stop the home's daemon gracefully (as SIGTERM does) and wait until it is gone", usage: "[--home DIR] [--timeout 30s] [--json]", setup: daemonStopCommand})
}

// noDaemon reports whether err says that nothing listens on the socket
// (no socket file, or a stale one), as opposed to a daemon that is there
// but refused or failed.
func noDaemon(err error) bool {
	return model.ErrorCode(err) == model.CodeDaemonUnavailable &&
		(errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED))
}

// notRunning is daemon_unavailable for a home where no daemon runs.
func notRunning(home string, err error) error {
	return &model.Error{Code: model.CodeDaemonUnavailable, Err: err,
		Message: "no relay daemon is running on " + home,
		Hint:    fmt.Sprintf("start one with `relay daemon --home %s` (a facade, `relay mcp`, starts one on demand)", home)}
}

func daemonStatusCommand(f *flags) runFunc {
	return func(ctx context.Context, e *cliIO) error { return runDaemonStatus(ctx, e, f) }
}

func runDaemonStatus(ctx context.Context, e *cliIO, f *flags) error {
	c, home, err := operatorAt(e, f)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.DaemonStatus(ctx)
	if noDaemon(err) {
		return notRunning(home, err)
	}
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e.stdout, st)
	}
	up := time.Duration(st.UptimeSeconds) * time.Second
	fmt.Fprintf(e.stdout, "relay daemon running on %s\n", safeText(st.Home))
	fmt.Fprintf(e.stdout, "  pid:         %d\n", st.PID)
	fmt.Fprintf(e.stdout, "  version:     %s\n", safeText(st.Version))
	fmt.Fprintf(e.stdout, "  started:     %s (up %s)\n", st.StartedAt.Local().Format(time.RFC3339), up)
	fmt.Fprintf(e.stdout, "  tasks:       %d running, %d queued\n", st.TasksRunning, st.TasksQueued)
	var fs []string
	for _, fc := range st.Facades {
		fs = append(fs, fmt.Sprintf("%s (pid %d)", safeText(fc.Agent), fc.PID))
	}
	if len(fs) == 0 {
		fs = []string{"none"}
	}
	fmt.Fprintf(e.stdout, "  facades:     %s\n", strings.Join(fs, ", "))
	switch {
	case !st.Autostarted:
		fmt.Fprintf(e.stdout, "  started by:  hand (never exits when idle; stop it with `relay daemon stop`)\n")
	case st.IdleTimeout == "0s":
		fmt.Fprintf(e.stdout, "  started by:  autostart (never exits when idle: [daemon] idle_timeout = \"0\")\n")
	default:
		fmt.Fprintf(e.stdout, "  started by:  autostart (exits after %s idle)\n", safeText(st.IdleTimeout))
	}
	by := st.StartedBy
	switch {
	case by.By == "autostart" && by.Agent != "":
		fmt.Fprintf(e.stdout, "  started from: the facade of %s (pid %d) in %s\n", safeText(by.Agent), by.PID, safeText(by.Cwd))
	case by.By != "":
		fmt.Fprintf(e.stdout, "  started from: pid %d in %s (the daemon runs in its home)\n", by.PID, safeText(by.Cwd))
	}
	where := map[string]string{
		pathFromConfig:  "[daemon] path in config.toml",
		pathFromPinned:  "pinned in " + filepath.Join(st.Home, pinnedPathFile),
		pathFromDefault: "the default: none pinned; start the daemon once by hand to pin your shell's",
	}[st.PathSource]
	fmt.Fprintf(e.stdout, "  path:        %s (%s)\n", safeText(st.Path), safeText(where))
	for _, sk := range st.PathSkipped {
		fmt.Fprintf(e.stdout, "  skipped:     %s: %s\n", safeText(sk.Entry), safeText(sk.Reason))
	}
	fmt.Fprintf(e.stdout, "  environment: %s (names only)\n", safeText(strings.Join(st.Env, " ")))
	if len(st.EnvRemoved) > 0 {
		fmt.Fprintf(e.stdout, "  removed:     %s (code-loading: nothing the daemon starts gets them)\n", safeText(strings.Join(st.EnvRemoved, " ")))
	}
	return nil
}

// stopResult is the --json answer of relay daemon stop.
type stopResult struct {
	Home       string `json:"home"`
	WasRunning bool   `json:"was_running"`
	PID        int    `json:"pid,omitempty"`
	// TookMS is how long the daemon took to stop, from the request to its
	// process being gone.
	TookMS int64 `json:"took_ms,omitempty"`
}

// runDaemonStop stops the home's daemon the way SIGTERM does and waits
// until its process is gone. With no daemon running there is nothing to
// do, and that is success: stop is idempotent (exit 0, "no relay daemon
// was running").
func daemonStopCommand(f *flags) runFunc {
	timeout := f.Duration("timeout", 30*time.Second, "how long to wait for the daemon to be gone")
	return func(ctx context.Context, e *cliIO) error { return runDaemonStop(ctx, e, f, timeout) }
}

func runDaemonStop(ctx context.Context, e *cliIO, f *flags, timeout *time.Duration) error {
	if *timeout <= 0 {
		return f.usageError("--timeout %s is not a positive duration", *timeout)
	}
	c, home, err := operatorAt(e, f)
	if err != nil {
		return err
	}
	t0 := time.Now()
	a, err := c.StopDaemon(ctx)
	c.Close() // its only call: the daemon's drain need not wait for this connection
	if noDaemon(err) {
		if f.json {
			return printJSON(e.stdout, stopResult{Home: home})
		}
		fmt.Fprintf(e.stdout, "no relay daemon was running on %s\n", safeText(home))
		return nil
	}
	if err != nil {
		return err
	}
	if !f.json {
		fmt.Fprintf(e.stderr, "stopping the relay daemon on %s (pid %d)…\n", safeText(home), a.PID)
	}
	deadline := t0.Add(*timeout)
	nextNote := time.Now().Add(5 * time.Second)
	for socketapi.ProcessAlive(a.PID) {
		now := time.Now()
		if now.After(deadline) {
			return &model.Error{Code: model.CodeInternal,
				Message: fmt.Sprintf("the relay daemon on %s (pid %d) accepted to stop but is still running after %s", home, a.PID, *timeout),
				Hint: fmt.Sprintf("it may still be stopping running agents: wait and run `relay daemon status --home %s`; see %s/relay.log; "+
					"as a last resort `kill %d` (SIGTERM, the same graceful stop), then `kill -9 %d` (the next start recovers)", home, home, a.PID, a.PID)}
		}
		if !f.json && now.After(nextNote) {
			fmt.Fprintf(e.stderr, "still stopping after %s (running agents are stopped, queued tasks stay queued)…\n", now.Sub(t0).Round(time.Second))
			nextNote = now.Add(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	took := time.Since(t0)
	if f.json {
		return printJSON(e.stdout, stopResult{Home: home, WasRunning: true, PID: a.PID, TookMS: max(took.Milliseconds(), 1)})
	}
	fmt.Fprintf(e.stdout, "relay daemon on %s (pid %d) stopped in %s\n", safeText(home), a.PID, took.Round(time.Millisecond))
	return nil
}
