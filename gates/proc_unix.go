//go:build unix

package gates

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// groupAttr starts the adapter (or its shim) as the leader of a new process
// group, so that it and everything it forks in its group can be killed at
// once, with a parent-death signal, so that it never outlives the daemon:
// SIGKILL for the adapter itself, SIGTERM for a shim, which then kills the
// adapter's whole tree (WithShim).
func groupAttr(shim bool) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if shim {
		sig = syscall.SIGTERM
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

// shimStopWait bounds how long stopShim waits for a shim told to stop.
const shimStopWait = 5 * time.Second

// stopShim tells the shim led by pid to kill the adapter's whole tree
// (SIGTERM) and waits until it has exited, at most shimStopWait; exited is
// the shim's watchExit channel. The caller's killGroup follows in any case.
func stopShim(pid int, exited <-chan struct{}) {
	_ = unix.Kill(pid, unix.SIGTERM)
	t := time.NewTimer(shimStopWait)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
	}
}

// killGroup sends SIGKILL to every process of the group led by pid. A group
// that no longer exists (ESRCH) is not an error.
func killGroup(pid int) {
	if pid > 0 {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
}
