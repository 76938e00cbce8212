package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

// relay daemon status reports the daemon and its tasks; relay daemon stop
// stops it as SIGTERM does (the running task fails dispatch_interrupted,
// the queued one stays submitted) and waits until it is gone; with no
// daemon, stop is a success that says so and status is daemon_unavailable.
func TestDaemonStatusAndStop(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", "[limits]\nmax_dispatch = 1\n"))
	d := launchDaemon(t, home)
	c := apiClient(home)
	cwd := t.TempDir()
	running := submitGated(t, c, "hang", cwd)
	awaitWorking(t, c, running)
	queued := submitGated(t, c, "echo queued", cwd)
	c.CloseIdleConnections()

	var st socketapi.DaemonStatus
	cliJSON(t, home, &st, "daemon", "status")
	if st.PID != d.cmd.Process.Pid || st.Home != home || st.Version == "" || st.StartedAt.IsZero() ||
		st.TasksRunning != 1 || st.TasksQueued != 1 || st.Autostarted || st.IdleTimeout != "" || st.Facades == nil {
		t.Fatalf("status %+v, want pid %d, home %s, 1 running, 1 queued, started by hand", st, d.cmd.Process.Pid, home)
	}
	out, errOut, code := cli(t, home, "daemon", "status")
	if code != 0 || !strings.Contains(out, "relay daemon running on "+home) || !strings.Contains(out, "1 running, 1 queued") ||
		!strings.Contains(out, "started by:  hand") {
		t.Fatalf("daemon status: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = cli(t, home, "daemon", "stop")
	if code != 0 || !strings.Contains(out, "stopped in") || !strings.Contains(errOut, "stopping the relay daemon on "+home) {
		t.Fatalf("daemon stop: exit %d\n%s%s", code, out, errOut)
	}
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		t.Fatal("relay daemon stop returned but the daemon still runs")
	}
	if d.err != nil {
		t.Errorf("the stopped daemon exited with %v\n%s", d.err, d.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(home, "relay.sock")); !os.IsNotExist(err) {
		t.Errorf("socket left after relay daemon stop: %v", err)
	}
	if !strings.Contains(d.stderr.String(), "reason=operator") {
		t.Errorf("the daemon's log does not say an operator stopped it:\n%s", d.stderr.String())
	}
	db := openRO(t, home)
	var state, taskCode string
	if err := db.QueryRow(`SELECT state, code FROM tasks WHERE id = ?`, running).Scan(&state, &taskCode); err != nil {
		t.Fatal(err)
	}
	if state != "failed" || taskCode != string(model.CodeDispatchInterrupted) {
		t.Errorf("running task after relay daemon stop: %s/%s, want failed/dispatch_interrupted (as SIGTERM)", state, taskCode)
	}
	if err := db.QueryRow(`SELECT state FROM tasks WHERE id = ?`, queued).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "submitted" {
		t.Errorf("queued task after relay daemon stop: %s, want submitted (it runs after the restart)", state)
	}

	// Stopping again: nothing runs, which is what stop wants.
	out, errOut, code = cli(t, home, "daemon", "stop")
	if code != 0 || !strings.Contains(out, "no relay daemon was running on "+home) {
		t.Fatalf("second daemon stop: exit %d\n%s%s", code, out, errOut)
	}
	var res map[string]any
	cliJSON(t, home, &res, "daemon", "stop")
	if res["was_running"] != false || res["home"] != home {
		t.Fatalf("daemon stop --json with none running: %v", res)
	}
	// Status with none running: daemon_unavailable, exit 5, in words and
	// as JSON.
	_, errOut, code = cli(t, home, "daemon", "status")
	if code != 5 || !strings.Contains(errOut, "relay: daemon_unavailable: no relay daemon is running on "+home) ||
		!strings.Contains(errOut, "hint: start one with `relay daemon --home "+home+"`") {
		t.Fatalf("daemon status with none running: exit %d\n%s", code, errOut)
	}
	out, _, code = cli(t, home, "daemon", "status", "--json")
	var e map[string]string
	if code != 5 || json.Unmarshal([]byte(out), &e) != nil || e["code"] != "daemon_unavailable" || e["hint"] == "" {
		t.Fatalf("daemon status --json with none running: exit %d\n%s", code, out)
	}
}

// idleConfig makes an autostarted daemon exit after 2 s with nothing to do.
const idleConfig = "[daemon]\nidle_timeout = \"2s\"\n"

// launchAutostarted runs `relay daemon --autostarted` as autostart does.
func launchAutostarted(t *testing.T, home string) *daemonProc {
	t.Helper()
	cmd := exec.Command(relayBin, "daemon", "--home", home, "--autostarted")
	cmd.Env = append(os.Environ(), fastExit...)
	return runDaemonCmd(t, home, cmd)
}

// An autostarted daemon with nothing to do exits after [daemon]
// idle_timeout; one started by hand, or with idle_timeout = "0", does not.
func TestDaemonIdleExit(t *testing.T) {
	t.Parallel()
	t.Run("autostarted and idle", func(t *testing.T) {
		t.Parallel()
		home := newHome(t, idleConfig)
		d := launchAutostarted(t, home)
		// Looking at it does not keep it up.
		deadline := time.Now().Add(20 * time.Second)
	wait:
		for {
			select {
			case <-d.done:
				break wait
			case <-time.After(300 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("an idle autostarted daemon still runs after 20 s with idle_timeout 2s\n%s", d.stderr.String())
			}
			cli(t, home, "daemon", "status")
		}
		if d.err != nil || !strings.Contains(d.stderr.String(), "reason=idle") {
			t.Fatalf("idle exit: %v\n%s", d.err, d.stderr.String())
		}
		if _, err := os.Stat(filepath.Join(home, "relay.sock")); !os.IsNotExist(err) {
			t.Errorf("socket left after the idle exit: %v", err)
		}
	})
	stays := func(t *testing.T, d *daemonProc) {
		t.Helper()
		select {
		case <-d.done:
			t.Fatalf("the daemon exited: %v\n%s", d.err, d.stderr.String())
		case <-time.After(6 * time.Second):
		}
	}
	t.Run("started by hand", func(t *testing.T) {
		t.Parallel()
		stays(t, launchDaemon(t, newHome(t, idleConfig)))
	})
	t.Run("idle_timeout 0", func(t *testing.T) {
		t.Parallel()
		home := newHome(t, "[daemon]\nidle_timeout = \"0\"\n")
		d := launchAutostarted(t, home)
		stays(t, d)
		out, _, _ := cli(t, home, "daemon", "status")
		if !strings.Contains(out, "never exits when idle") {
			t.Errorf("status of an autostarted daemon with idle_timeout 0:\n%s", out)
		}
	})
}

// A daemon a facade autostarted stays while the facade is connected and
// while a task runs, and exits once neither holds it.
func TestDaemonIdleExitWaitsForFacadesAndTasks(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", idleConfig))
	t.Cleanup(func() {
		for _, pid := range daemonsFor(home) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	f := startFacade(t, home, "codex")
	// A tool call: the facade has announced itself (and started the
	// daemon) by the time it is answered.
	mustOK(t, f, "list_agents", nil)
	var pids []int
	t0 := time.Now()
	for pids = daemonsFor(home); len(pids) != 1; pids = daemonsFor(home) {
		if time.Since(t0) > 30*time.Second {
			b, _ := os.ReadFile(filepath.Join(home, "relay.log"))
			t.Fatalf("no autostarted daemon after 30 s (%v); relay.log:\n%s", pids, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status := func() socketapi.DaemonStatus {
		t.Helper()
		var st socketapi.DaemonStatus
		cliJSON(t, home, &st, "daemon", "status")
		return st
	}
	st := status()
	if st.PID != pids[0] || !st.Autostarted || st.IdleTimeout != "2s" || len(st.Facades) != 1 || st.Facades[0].Agent != "codex" {
		t.Fatalf("status of the autostarted daemon: %+v, want pid %d, autostarted, idle 2s, the codex facade", st, pids[0])
	}
	out, _, _ := cli(t, home, "daemon", "status")
	if !strings.Contains(out, "codex (pid ") || !strings.Contains(out, "autostart (exits after 2s idle)") {
		t.Errorf("daemon status:\n%s", out)
	}
	time.Sleep(5 * time.Second)
	if !alive(pids[0]) {
		t.Fatal("the autostarted daemon exited while its facade was connected")
	}

	// A task runs; the facade goes away.
	c := apiClient(home)
	id := submitGated(t, c, "hang", t.TempDir())
	awaitWorking(t, c, id)
	c.CloseIdleConnections()
	f.Close()
	eventually(t, "the facade gone from the status", 30*time.Second, func() bool { return len(status().Facades) == 0 })
	time.Sleep(5 * time.Second)
	if !alive(pids[0]) {
		t.Fatal("the autostarted daemon exited while a task was running")
	}

	// Nothing left: it exits on its own.
	if _, errOut, code := cli(t, home, "tasks", "cancel", id); code != 0 {
		t.Fatalf("cancel: exit %d\n%s", code, errOut)
	}
	eventually(t, "the idle daemon's exit", 30*time.Second, func() bool { return !alive(pids[0]) })
}

// relay daemon stop gives up after --timeout with an error that says what
// to do; the daemon goes on stopping.
func TestDaemonStopTimeout(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	d := launchDaemon(t, home)
	c := apiClient(home)
	id := submitGated(t, c, "hang-ignore-cancel", t.TempDir())
	awaitWorking(t, c, id)
	c.CloseIdleConnections()
	// The agent ignores session/cancel: the stop takes the cancel grace
	// (3 s) before the agent is killed.
	_, errOut, code := cli(t, home, "daemon", "stop", "--timeout", "500ms")
	if code != 1 || !strings.Contains(errOut, "accepted to stop but is still running after 500ms") ||
		!strings.Contains(errOut, "hint: it may still be stopping running agents") {
		t.Fatalf("daemon stop --timeout 500ms: exit %d\n%s", code, errOut)
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not finish stopping\n%s", d.stderr.String())
	}
	if out, errOut, code := cli(t, home, "daemon", "stop"); code != 0 || !strings.Contains(out, "no relay daemon was running") {
		t.Fatalf("daemon stop after it stopped: exit %d\n%s%s", code, out, errOut)
	}
}
