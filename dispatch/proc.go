package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/model"
)

// errStopped is returned when the dispatcher was stopped.
var errStopped = errors.New("dispatcher stopped")

// spawner starts every agent process from one goroutine that is locked to
// its OS thread for its whole life.
//
// Why: agents are started with Pdeathsig SIGKILL so that none outlives the
// daemon. Linux sends the parent-death signal when the *thread* that forked
// the child exits, not the process (prctl(2); golang/go#27505). The Go
// runtime may run exec.Cmd.Start on any thread, and a thread can end while
// the process lives on (a goroutine that exits while locked to its thread
// takes the thread with it), which would SIGKILL a healthy agent mid-task.
// Starting every process from this one locked goroutine pins them all to a
// thread that lives exactly as long as the dispatcher: the goroutine exits,
// still locked so the thread dies with it, only after every agent it
// started has been killed and reaped.
type spawner struct {
	reqs chan spawnReq
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	runtime.LockOSThread() // never unlocked: see the type comment
	defer close(s.done)
	for {
		select {
		case r := <-s.reqs:
			r.done <- r.cmd.Start()
		case <-s.quit:
			return
		}
	}
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	r := spawnReq{cmd: cmd, done: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.done:
		return errStopped
	}
	return <-r.done
}

// stop ends the spawner goroutine (and its thread). Every process it
// started must be dead by then.
func (s *spawner) stop() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}

// Starter starts processes from a thread of their own, as the dispatcher
// starts agents (see spawner), for other processes the daemon starts with a
// parent-death signal: the authority adapter's shim.
type Starter struct{ s *spawner }

// NewStarter starts a Starter's goroutine and thread.
func NewStarter() *Starter { return &Starter{s: newSpawner()} }

// Start runs cmd.Start on the Starter's thread. After Stop it fails.
func (st *Starter) Start(cmd *exec.Cmd) error { return st.s.start(cmd) }

// Stop ends the Starter's goroutine and thread, which sends the parent-death
// signal to every process it started that still runs: call it last.
func (st *Starter) Stop() { st.s.stop() }

// proc is one started agent process, leader of its own process group.
type proc struct {
	cmd *exec.Cmd
	pid int
	// start is the leader's start time (/proc/<pid>/stat field 22), read
	// right after the spawn; 0 when it could not be read.
	start  uint64
	stdin  io.WriteCloser
	stdout io.ReadCloser
	// exited closes when the leader has exited. It is observed with
	// waitid(WNOWAIT), so the leader stays a zombie, and its process group
	// id cannot be reused, until reap: killGroup is always safe before it.
	exited chan struct{}

	// shim is set when the process is the agent shim (Options.Shim),
	// which runs the agent as its child and agentPID is the agent's pid.
	shim     bool
	agentPID int

	mu      sync.Mutex
	reaped  bool
	waitErr error
	killed  atomic.Bool
}

// procSpec is what startProc needs.
type procSpec struct {
	argv   []string
	dir    string
	env    []string
	unset  []string // variables removed from the environment (inherited or in env)
	stderr io.Writer
	shim   []string // Options.Shim; empty: argv is started directly
}

// agentEnviron is the environment of an agent process: the daemon's
// (base), then env (the dispatcher's, the profile's and the run's own
// entries; a later entry wins), without the variables in unset and
// without any code-loading variable (model.CodeLoadingVar), whoever set
// it: a profile, a run or the daemon's environment.
func agentEnviron(base, env, unset []string) []string {
	out := append(slices.Clip(base), env...)
	if len(unset) > 0 {
		out = slices.DeleteFunc(out, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return slices.Contains(unset, k)
		})
	}
	out, _ = model.WithoutCodeLoading(out)
	return out
}

// shimReportWait bounds how long startProc waits for the shim to report
// the agent's pid; shimKillWait how long reap waits for a shim told to
// stop before it SIGKILLs the shim's whole group instead.
const (
	shimReportWait = 30 * time.Second
	shimKillWait   = 5 * time.Second
)

// startProc starts argv in its own process group with Pdeathsig SIGKILL,
// stdin and stdout as pipes and stderr to ps.stderr. With a shim, the shim
// leads the group (Pdeathsig SIGTERM, so that it can kill the agent's tree
// when the daemon dies) and runs argv as its child in that group.
func startProc(sp *spawner, ps procSpec) (*proc, error) {
	if len(ps.argv) == 0 || ps.argv[0] == "" {
		return nil, errors.New("empty command")
	}
	cmd := exec.Command(ps.argv[0], ps.argv[1:]...)
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	deathSig := syscall.SIGKILL
	var reportR, reportW *os.File
	if len(ps.shim) > 0 {
		// The agent's executable is resolved here, as without a shim, so
		// that a missing agent fails the dispatch the same way.
		args := append(slices.Clip(ps.shim[1:]), cmd.Path)
		args = append(args, ps.argv...)
		cmd = exec.Command(ps.shim[0], args...)
		if cmd.Err != nil {
			return nil, fmt.Errorf("agent shim: %w", cmd.Err)
		}
		var err error
		if reportR, reportW, err = os.Pipe(); err != nil {
			return nil, err
		}
		defer reportR.Close()
		defer reportW.Close()
		cmd.ExtraFiles = []*os.File{reportW} // fd 3
		deathSig = syscall.SIGTERM
	}
	cmd.Dir = ps.dir
	cmd.Env = agentEnviron(os.Environ(), ps.env, ps.unset)
	cmd.Stderr = ps.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	// Wait copies stderr through a pipe; a process that escaped the group
	// and kept stderr open must not hold Wait forever.
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = stdin.Close()
		return nil, err
	}
	if err := sp.start(cmd); err != nil {
		_ = stdin.Close()
		_ = stdout.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, agentPID: cmd.Process.Pid, stdin: stdin, stdout: stdout, exited: make(chan struct{})}
	if st, err := readProcStat(p.pid); err == nil {
		p.start = st.start // the leader is ours and unreaped: its pid names it
	}
	go p.watchExit()
	if reportW != nil {
		p.shim = true
		_ = reportW.Close()
		pid, err := readShimReport(reportR)
		if err != nil {
			_ = p.reap()
			return nil, err
		}
		p.agentPID = pid
	}
	return p, nil
}

