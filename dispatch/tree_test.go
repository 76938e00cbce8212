package dispatch_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// TaskOfProcess finds the running task whose agent's tree holds a process:
// the agent, its child, a descendant whose parent exited (the sandbox's
// pid 1, bubblewrap's, took it in); never the daemon itself nor a process outside
// every tree; and nothing once the task's run has ended, its processes
// gone.
func TestTaskOfProcess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, prompt string }{
		{"a child of the agent", "grandchild"},
		{"a descendant whose parent exited", "orphan"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			task := e.task("fake", c.prompt, model.ModeReadOnly)
			r := newRecorder()
			if err := e.d.Dispatch(context.Background(), task, r); err != nil {
				t.Fatal(err)
			}
			r.waitStarted(t)
			pid := e.grandchild(t)
			agent := hostPID(e.events(t, "start")[0])
			if got := e.d.TaskOfProcess(pid); got != task.ID {
				t.Errorf("the agent's descendant %d is in %q, want %s", pid, got, task.ID)
			}
			if got := e.d.TaskOfProcess(agent); got != task.ID {
				t.Errorf("the agent %d is in %q, want %s", agent, got, task.ID)
			}
			// The orphan's parent is the sandbox's pid 1, not the agent or
			// its shell: the task is found through the pid namespace.
			if p := parentOf(t, pid); c.prompt == "orphan" && (p == agent || p == 1) {
				t.Fatalf("the orphan's parent is %d (the agent is %d): it was not taken in by the sandbox's pid 1", p, agent)
			}
			if got := e.d.TaskOfProcess(os.Getpid()); got != "" {
				t.Errorf("the dispatcher's own process is in %q", got)
			}
			outside := exec.Command("sleep", "30")
			if err := outside.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = outside.Process.Kill(); _ = outside.Wait() }()
			if got := e.d.TaskOfProcess(outside.Process.Pid); got != "" {
				t.Errorf("a process outside every task is in %q", got)
			}
			if got := e.d.TaskOfProcess(1 << 30); got != "" {
				t.Errorf("no process is in %q", got)
			}
			e.d.Cancel(task.ID)
			r.waitFinished(t)
			waitDead(t, pid, "descendant")
			if got := e.d.TaskOfProcess(pid); got != "" {
				t.Errorf("after the run ended, its descendant's pid is in %q", got)
			}
		})
	}
}

// parentOf returns a process's parent pid (/proc/PID/stat field 4).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
