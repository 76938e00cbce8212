package dispatchtest

import (
	"os"
	"strconv"
	"strings"

	"github.com/hai-relay/relay/dispatch/procstat"
)

// Agents run in a pid namespace of their own (package dispatch/sandbox):
// the pids the fake agent reports are its namespace's. It reports each
// with the process's start time (/proc/PID/stat field 22, in clock ticks
// since boot, which no namespace changes), from which HostPID finds the
// process as the host sees it.

// HostPID returns the host's pid of the process the fake agent reported
// as "PID START NS" (a pid file's content), or as "PID" alone (then taken
// as the host's). It returns 0 when no such process is alive.
func HostPID(reported string) int {
	f := strings.Fields(reported)
	if len(f) == 0 {
		return 0
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return 0
	}
	if len(f) < 2 {
		return pid
	}
	start, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	ns := ""
	if len(f) > 2 {
		ns = f[2]
	}
	return HostPIDOf(pid, start, ns)
}

// HostPIDOf returns the host's pid of the process whose pid in its own
// namespace is pid, whose start time is start and whose pid namespace is
// ns (/proc/PID/ns/pid's link; "" matches any), or 0.
func HostPIDOf(pid int, start uint64, ns string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		host, err := strconv.Atoi(e.Name())
		if err != nil || ProcStart(host) != start {
			continue
		}
		if link, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); ns != "" && link != ns {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if ns, ok := strings.CutPrefix(line, "NSpid:"); ok {
				ids := strings.Fields(ns)
				if len(ids) > 0 && ids[len(ids)-1] == strconv.Itoa(pid) {
					return host
				}
			}
		}
	}
	return 0
}

// ProcStart returns the start time of process pid (field 22 of its
// /proc stat, clock ticks since boot), or 0.
func ProcStart(pid int) uint64 {
	st, _ := procstat.Read(pid)
	return st.Start
}
