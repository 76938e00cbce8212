package socketapi

import (
	"os"

	"golang.org/x/sys/unix"
)

// openPidfd returns a pidfd of process pid (pidfd_open(2), Linux 5.3), or
// nil where there is none (the process is gone, or the kernel is older).
// A pidfd names one process, never a later one given the same pid.
func openPidfd(pid int) *os.File {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "pidfd")
}

// pidfdAlive reports whether the process of pidfd f has not ended (a
// pidfd polls readable once its process exits, as a zombie too); ok is
// false when that cannot be told. The os.File holds the descriptor for
// the poll, so a Close meanwhile cannot hand the number to another file.
func pidfdAlive(f *os.File) (alive, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int
	var perr error
	err = rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, perr = unix.Poll(pfd, 0)
			if perr != unix.EINTR {
				break
			}
		}
		if n == 1 && pfd[0].Revents&unix.POLLNVAL != 0 {
			perr = unix.EBADF
		}
		if n == 1 && pfd[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			n = 0 // woken for nothing it asked for: still running
		}
	})
	if err != nil || perr != nil {
		return false, false
	}
	return n == 0, true
}
