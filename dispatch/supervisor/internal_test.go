package supervisor

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pollExit waits for the child's exit without reaping it: the leader must
// stay a zombie, holding its pid and group id, until Reap.
func TestPollExitLeavesAZombie(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	done := make(chan bool, 1)
	go func() { done <- pollExit(pid) }()
	select {
	case <-done:
		t.Fatal("pollExit returned while the child was running")
	case <-time.After(50 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	select {
	case ok := <-done:
		if !ok {
			t.Skip("pidfds cannot be polled here; watchExit falls back to waitid")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pollExit missed the exit")
	}
	if st := statState(pid); st != "Z" {
		t.Errorf("after pollExit the child is %q, want a zombie", st)
	}
}

// statState returns the state letter of pid (/proc/<pid>/stat field 3).
func statState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}
