// Package agentshim is the shim: a small process between the relay and a
// child it runs outside a sandbox (the authority adapter) that makes sure
// no descendant of the child outlives it. (Agents no longer use it: each
// runs in the sandbox's pid namespace, which the kernel empties when the
// run ends; package dispatch/sandbox. The names below say "agent" for the
// child.)
//
// An agent's descendant can leave the agent's process group (setsid) and
// drop the relay's environment tag; a group kill and the next daemon's
// Reap then miss it. The shim calls prctl(PR_SET_CHILD_SUBREAPER), so every
// orphaned descendant of the agent reparents to the shim instead of init,
// whatever its session, group or environment. When the agent exits, or the
// shim is told to stop (SIGTERM, SIGINT or SIGHUP: the dispatcher's kill,
// or the parent-death signal when the daemon dies), the shim SIGKILLs every
// child it has, reaps it, and repeats until it has no child left: each dead
// process's own children reparent to the shim before it can be reaped, so
// the loop ends only when the agent's whole tree is gone. It then exits
// the way the agent did (same exit status, or killed by the same signal).
//
// The shim does not relay bytes: the agent gets the shim's stdin, stdout
// and stderr, and the shim keeps only stderr (for its own error lines).
// When started with fd 3 open, it reports the agent's pid, or why the
// agent could not be started, on fd 3 ("pid N\n" or "error: ...\n") and
// closes it. The authority adapter runs under the same shim without one.
//
// The relay binary runs it as a hidden subcommand (Command); dispatch's
// tests build it as cmd/testfakes/agentshim.
package agentshim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/dispatch/procstat"
)

// Command is the relay's hidden subcommand that runs Main.
const Command = "__agent-shim"

// Exit runs Main and ends the process with its code through syscall.Exit,
// which runs no exit hooks: the shim has nothing to flush, and the race
// detector's exit hook sleeps a second (GORACE atexit_sleep_ms) that a
// race-enabled build would otherwise add to every run's teardown.
func Exit(args []string) {
	syscall.Exit(Main(args))
}

// Main runs the shim: args are PATH ARGV0 [ARGS...], the agent's resolved
// executable and its argv. It returns the exit code when the agent exited
// normally; when the agent was killed by a signal, Main kills the shim with
// the same signal where it can.
func Main(args []string) int {
	// The agent gets Pdeathsig SIGKILL from the shim, and Linux sends it
	// when the forking *thread* ends: pin this goroutine (which lives until
	// the shim exits) to its thread, and fork from it.
	runtime.LockOSThread()
	// fd 3 is the report pipe when the parent passed one (the dispatcher
	// does; the authority adapter's client does not): a started process
	// holds no descriptor above 2 that its parent did not pass.
	var report *os.File
	if _, err := unix.FcntlInt(3, unix.F_GETFD, 0); err == nil {
		report = os.NewFile(3, "report")
		syscall.CloseOnExec(3) // never inherited by the agent
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintln(os.Stderr, "relay agent shim:", msg)
		if report != nil {
			fmt.Fprintf(report, "error: %s\n", msg)
			_ = report.Close()
		}
		return 127
	}
	if len(args) < 2 {
		return fail("usage: %s PATH ARGV0 [ARGS...]", Command)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	agent, err := os.StartProcess(args[0], args[1:], &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail("start %s: %v", args[0], err)
	}
	pid := agent.Pid
	if report != nil {
		fmt.Fprintf(report, "pid %d\n", pid)
		_ = report.Close()
	}
	// Keep no copy of the agent's stdin and stdout: the dispatcher sees
	// EOF on stdout when the agent's tree closes it, not when the shim does.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		_ = unix.Dup2(int(null.Fd()), 0)
		_ = unix.Dup2(int(null.Fd()), 1)
		_ = null.Close()
	}

	status := waitAgent(pid, sigs)
	if st, ok := sweep(pid); ok {
		status = st
	}
	signal.Stop(sigs)
	return exitLike(status)
}

// waitAgent reaps children until the agent (pid) exits, and returns its
// wait status; a stop signal (SIGTERM, SIGINT, SIGHUP) ends the wait at
// once (the sweep then kills the agent). The other children it reaps are
// orphans of the agent that ended by themselves.
func waitAgent(pid int, sigs <-chan os.Signal) syscall.WaitStatus {
	var status syscall.WaitStatus
	for {
		if sig := <-sigs; sig != syscall.SIGCHLD {
			return status
		}
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || got <= 0 {
				break
			}
			if got == pid {
				return ws
			}
		}
	}
}

// exitLike ends the way status says the agent did: its exit code, or
// killed by the same signal (128+N when the runtime survives it).
func exitLike(status syscall.WaitStatus) int {
	switch {
	case status.Exited():
		return status.ExitStatus()
	case status.Signaled():
		sig := status.Signal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond) // a signal the runtime does not die of
		return 128 + int(sig)
	}
	return 1
}

// sweep SIGKILLs every child of the shim (the agent, if it still runs, and
// every orphan that reparented to the shim), reaps it, and repeats until
// the shim has no child left. It returns the agent's wait status when it
// reaped the agent.
func sweep(agent int) (syscall.WaitStatus, bool) {
	self := os.Getpid()
	var agentStatus syscall.WaitStatus
	reaped := false
	for {
		for _, c := range children(self) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case errors.Is(err, syscall.ECHILD):
			return agentStatus, reaped
		case err != nil:
			// Cannot happen with valid arguments; do not spin.
			time.Sleep(10 * time.Millisecond)
		case got == agent:
			agentStatus, reaped = ws, true
		}
	}
}

// children lists the shim's children: from /proc/self/task/*/children
// (each thread's children, reparented orphans included), or, where the
// kernel lacks that file (CONFIG_PROC_CHILDREN), from every /proc/<pid>/stat
// whose parent is self. A child's pid cannot be reused until the shim reaps
// it, so killing one is safe.
func children(self int) []int {
	if out, ok := taskChildren(); ok {
		return out
	}
	return scanChildren(self)
}

func taskChildren() ([]int, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, false
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // a thread that just ended
			}
			return nil, false
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil && pid > 0 {
				out = append(out, pid)
			}
		}
	}
	return out, len(tasks) > 0
}

func scanChildren(ppid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PPID == ppid {
			out = append(out, pid)
		}
	}
	return out
}
