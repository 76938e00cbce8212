package dispatch

import (
	"path/filepath"
	"time"

	"github.com/hai-relay/relay/dispatch/procstat"
)

// Hooks for the external tests.

// RunEnvVar is the environment variable carrying an agent's run id.
const RunEnvVar = runEnvVar

// ProcStartTime returns pid's start time, /proc/<pid>/stat field 22.
func ProcStartTime(pid int) (uint64, error) {
	st, err := procstat.Read(pid)
	return st.Start, err
}

// TestRunRecord is a task's run record as a crashed daemon leaves it.
type TestRunRecord struct {
	TaskID    string
	PID       int
	StartTime uint64
	Argv0     string
	Run       string
	BootID    string // "" for the current boot
}

// WriteTestRunRecord writes r under home, where the dispatcher keeps its
// task run records, and returns the file's path.
func WriteTestRunRecord(home string, r TestRunRecord) (string, error) {
	boot := r.BootID
	if boot == "" {
		boot = bootID()
	}
	path := filepath.Join(home, "run", "agents", r.TaskID+".json")
	return path, writeRecord(path, runRecord{Version: recordVersion, Kind: recordTask, TaskID: r.TaskID, Agent: "test",
		Argv0: r.Argv0, PID: r.PID, StartTime: r.StartTime, BootID: boot, Run: r.Run, Started: time.Now().UTC()})
}
