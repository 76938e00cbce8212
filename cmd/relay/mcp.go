package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/hai-relay/relay/facade/mcpserver"
	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "mcp", summary: "serve the MCP stdio facade as --as AGENT (what an agent's MCP client launches)", usage: "--as AGENT [--home DIR] [--no-autostart]", setup: mcpCommand, noJSON: true})
}

func mcpCommand(f *flags) runFunc {
	as := f.String("as", "", "the `AGENT` this facade speaks for (fixed for its lifetime)")
	noAuto := f.Bool("no-autostart", false, "do not start a daemon when none answers")
	return func(ctx context.Context, e *cliIO) error { return runMCP(ctx, e, f, as, noAuto) }
}

func runMCP(ctx context.Context, e *cliIO, f *flags, as *string, noAuto *bool) error {
	home, err := resolveHome(f.home, e.getenv)
	if err != nil {
		return err
	}
	// Nothing of a home this user does not own is read or trusted, not
	// even its config: the facade refuses at once.
	if err := clientHome(home, false, e.stderr); err != nil {
		return err
	}
	cfg, err := loadHomeConfig(home, model.CodeDaemonUnavailable)
	if err != nil {
		return err
	}
	if *as == "" {
		return model.Errorf(model.CodeInvalidArgs, "--as AGENT is required").
			WithHint("one of: " + strings.Join(cfg.AgentNames(), ", "))
	}
	if _, ok := cfg.Agent(*as); !ok {
		return model.Errorf(model.CodeUnknownAgent, "no agent named %q", *as).
			WithHint("one of: " + strings.Join(cfg.AgentNames(), ", ") + " (or define [agents." + *as + "] in config.toml)")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	// A client that closed its end of our stdout must not kill the facade
	// while it finishes the requests that client sent: Go dies of SIGPIPE
	// on a write to a broken stdout unless the signal is asked for. With
	// it, the write fails with EPIPE and the facade drops the answers.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	c := dial(home, *as, !*noAuto, e.stderr)
	defer c.Close()
	in, restore := pollableStdin(e.stdin)
	defer restore()
	// mcp-go reads a line whatever its length: bound it, so a client
	// cannot make the facade hold an endless line in memory. The bound
	// leaves room for the largest message body, JSON-escaped.
	in = &lineLimitReader{r: in, max: max(mcpLineMinBytes, 8*cfg.Limits.MessageBytes)}
	out := e.stdout
	var afterStart []func()
	if e.getenv("GOMAXPROCS") == "" {
		// One P: a facade serves one client, and idle threads spinning
		// for work were 15-20 % of its CPU. The switch stops the world
		// (~0.5 ms), so it waits until the first answer (initialize) is
		// written instead of delaying it.
		afterStart = append(afterStart, func() { runtime.GOMAXPROCS(1) })
	}
	if e.getenv("GOGC") == "" {
		// No collection before the first answer: the start's heap (the
		// packages' init, the config, the tool table) passes the first
		// 4 MB goal, and that collection cost the client 2-3 ms of its
		// start. The default comes back once initialize is answered.
		debug.SetGCPercent(startGCPercent)
		afterStart = append(afterStart, func() { debug.SetGCPercent(100) })
	}
	if len(afterStart) > 0 {
		out = &afterFirstWrite{w: out, then: func() {
			for _, f := range afterStart {
				f()
			}
		}}
	}
	err = mcpserver.Serve(ctx, c, mcpserver.Options{Agent: *as, Cwd: cwd, Version: Version, PID: os.Getpid()}, in, out)
	var long *lineTooLong
	if errors.As(err, &long) {
		return model.Errorf(model.CodePayloadTooLarge, "a line from the MCP client exceeds %d bytes; the facade stopped", long.max).
			WithHint(fmt.Sprintf("tool calls are bounded by limits.message_bytes (%d) in config.toml", cfg.Limits.MessageBytes))
	}
	return err
}

// pollableStdin returns in switched to non-blocking mode when it is a pipe
// or a socket, so that reads wait in the runtime's poller instead of in a
// blocking read(2). A facade waits for its client's next line most of the
// time; a blocking read holds an OS thread in the kernel, which the
// runtime's monitor notices every 20 µs and answers by handing the
// processor to another thread, so each message cost several extra futex
// and nanosleep calls. A terminal is left alone (its mode is shared with the
// shell); restore puts the blocking mode back.
func pollableStdin(in io.Reader) (io.Reader, func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return in, func() {}
	}
	if mode := st.Mode & syscall.S_IFMT; mode != syscall.S_IFIFO && mode != syscall.S_IFSOCK {
		return in, func() {}
	}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return in, func() {}
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return in, func() {}
	}
	nf := os.NewFile(uintptr(fd), f.Name())
	return nf, func() {
		_ = syscall.SetNonblock(fd, false)
		nf.Close()
	}
}

// afterFirstWrite runs then once, after the first Write to w returned.
type afterFirstWrite struct {
	w    io.Writer
	then func()
	once sync.Once
}

func (a *afterFirstWrite) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.once.Do(a.then)
	return n, err
}

// startGCPercent is the facade's GOGC until its first answer is written.
const startGCPercent = 400

// mcpLineMinBytes is the least bound on a line from the MCP client.
const mcpLineMinBytes = 16 << 20

// lineLimitReader fails a read once a line (bytes since the last newline)
// passes max bytes.
type lineLimitReader struct {
	r   io.Reader
	max int
	cur int // bytes of the current line so far
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		// A chunk is at most a read buffer (a few KiB), far below max:
		// the lines that end inside it are short enough.
		l.cur = n - i - 1
	} else {
		l.cur += n
	}
	if l.cur > l.max {
		return n, &lineTooLong{max: l.max}
	}
	return n, err
}

// lineTooLong is lineLimitReader's error.
type lineTooLong struct{ max int }

func (e *lineTooLong) Error() string {
	return fmt.Sprintf("a line from the MCP client exceeds %d bytes", e.max)
}
