package supervisor_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/supervisor"
)

// self returns the test binary, which helper turns into each child.
func self(tb testing.TB) string {
	tb.Helper()
	bin, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// spec runs the helper in mode with args.
func spec(tb testing.TB, mode string, args ...string) supervisor.Spec {
	return supervisor.Spec{Argv: append([]string{self(tb), mode}, args...), Env: []string{helperEnv}}
}

// shimmed is spec under the relay's agent shim (the test binary as one),
// reporting the child's pid.
func shimmed(tb testing.TB, mode string, args ...string) supervisor.Spec {
	s := spec(tb, mode, args...)
	s.Shim, s.ShimReport = []string{self(tb), "shim"}, true
	return s
}

// limits are a Run's bounds in these tests, unless a test says otherwise.
var limits = supervisor.Limits{Timeout: 20 * time.Second, Grace: 200 * time.Millisecond, StdoutMax: 1 << 10}

// mustStart starts s and reaps it at the end of the test.
func mustStart(tb testing.TB, s supervisor.Spec) *supervisor.Process {
	tb.Helper()
	p, err := supervisor.Start(s)
	if err != nil {
		tb.Fatalf("start %q: %v", s.Argv, err)
	}
	tb.Cleanup(func() { _ = p.Reap() })
	return p
}

// procState returns the state letter of pid (/proc/<pid>/stat field 3),
// "" when there is no such process.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// waitGone waits until pid is gone or a zombie (killed, not yet reaped by
// whoever it reparented to), and fails tb after 10 s.
func waitGone(tb testing.TB, pid int) {
	tb.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if st := procState(pid); st == "" || st == "Z" || st == "X" {
			return
		}
	}
	tb.Errorf("process %d still runs (state %q)", pid, procState(pid))
}

// pidLine reads "pid N" from a helper's output.
func pidLine(tb testing.TB, out []byte) int {
	tb.Helper()
	rest, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "pid ")
	pid, err := strconv.Atoi(rest)
	if !ok || err != nil || pid <= 0 {
		tb.Fatalf("helper output %q, want pid N", out)
	}
	return pid
}

func within(tb testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		tb.Fatalf("%s within %s: no", what, d)
	}
}

// A child that exits at once: its exit is seen without reaping it (it is
// a zombie until Reap, holding its group id), then Reap collects it.
func TestExitsAtOnce(t *testing.T) {
	t.Parallel()
	p := mustStart(t, spec(t, "exit", "3"))
	within(t, p.Exited(), 10*time.Second, "exit seen")
	if st := procState(p.Pid()); st != "Z" {
		t.Errorf("after Exited the leader is %q, want a zombie until Reap", st)
	}
	if p.State() != nil {
		t.Error("State is set before Reap")
	}
	var exit *exec.ExitError
	if err := p.Reap(); !errors.As(err, &exit) {
		t.Fatalf("Reap = %v, want an exit error", err)
	}
	if st := p.State(); st == nil || st.ExitCode() != 3 {
		t.Errorf("State = %v, want exit status 3", st)
	}
	if procState(p.Pid()) != "" {
		t.Error("the leader is still there after Reap")
	}
}

func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code string
		want int
	}{{"0", 0}, {"3", 3}} {
		r := supervisor.Run(t.Context(), spec(t, "exit", c.code), nil, limits)
		if r.StartErr != nil || r.ExitCode != c.want || r.Signal != "" || r.TimedOut || r.Oversized || r.CtxErr != nil {
			t.Errorf("exit %s: %+v", c.code, r)
		}
		if (r.WaitErr != nil) != (c.want != 0) {
			t.Errorf("exit %s: WaitErr = %v", c.code, r.WaitErr)
		}
	}
}

// Run feeds its input on stdin and closes it: a child that echoes stdin
// until EOF ends.
func TestRunFeedsStdin(t *testing.T) {
	t.Parallel()
	r := supervisor.Run(t.Context(), spec(t, "echo"), []byte("hello\n"), limits)
	if r.ExitCode != 0 || string(r.Stdout) != "hello\n" {
		t.Fatalf("Run = %+v, stdout %q", r, r.Stdout)
	}
}

