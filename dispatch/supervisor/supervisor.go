// Package supervisor starts, bounds, kills and reaps every child process
// the relay runs: the agents (package dispatch) and the authority adapter
// (package gates). One implementation, so that both keep the same safety
// properties:
//
//   - each child leads a process group of its own, so that it and
//     everything it forks in its group are killed at once (SIGKILL to the
//     group), and it gets a parent-death signal so that it never outlives
//     the daemon (Starter says which thread to fork it from);
//   - with a shim (the relay's agent shim, a child subreaper), the shim
//     leads the group and runs the child; stopping it (SIGTERM) kills the
//     child's whole tree, descendants that left the group included;
//   - the leader's exit is observed without reaping it (a pidfd in the
//     runtime's poller, waitid with WNOWAIT as the fallback), so its pid,
//     which is also its group id, cannot be reused before the group is
//     killed: every signal is sent before Reap, never after;
//   - Run bounds a one-shot child: a deadline, a cap on stdout, stderr
//     drained through a small buffer, and reading that stops shortly after
//     the exit or the kill, so that a grandchild holding a pipe open cannot
//     hang the caller.
//
// It uses the standard library and golang.org/x/sys only, so that gates
// may import it without importing dispatch. Process groups, pidfds,
// waitid and the parent-death signal make it Linux-only, as the relay is.
package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Spec says what to start and how.
type Spec struct {
	// Argv is the program (found on PATH when it has no slash; no shell is
	// involved) and its arguments. It is resolved here also when it runs
	// under a shim, so that a missing program fails the start the same way.
	Argv []string
	// Dir is the working directory ("" for the relay's).
	Dir string
	// Env is the child's whole environment; nil means an empty one, never
	// the relay's (unlike exec.Cmd.Env).
	Env []string
	// Stderr receives the child's stderr (nil: discarded). An io.Writer
	// that is not an *os.File is fed by a copier that Reap waits for at
	// most WaitDelay once the leader has exited.
	Stderr io.Writer
	// Shim, when set, runs the child through a shim: Shim[0] is its
	// executable, the rest its arguments, then come the child's resolved
	// path and Argv. The shim leads the group and gets SIGTERM, not
	// SIGKILL, as its parent-death signal and from Kill, so that it can
	// kill the child's whole tree first.
	Shim []string
	// ShimReport passes the shim a pipe on fd 3 on which it reports the
	// child's pid ("pid N\n") or why it could not start it ("error: …\n");
	// Start waits for that line at most ShimReportWait.
	ShimReport bool
	// Start starts the command (nil: (*exec.Cmd).Start). The daemon passes
	// a Starter's, so that the parent-death signal follows the daemon's
	// life, not a thread's.
	Start func(*exec.Cmd) error
}

// Bounds of the shim's handshake and stop, and of the stderr copier.
const (
	// ShimReportWait bounds how long Start waits for the shim's report.
	ShimReportWait = 30 * time.Second
	// ShimStopWait bounds how long a shim told to stop (Kill) is waited
	// for before its whole group gets SIGKILL instead.
	ShimStopWait = 5 * time.Second
	// WaitDelay bounds how long Reap waits for Spec.Stderr's copier after
	// the leader exited: a process that escaped the group and kept stderr
	// open must not hold Reap forever.
	WaitDelay = 2 * time.Second
)

// Process is one started child, leader of its own process group (or the
// shim that runs it). Its methods are safe for concurrent use.
type Process struct {
	cmd      *exec.Cmd
	pid      int
	childPID int
	shim     bool
	stdin    *os.File
	stdout   *os.File
	exited   chan struct{}

	mu     sync.Mutex
	reaped bool // no signal is sent any more: the pid may be reused
	killed atomic.Bool

	reap   sync.Once
	waited atomic.Bool // err and cmd.ProcessState are set
	err    error
}

// Start starts s.Argv in a process group of its own with stdin and stdout
// as pipes (Stdin, Stdout) and stderr to s.Stderr. On error nothing runs
// any more.
func Start(s Spec) (*Process, error) {
	return start(s, s.Stderr)
}

// start is Start with stderr given as what exec.Cmd.Stderr gets.
func start(s Spec, stderr io.Writer) (*Process, error) {
	cmd, err := command(s)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	var childStdin, childStdout, report *os.File
	var closeLater []*os.File // the child's ends and the report pipe's
	defer func() {
		for _, f := range closeLater {
			_ = f.Close()
		}
	}()
	p := &Process{cmd: cmd, shim: len(s.Shim) > 0, exited: make(chan struct{})}
	if childStdin, p.stdin, err = os.Pipe(); err != nil {
		return nil, err
	}
	closeLater = append(closeLater, childStdin)
	if p.stdout, childStdout, err = os.Pipe(); err != nil {
		_ = p.stdin.Close()
		return nil, err
	}
	closeLater = append(closeLater, childStdout)
	cmd.Stdin, cmd.Stdout = childStdin, childStdout
	if p.shim && s.ShimReport {
		r, w, err := os.Pipe()
		if err != nil {
			p.closePipes()
			return nil, err
		}
		closeLater = append(closeLater, r, w)
		cmd.ExtraFiles = []*os.File{w} // fd 3
		report = r
	}
	launch := s.Start
	if launch == nil {
		launch = (*exec.Cmd).Start
	}
	if err := launch(cmd); err != nil {
		p.closePipes()
		return nil, err
	}
	p.pid, p.childPID = cmd.Process.Pid, cmd.Process.Pid
	go p.watchExit()
	if report == nil {
		return p, nil
	}
	_ = cmd.ExtraFiles[0].Close() // now: EOF on the report means the shim's end is gone too
	pid, err := readShimReport(report)
	if err != nil {
		_ = p.Reap()
		return nil, err
	}
	p.childPID = pid
	return p, nil
}

