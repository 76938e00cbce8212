package socketapi

import (
	"os/exec"
	"testing"
	"time"
)

// A peer is the process that connected while it runs, and no longer once
// it has ended, as a zombie not yet reaped too (its pid still names it),
// with its pidfd or, once that is closed, by its start time.
func TestPeerSameProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	fd := openPidfd(pid)
	if fd == nil {
		t.Skip("no pidfd_open here (Linux 5.3 or later); peer.same reads the start time, as TestPeerSameByStartTime checks")
	}
	p := peer{pid: pid, start: procStart(pid), pidfd: fd}
	if p.start == "" || !p.same() {
		t.Fatalf("a running peer is not the one that connected: %+v", p)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet: a zombie, whose pid is still its own.
	for i := 0; p.same(); i++ {
		if i > 1000 {
			t.Fatal("a killed peer is still the one that connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if procStart(pid) != "" {
		t.Errorf("procStart of a zombie = %q, want none", procStart(pid))
	}
	_ = cmd.Wait()
	if p.same() {
		t.Error("a reaped peer is the one that connected")
	}
	_ = fd.Close()
	if p.same() {
		t.Error("with its pidfd closed, a reaped peer is the one that connected")
	}
}

// Without a pidfd, the start time tells the process: one with another
// start time is another process, whatever its pid.
func TestPeerSameByStartTime(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if p := (peer{pid: pid, start: procStart(pid)}); !p.same() {
		t.Errorf("a running peer without a pidfd is not the one that connected: %+v", p)
	}
	if p := (peer{pid: pid, start: "1"}); p.same() {
		t.Error("a process with another start time is the one that connected")
	}
	if p := (peer{pid: pid}); p.same() {
		t.Error("a peer whose start time was never read is the one that connected")
	}
	fd := openPidfd(pid)
	if fd != nil {
		_ = fd.Close()
		if p := (peer{pid: pid, start: "1", pidfd: fd}); p.same() {
			t.Error("with its pidfd closed, a process with another start time is the one that connected")
		}
	}
}