// A child that ignores SIGTERM is killed (SIGKILL to its group) when the
// deadline passes.
func TestRunTimeoutKillsChildIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	l := limits
	l.Timeout = 500 * time.Millisecond
	start := time.Now()
	r := supervisor.Run(t.Context(), spec(t, "ignore-term"), nil, l)
	if !r.TimedOut || r.Signal != syscall.SIGKILL.String() || r.ExitCode != -1 {
		t.Fatalf("Run = %+v, want timed out and killed", r)
	}
	if got := time.Since(start); got > 5*time.Second {
		t.Errorf("Run took %s after a timeout of %s", got, l.Timeout)
	}
	if string(r.Stdout) != "ready\n" {
		t.Errorf("stdout %q: the output written before the kill is lost", r.Stdout)
	}
}

// Under the shim, Kill is SIGTERM to the shim, which SIGKILLs the child
// even though it ignores SIGTERM, and exits the way the child did.
func TestShimKillsChildIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	p := mustStart(t, shimmed(t, "ignore-term"))
	if !p.Shimmed() || p.ChildPID() == p.Pid() || p.ChildPID() <= 0 {
		t.Fatalf("shim pid %d, child pid %d: the shim did not report its child", p.Pid(), p.ChildPID())
	}
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	p.Kill()
	within(t, p.Exited(), supervisor.ShimStopWait, "the shim stopped")
	_ = p.Reap()
	ws, _ := p.State().Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !p.Killed() {
		t.Errorf("the shim ended %v, want killed by SIGKILL as its child", p.State())
	}
	waitGone(t, p.ChildPID())
}

// A grandchild that stays in the group and holds stdout open outlives its
// parent but not the run: Run returns after the grace, and the group kill
// takes the grandchild.
func TestGrandchildInGroupDiesWithTheRun(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := supervisor.Run(t.Context(), spec(t, "grandchild"), nil, limits)
	if r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("Run = %+v", r)
	}
	if got := time.Since(start); got > 5*time.Second {
		t.Errorf("Run took %s: the grandchild holding stdout held it", got)
	}
	waitGone(t, pidLine(t, r.Stdout))
}

// A grandchild that left the group (setsid) escapes the group kill, but
// cannot hang the run by holding stdout open.
func TestEscapedGrandchildCannotHangRun(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := supervisor.Run(t.Context(), spec(t, "grandchild", "setsid"), nil, limits)
	if r.ExitCode != 0 {
		t.Fatalf("Run = %+v", r)
	}
	pid := pidLine(t, r.Stdout)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if got := time.Since(start); got > 5*time.Second {
		t.Errorf("Run took %s: the escaped grandchild holding stdout held it", got)
	}
}

// Under the shim (a child subreaper), a grandchild that left the group
// dies with the run too.
func TestShimReapsEscapedGrandchild(t *testing.T) {
	t.Parallel()
	p := mustStart(t, shimmed(t, "grandchild", "setsid"))
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatalf("child said %q, %v", line, err)
	}
	pid := pidLine(t, []byte(line))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	within(t, p.Exited(), 10*time.Second, "the shim ended with its child")
	if err := p.Reap(); err != nil {
		t.Errorf("Reap = %v; the child exited 0", err)
	}
	waitGone(t, pid)
}

// Stdout past the cap is Oversized and ends the run at once, though the
// child would write on.
func TestRunStdoutFloodIsCut(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := supervisor.Run(t.Context(), spec(t, "flood-stdout", strconv.Itoa(64<<20)), nil, limits)
	if !r.Oversized || len(r.Stdout) != limits.StdoutMax+1 {
		t.Fatalf("Run: oversized %v, %d bytes kept, want %d", r.Oversized, len(r.Stdout), limits.StdoutMax+1)
	}
	if r.Signal != syscall.SIGKILL.String() {
		t.Errorf("the flooding child ended %q, want killed", r.Signal)
	}
	if got := time.Since(start); got > 5*time.Second {
		t.Errorf("Run took %s", got)
	}
}

