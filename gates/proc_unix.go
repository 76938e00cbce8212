//go:build unix

package gates

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// groupAttr starts the adapter as the leader of a new process group, so the
// adapter and everything it forks can be killed at once.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup sends SIGKILL to every process of the group led by pid. A group
// that no longer exists (ESRCH) is not an error.
func killGroup(pid int) {
	if pid > 0 {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
}
