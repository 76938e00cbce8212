package gates

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// watchExit reports when cmd's process exits without reaping it: waitid with
// WNOWAIT leaves the zombie in place, so its pid, which is also the id of
// its process group, cannot be reused before killGroup runs. reap collects
// the exit status afterwards.
func watchExit(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	ch := make(chan struct{})
	pid := cmd.Process.Pid
	go func() {
		defer close(ch)
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return // exited, or ECHILD: nothing left to wait for
			}
		}
	}()
	return ch, func() error {
		err := cmd.Wait()
		<-ch
		return err
	}
}

// unread returns how many bytes wait unread in the pipe f (FIONREAD, which
// x/sys names TIOCINQ on Linux), 0 when that cannot be known.
func unread(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}