// command builds the exec.Cmd of s, through the shim when there is one.
func command(s Spec) (*exec.Cmd, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, errors.New("empty command")
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	deathSig := syscall.SIGKILL
	if len(s.Shim) > 0 {
		args := append(slices.Clip(s.Shim[1:]), cmd.Path)
		cmd = exec.Command(s.Shim[0], append(args, s.Argv...)...)
		if cmd.Err != nil {
			return nil, fmt.Errorf("agent shim: %w", cmd.Err)
		}
		deathSig = syscall.SIGTERM
	}
	cmd.Dir = s.Dir
	cmd.Env = append([]string{}, s.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	cmd.WaitDelay = WaitDelay
	return cmd, nil
}

// readShimReport reads the shim's one line on fd 3: the child's pid, or
// why it could not be started.
func readShimReport(r *os.File) (int, error) {
	_ = r.SetReadDeadline(time.Now().Add(ShimReportWait))
	var buf [512]byte
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil || bytes.IndexByte(buf[:n], '\n') >= 0 {
			break
		}
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	if rest, ok := strings.CutPrefix(line, "pid "); ok {
		if pid, err := strconv.Atoi(rest); err == nil && pid > 0 {
			return pid, nil
		}
	}
	if msg, ok := strings.CutPrefix(line, "error: "); ok {
		return 0, errors.New(msg)
	}
	return 0, fmt.Errorf("the agent shim did not report the agent's pid (got %q)", line)
}

// Pid is the group leader's pid, which is also the group's id: the shim's
// when there is one.
func (p *Process) Pid() int { return p.pid }

// ChildPID is the child's pid: the shim's report with Spec.ShimReport,
// otherwise Pid.
func (p *Process) ChildPID() int { return p.childPID }

// Shimmed reports whether the child runs under a shim.
func (p *Process) Shimmed() bool { return p.shim }

// Stdin is the write end of the child's stdin. Reap closes it.
func (p *Process) Stdin() *os.File { return p.stdin }

// Stdout is the read end of the child's stdout. Reap closes it.
func (p *Process) Stdout() *os.File { return p.stdout }

// Exited closes when the leader has exited. The leader stays a zombie,
// and its group id ours, until Reap.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Killed reports whether Kill (or Reap) has signalled the process.
func (p *Process) Killed() bool { return p.killed.Load() }

// State is the leader's exit state, nil before Reap.
func (p *Process) State() *os.ProcessState {
	if !p.waited.Load() {
		return nil
	}
	return p.cmd.ProcessState
}

// Kill stops the process: SIGKILL to the whole group, or, under a shim,
// SIGTERM to the shim, which SIGKILLs the child's whole tree (escaped
// descendants included) and exits the way the child did. It never blocks
// and is a no-op after Reap.
func (p *Process) Kill() {
	p.killed.Store(true)
	if p.shim {
		p.signal(p.pid, syscall.SIGTERM)
		return
	}
	p.killGroup()
}

// killGroup sends SIGKILL to every process of the group, unless the leader
// has been reaped (its id may name another group by then). A group that
// no longer exists (ESRCH) is no error.
func (p *Process) killGroup() { p.signal(-p.pid, syscall.SIGKILL) }

func (p *Process) signal(pid int, sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(pid, sig)
	}
}

// terminate kills the process and waits until the leader has exited: a
// shim that has not stopped within ShimStopWait has its group killed
// instead (which leaves escaped descendants to init). The group gets
// SIGKILL in any case, while the leader is still unreaped: nothing left in
// it outlives the process.
func (p *Process) terminate() {
	p.Kill()
	if p.shim {
		t := time.NewTimer(ShimStopWait)
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
	}
	p.killGroup()
	<-p.exited
}

// Reap kills what is left of the process (terminate), collects the
// leader's exit status and closes Stdin and Stdout. It returns the error
// of exec.Cmd.Wait, and is idempotent.
func (p *Process) Reap() error {
	p.terminate()
	p.reap.Do(func() {
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		p.err = p.cmd.Wait()
		p.closePipes()
		p.waited.Store(true)
	})
	return p.err
}

func (p *Process) closePipes() {
	_ = p.stdin.Close()
	if p.stdout != nil {
		_ = p.stdout.Close()
	}
}
