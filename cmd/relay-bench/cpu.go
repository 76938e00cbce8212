package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hai-relay/relay/dispatch/procstat"
)

// The send row splits the CPU time its rounds cost by process kind, so a
// ratio that misses can be traced to the part that costs: the bench's own
// MCP clients, the facades, the daemon, the floor's servers. Read from
// /proc (user + system time of each child process of the bench, and of the
// bench itself); the counters tick at 100 Hz, so a round of thousands of
// calls is needed for a useful split.

// cpuTicksPerSecond is the kernel's USER_HZ, 100 on every Linux the Go
// runtime supports.
const cpuTicksPerSecond = 100

// cpuSample is the CPU time used so far by each kind of process.
type cpuSample map[string]time.Duration

// sampleCPU reads the CPU time of this process ("clients") and of each of
// its child processes, by kind: "daemon" and "facades" for `relay daemon`
// and `relay mcp`, else the program's name. Without /proc it returns nil.
func sampleCPU() cpuSample {
	self := os.Getpid()
	out := cpuSample{}
	t, _, ok := procStat(self)
	if !ok {
		return nil
	}
	out["clients"] = t
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		t, ppid, ok := procStat(pid)
		if !ok || ppid != self {
			continue
		}
		out[procKind(pid)] += t
	}
	return out
}

// procStat returns pid's user + system CPU time and its parent's pid.
func procStat(pid int) (time.Duration, int, bool) {
	st, err := procstat.Read(pid)
	if err != nil {
		return 0, 0, false
	}
	return time.Duration(st.UTime+st.STime) * time.Second / cpuTicksPerSecond, st.PPID, true
}

// procKind names the kind of process pid is, from its command line.
func procKind(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "other"
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(args) > 1 {
		switch args[1] {
		case "daemon":
			return "daemon"
		case "mcp":
			return "facades"
		}
	}
	return filepath.Base(args[0])
}

// add accumulates after − before into s.
func (s cpuSample) add(before, after cpuSample) {
	if before == nil || after == nil {
		return
	}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			s[k] += d
		}
	}
}

// perCall formats s as CPU microseconds per call, in the order of kinds.
func (s cpuSample) perCall(calls int, kinds ...string) string {
	if len(s) == 0 || calls == 0 {
		return "not measured (no /proc)"
	}
	parts := []string{}
	var total time.Duration
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, float64(s[k].Microseconds())/float64(calls)))
		total += s[k]
	}
	return fmt.Sprintf("%s; total %.0f CPU-µs per call", strings.Join(parts, ", "), float64(total.Microseconds())/float64(calls))
}
