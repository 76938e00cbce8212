package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// watchExit closes exited once the leader has exited.
//
// It waits on a pidfd through the runtime's poller, not in a blocking
// waitid: a goroutine blocked in a system call keeps its P until sysmon
// takes it back, which it does only after 10 ms while another P is idle,
// and otherwise at its next tick (its sleep grows to 10 ms when the
// process is quiet). Started with an agent, the blocking wait could hold
// one of a 2-CPU daemon's two Ps through the agent's start-up and ACP
// handshake, leaving the session, the SDK's reader and the rest of the
// daemon the other one; it also cost a thread per running child. The
// blocking waitid remains as the fallback where pidfds cannot be polled
// (Linux before 5.10).
func (p *Process) watchExit() {
	defer close(p.exited)
	if pollExit(p.pid) {
		return
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return // exited, or ECHILD: nothing left to wait for
		}
	}
}

// pollExit waits until the child pid has exited, through a pidfd in the
// runtime's poller. It returns false, at once or after a failure while
// waiting, when that cannot be done: the caller then waits the old way.
// WNOWAIT leaves the child a zombie either way, so its pid (and process
// group id) stay ours until Reap.
func pollExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd") // nonblocking: registered with the poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	// A pidfd polls readable once its process has exited; the check
	// itself is a waitid that never blocks.
	return rc.Read(func(fd uintptr) bool {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false // not exited yet, said the other way
			case err != nil:
				return true // as the blocking wait: nothing left to wait for
			}
			return info.Signo != 0 // zero: not exited yet (WNOHANG)
		}
	}) == nil
}