// readShimReport reads the shim's one line on fd 3: the agent's pid, or
// why it could not be started.
func readShimReport(r *os.File) (int, error) {
	_ = r.SetReadDeadline(time.Now().Add(shimReportWait))
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

// watchExit closes exited once the leader has exited.
//
// It waits on a pidfd through the runtime's poller, not in a blocking
// waitid: a goroutine blocked in a system call keeps its P until sysmon
// takes it back, which it does only after 10 ms while another P is idle,
// and otherwise at its next tick (its sleep grows to 10 ms when the
// process is quiet). Started with the agent, the blocking wait could hold
// one of a 2-CPU daemon's two Ps through the agent's start-up and ACP
// handshake, leaving the session, the SDK's reader and the rest of the
// daemon the other one; it also cost a thread per running agent. The
// blocking waitid remains as the fallback where pidfds cannot be polled
// (Linux before 5.10).
func (p *proc) watchExit() {
	defer close(p.exited)
	if pollExit(p.pid) {
		return
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// pollExit waits until the child pid has exited, through a pidfd in the
// runtime's poller. It returns false, at once or after a failure while
// waiting, when that cannot be done: the caller then waits the old way.
// WNOWAIT leaves the child a zombie either way, so its pid (and process
// group id) stay ours until reap.
func pollExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd") // nonblocking: registered with the poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	// A pidfd polls readable once its process has exited; the check
	// itself is a waitid that never blocks.
	return rc.Read(func(fd uintptr) bool {
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				return false // not exited yet, said the other way
			case err != nil:
				return true // as the blocking wait: nothing left to wait for
			}
			return info.Signo != 0 // zero: not exited yet (WNOHANG)
		}
	}) == nil
}

// killGroup sends SIGKILL to the whole process group (the agent and every
// descendant that stayed in its group). It is a no-op after reap.
func (p *proc) killGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	p.killed.Store(true)
	if p.shim {
		// The shim SIGKILLs the agent and every descendant, escaped ones
		// included, then exits the way the agent did.
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}

// reap kills what is left of the group, waits for the leader and releases
// its pipes. It is idempotent.
func (p *proc) reap() error {
	// Until the leader is reaped it is alive or a zombie, so its group id
	// is still ours: kill the group (leftover descendants included).
	p.killGroup()
	if p.shim {
		t := time.NewTimer(shimKillWait)
		select {
		case <-p.exited:
		case <-t.C:
			// A shim that does not stop (it never should): kill its
			// group, which leaves escaped descendants to init.
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			<-p.exited
		}
		t.Stop()
	} else {
		<-p.exited
	}
	p.mu.Lock()
	if p.reaped {
		p.mu.Unlock()
		return p.waitErr
	}
	p.reaped = true
	p.mu.Unlock()
	err := p.cmd.Wait()
	p.mu.Lock()
	p.waitErr = err
	p.mu.Unlock()
	return err
}

// exitDescription says how the leader ended, for messages ("exit status
// 3", "killed by the relay").
func (p *proc) exitDescription() string {
	st := p.cmd.ProcessState
	if st == nil {
		return "still running"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if ws.Signal() == syscall.SIGKILL && p.killed.Load() {
			return "killed by the relay"
		}
		return "killed by signal " + ws.Signal().String()
	}
	return st.String()
}

// boundedLog is a per-run log file that keeps at most limit bytes: the
// agent's stderr, the SDK's diagnostics and the relay's own notes. Safe for
// concurrent use; writes after the limit or after Close are dropped.
type boundedLog struct {
	mu     sync.Mutex
	f      *os.File
	limit  int64
	n      int64
	cut    bool
	closed bool
}

// openLog opens dir/name.log (dir 0700, file 0600) bounded to limit bytes,
// appending, or replacing an earlier file when fresh is set. An empty dir
// gives a log that discards everything.
func openLog(dir, name string, limit int64, fresh bool) (*boundedLog, error) {
	l := &boundedLog{limit: limit}
	if dir == "" {
		return l, nil
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return nil, fmt.Errorf("invalid log name %q", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fresh {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return nil, err
	}
	l.f = f
	return l, nil
}

// Write implements io.Writer. It always reports len(p) so that a copier
// keeps draining the agent's stderr after the limit.
func (l *boundedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.closed || l.cut {
		return len(p), nil
	}
	room := l.limit - l.n
	if int64(len(p)) <= room {
		n, _ := l.f.Write(p)
		l.n += int64(n)
		return len(p), nil
	}
	if room > 0 {
		n, _ := l.f.Write(p[:room])
		l.n += int64(n)
	}
	l.cut = true
	_, _ = fmt.Fprintf(l.f, "\n[relay: log truncated at %d bytes]\n", l.limit)
	return len(p), nil
}

// Printf writes one relay note line.
func (l *boundedLog) Printf(format string, args ...any) {
	line := time.Now().UTC().Format(time.RFC3339Nano) + " relay: " + fmt.Sprintf(format, args...)
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	_, _ = l.Write([]byte(line))
}

// Close closes the file.
func (l *boundedLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.f == nil {
		l.closed = true
		return nil
	}
	l.closed = true
	return l.f.Close()
}