// countWriter counts what it is given.
type countWriter struct{ n atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// Stderr is drained to the end into Spec.Stderr, whatever its size, so
// that a child flooding it never blocks, and Run holds none of it.
func TestRunStderrFloodIsDrained(t *testing.T) {
	t.Parallel()
	const n = 32 << 20
	var w countWriter
	s := spec(t, "flood-stderr", strconv.Itoa(n))
	s.Stderr = &w
	r := supervisor.Run(t.Context(), s, nil, limits)
	if r.ExitCode != 0 || r.TimedOut || len(r.Stdout) != 0 {
		t.Fatalf("Run = %+v", r)
	}
	if got := w.n.Load(); got != n {
		t.Errorf("stderr: %d bytes passed on, want %d", got, n)
	}
}

// A context that ends stops the run, its group killed.
func TestRunContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	r := supervisor.Run(ctx, spec(t, "sleep"), nil, limits)
	if !errors.Is(r.CtxErr, context.Canceled) || r.TimedOut || r.Signal != syscall.SIGKILL.String() {
		t.Errorf("canceled: %+v", r)
	}
	ctx, stop := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer stop()
	r = supervisor.Run(ctx, spec(t, "sleep"), nil, limits)
	if !errors.Is(r.CtxErr, context.DeadlineExceeded) || r.Signal != syscall.SIGKILL.String() {
		t.Errorf("deadline: %+v", r)
	}
}

// A program that cannot be started is a start error, with or without a
// shim, and nothing runs.
func TestStartErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	for _, s := range []supervisor.Spec{
		{},
		{Argv: []string{"no-such-program-anywhere"}},
		{Argv: []string{missing}},
		{Argv: []string{missing}, Shim: []string{self(t), "shim"}, ShimReport: true},
		{Argv: []string{self(t)}, Shim: []string{missing}},
	} {
		s.Env = []string{helperEnv}
		if p, err := supervisor.Start(s); err == nil {
			_ = p.Reap()
			t.Errorf("Start(%q, shim %q) succeeded", s.Argv, s.Shim)
		}
		r := supervisor.Run(t.Context(), s, nil, limits)
		if r.StartErr == nil || r.ExitCode != -1 {
			t.Errorf("Run(%q, shim %q) = %+v, want a start error", s.Argv, s.Shim, r)
		}
	}
}

// When the shim cannot start the child, it reports why on fd 3, and Start
// fails with that reason.
func TestShimReportsStartFailure(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte{0x7f, 0x00, 0x01}, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := supervisor.Start(supervisor.Spec{Argv: []string{bad}, Shim: []string{self(t), "shim"}, ShimReport: true, Env: []string{helperEnv}})
	if err == nil {
		_ = p.Reap()
		t.Fatal("Start succeeded")
	}
	if !strings.Contains(err.Error(), "exec format error") {
		t.Errorf("Start = %v, want the shim's reason", err)
	}
}

// Reap is idempotent, and Kill after it sends nothing (the pid may be
// another process's by then).
func TestReapIsIdempotent(t *testing.T) {
	t.Parallel()
	p := mustStart(t, spec(t, "sleep"))
	err1 := p.Reap()
	err2 := p.Reap()
	if err1 == nil || err1 != err2 {
		t.Errorf("Reap = %v, then %v", err1, err2)
	}
	p.Kill()
	if st := p.State(); st == nil || st.String() != "signal: killed" {
		t.Errorf("State = %v, want killed", st)
	}
}

// Stopping a Starter ends the thread every child it started was forked
// from, which sends them their parent-death signal; after Stop it starts
// nothing.
//
// Not parallel: the starter's thread may be one on which another test
// forked a child earlier (Run's default start), and ending it would send
// that child its parent-death signal too (golang/go#27505, the very reason
// for Starter).
func TestStarterStopSendsParentDeathSignal(t *testing.T) {
	st := supervisor.NewStarter()
	s := spec(t, "sleep")
	s.Start = st.Start
	p := mustStart(t, s)
	st.Stop()
	st.Stop() // idempotent
	within(t, p.Exited(), 10*time.Second, "the child died with the starter's thread")
	_ = p.Reap()
	if ws, _ := p.State().Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the child ended %v, want killed by its parent-death signal", p.State())
	}
	if _, err := supervisor.Start(s); !errors.Is(err, supervisor.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
}
