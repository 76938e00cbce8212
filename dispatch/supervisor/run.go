package supervisor

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits bound a Run.
type Limits struct {
	// Timeout bounds the whole run: then the group is killed
	// (Result.TimedOut).
	Timeout time.Duration
	// Grace is how long output is still read after the leader exits, and
	// again after the group is killed, before reading stops. A grandchild
	// holding stdout open delays a run by at most this much, twice.
	Grace time.Duration
	// StdoutMax is the most of stdout kept; one byte more is
	// Result.Oversized and kills the group at once.
	StdoutMax int
}

// Result is what a Run found. When several of TimedOut, CtxErr and
// Oversized apply, the caller decides which one counts.
type Result struct {
	Stdout    []byte // at most Limits.StdoutMax+1 bytes
	ExitCode  int    // -1 when there is no exit status
	Signal    string // the signal that killed the leader, if one did
	StartErr  error  // the child could not be started: nothing else is set
	WaitErr   error  // exec.Cmd.Wait's
	CtxErr    error  // ctx ended before the leader exited
	TimedOut  bool   // Limits.Timeout passed before the leader exited
	Oversized bool   // stdout held more than Limits.StdoutMax bytes
}

// Run starts s (as Start does), writes input to its stdin and closes it,
// and collects its stdout, bounded by l; s.Stderr receives all of its
// stderr, read through an 8 KiB buffer. It returns when the leader has
// exited, l.Timeout has passed, ctx has ended or stdout went over
// l.StdoutMax; then output is read for at most l.Grace more (bytes
// already in a pipe are still taken, up to l.Timeout), the process is
// killed as Reap does and reaped. Every goroutine it starts has ended
// when it returns.
func Run(ctx context.Context, s Spec, input []byte, l Limits) (r Result) {
	r.ExitCode = -1
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		r.StartErr = err
		return r
	}
	defer stderrR.Close()
	p, err := start(s, stderrW)
	// The child holds its own copy now; ours must go so that EOF on
	// stderr means every writer is gone (Start does the same for stdout).
	_ = stderrW.Close()
	if err != nil {
		r.StartErr = err
		return r
	}
	deadline := time.Now().Add(l.Timeout)
	x := p.exchange(input, s.Stderr, stderrR, l.StdoutMax)
	r.TimedOut, r.CtxErr = x.wait(ctx, l)
	p.terminate()
	x.finish(ctx, l.Grace, deadline)
	r.WaitErr = p.Reap()
	r.Stdout, r.Oversized = x.stdout, x.oversized()
	if ps := p.State(); ps != nil {
		r.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal().String()
		}
	}
	return r
}

// exchange is a Run's traffic with its child: input to stdin, stdout into
// a bounded buffer, stderr to a writer.
type exchange struct {
	p                      *Process
	stderr                 *os.File
	wg                     sync.WaitGroup
	stdoutDone, stderrDone chan struct{}
	over                   chan struct{} // closed when stdout passed its bound
	stdout                 []byte
}

// exchange starts the goroutines that feed and read p.
func (p *Process) exchange(input []byte, stderrTo io.Writer, stderr *os.File, max int) *exchange {
	x := &exchange{p: p, stderr: stderr,
		stdoutDone: make(chan struct{}), stderrDone: make(chan struct{}), over: make(chan struct{})}
	if stderrTo == nil {
		stderrTo = io.Discard
	}
	x.wg.Go(func() {
		// A write error (the child closed stdin without reading) is not
		// ours to judge: its output is.
		_, _ = p.stdin.Write(input)
		_ = p.stdin.Close()
	})
	x.wg.Go(func() {
		defer close(x.stdoutDone)
		x.stdout, _ = io.ReadAll(io.LimitReader(p.stdout, int64(max)+1))
		if len(x.stdout) > max {
			close(x.over)
		}
	})
	x.wg.Go(func() {
		defer close(x.stderrDone)
		// A plain reader, so that CopyBuffer uses this small buffer rather
		// than os.File's WriteTo and its 32 KiB one.
		_, _ = io.CopyBuffer(stderrTo, struct{ io.Reader }{stderr}, make([]byte, 8<<10))
	})
	return x
}

// wait returns when the leader has exited (and its output has been read,
// for at most l.Grace), stdout went over its bound, l.Timeout passed or
// ctx ended.
func (x *exchange) wait(ctx context.Context, l Limits) (timedOut bool, ctxErr error) {
	timer := time.NewTimer(l.Timeout)
	defer timer.Stop()
	select {
	case <-x.p.exited:
		// Read what the child left in the pipes, but not for longer than
		// the grace: a grandchild may hold them open.
		x.drain(ctx, l.Grace)
	case <-x.over:
	case <-timer.C:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return false, nil
}

// finish, once the group has been killed, takes what is still buffered in
// the pipes and stops reading: after SIGKILL the group's ends close at
// once, and only a process that left the group could keep them open.
// Bytes already in a pipe are still read (until deadline, or at least
// grace), so that a slow reader goroutine never loses output the child
// did write. It joins every goroutine of x.
func (x *exchange) finish(ctx context.Context, grace time.Duration, deadline time.Time) {
	x.drain(context.WithoutCancel(ctx), grace)
	hard := time.Now().Add(grace)
	if deadline.After(hard) {
		hard = deadline
	}
	stopReading(x.p.stdout, x.stdoutDone, hard)
	stopReading(x.stderr, x.stderrDone, hard)
	_ = x.p.stdin.SetWriteDeadline(time.Now())
	x.wg.Wait()
}

// oversized reports whether stdout went over its bound.
func (x *exchange) oversized() bool {
	select {
	case <-x.over:
		return true
	default:
		return false
	}
}

// drain waits until both readers are done, stdout overflows, ctx ends or
// grace passes.
func (x *exchange) drain(ctx context.Context, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	stdoutDone, stderrDone := x.stdoutDone, x.stderrDone
	for stdoutDone != nil || stderrDone != nil {
		select {
		case <-stdoutDone:
			stdoutDone = nil
		case <-stderrDone:
			stderrDone = nil
		case <-x.over:
			return
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// stopReading makes the reader of f give up once f's pipe holds no unread
// bytes (or hard passes), unless it is done already.
func stopReading(f *os.File, done <-chan struct{}, hard time.Time) {
	for unread(f) > 0 && time.Now().Before(hard) {
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	_ = f.SetReadDeadline(time.Now())
}

// unread returns how many bytes wait unread in the pipe f (FIONREAD, which
// x/sys names TIOCINQ on Linux), 0 when that cannot be known.
func unread(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n
}
