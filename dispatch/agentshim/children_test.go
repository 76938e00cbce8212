package agentshim

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// Both ways of listing the shim's children find a child it started, and
// no process that is not its child.
func TestChildrenListsOwnChildren(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	self, pid := os.Getpid(), cmd.Process.Pid
	fromTasks, ok := taskChildren()
	if !ok {
		t.Fatal("/proc/self/task/*/children is not readable here")
	}
	for name, got := range map[string][]int{"task children": fromTasks, "stat scan": scanChildren(self)} {
		if !slices.Contains(got, pid) || slices.Contains(got, self) || slices.Contains(got, os.Getppid()) {
			t.Errorf("%s = %v; want it to hold child %d and neither this process nor its parent", name, got, pid)
		}
	}
}
