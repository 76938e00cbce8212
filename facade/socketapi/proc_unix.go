//go:build unix

package socketapi

import (
	"os"
	"strconv"
	"syscall"

	"github.com/hai-relay/relay/dispatch/procstat"
)

// procStart returns field 22 of /proc/PID/stat, the process's start time
// in clock ticks since boot, or "" where there is no /proc.
func procStart(pid int) string {
	st, err := procstat.Read(pid)
	if err != nil || st.Dead() {
		return ""
	}
	return strconv.FormatUint(st.Start, 10)
}

// ProcessAlive reports whether pid exists and is not a zombie (a process
// that ended and that its parent has not reaped yet). Without /proc, a
// process that exists is taken as alive.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	return procStart(pid) != "" || !procMounted()
}

// procAlive reports whether pid is still the process that started at
// start (from procStart) and is not a zombie. Without /proc, a process
// that exists is taken as alive.
func procAlive(pid int, start string) bool {
	if start == "" {
		return !procMounted() && ProcessAlive(pid) // no /proc: the signal check is all there is
	}
	return ProcessAlive(pid) && procStart(pid) == start
}

// procMounted reports whether /proc can be read.
func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
