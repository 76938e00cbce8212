package dispatch

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hai-relay/relay/dispatch/procstat"
	"github.com/hai-relay/relay/dispatch/supervisor"
	"github.com/hai-relay/relay/model"
)

// proc is one started agent process, leader of its own process group,
// as dispatch keeps it: the supervised process and, read once at the
// start, what the session, the run record and the tree walk use.
type proc struct {
	*supervisor.Process
	pid int // the group leader's (the shim's under a shim)
	// start is the leader's start time (/proc/<pid>/stat field 22), read
	// right after the spawn; 0 when it could not be read.
	start  uint64
	stdin  io.WriteCloser
	stdout io.ReadCloser
	// exited closes when the leader has exited; it stays a zombie, and
	// its process group id cannot be reused, until reap: killGroup is
	// always safe before it.
	exited <-chan struct{}
}

// procSpec is what startProc needs.
type procSpec struct {
	argv   []string
	dir    string
	env    []string
	unset  []string // variables removed from the environment (inherited or in env)
	stderr io.Writer
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

// startProc starts argv through st in its own process group with
// Pdeathsig SIGKILL, stdin and stdout as pipes and stderr to ps.stderr.
// argv is bubblewrap's (session.sandboxed): the agent runs as the child of
// the sandbox's pid 1, and when bubblewrap ends, however it ends, the
// kernel kills every process in that pid namespace, those that left the
// group and its environment included. So no agent shim is needed between:
// one process fewer to start per run.
func startProc(st *supervisor.Starter, ps procSpec) (*proc, error) {
	sp, err := supervisor.Start(supervisor.Spec{
		Argv: ps.argv, Dir: ps.dir, Env: agentEnviron(os.Environ(), ps.env, ps.unset),
		Stderr: ps.stderr, Start: st.Start,
	})
	if err != nil {
		return nil, err
	}
	p := &proc{Process: sp, pid: sp.Pid(), stdin: sp.Stdin(), stdout: sp.Stdout(), exited: sp.Exited()}
	if st, err := procstat.Read(p.pid); err == nil {
		p.start = st.Start // the leader is ours and unreaped: its pid names it
	}
	return p, nil
}

// killGroup kills the agent: SIGKILL to its whole process group, which
// bubblewrap leads; the sandbox's pid namespace, and every process in it,
// ends with it. It is a no-op after reap.
func (p *proc) killGroup() { p.Kill() }

// reap kills what is left of the group, waits for the leader and releases
// its pipes. It is idempotent.
func (p *proc) reap() error { return p.Reap() }

// exitDescription says how the leader ended, for messages ("exit status
// 3", "killed by the relay").
func (p *proc) exitDescription() string {
	st := p.State()
	if st == nil {
		return "still running"
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return signalDescription(ws.Signal(), p.Killed())
	case ok && ws.Exited() && ws.ExitStatus() > 128 && ws.ExitStatus() < 128+65:
		// bubblewrap, the leader, exits 128+N when the agent was killed
		// by signal N.
		return signalDescription(syscall.Signal(ws.ExitStatus()-128), p.Killed())
	}
	return st.String()
}

// signalDescription says how a leader killed by sig ended. The relay
// stops an agent with SIGKILL only (to its group, or from the shim to
// the agent's whole tree, after SIGTERM to the shim alone), so another
// signal came from elsewhere; for SIGTERM, the default of kill(1),
// pkill(1) and killall(1), the message says so, since that is the first
// thing to look for (two OpenCode tasks of one run ended this way 49 ms
// apart, in initialize, on a machine shared with other users' jobs).
func signalDescription(sig syscall.Signal, killedByRelay bool) string {
	switch {
	case killedByRelay && (sig == syscall.SIGKILL || sig == syscall.SIGTERM):
		// SIGTERM: the shim's, when the relay's stop reached it before it
		// could catch the signal (its first milliseconds).
		return "killed by the relay"
	case sig == syscall.SIGTERM:
		return "killed by signal " + sig.String() + ", which the relay never sends an agent (it stops agents with SIGKILL): " +
			"another process sent it, such as a kill, pkill or killall run on this machine"
	}
	return "killed by signal " + sig.String()
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
