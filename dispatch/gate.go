package dispatch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// The line gate sits between the agent's stdout and the SDK's reader. It
// does two things the SDK does not:
//
//  1. Protocol garbage is fatal. The SDK logs and skips a line that is not
//     JSON-RPC; the relay treats it as a broken agent (agent_crashed). The
//     gate checks every line and calls onGarbage on the first bad one.
//
//  2. Flow control for session/update. The SDK queues inbound
//     notifications in a channel of 1024 and closes the connection when it
//     overflows, even when the handler is fast: decoding a notification on
//     the processing side costs more than framing it on the receiving side,
//     so a burst of small updates can outrun it. The gate counts the
//     session/update notifications it hands to the SDK and the ones the
//     client has processed, and stops reading the agent's stdout while more
//     than gateHighWater are in flight. Backpressure then reaches the agent
//     through the pipe, as it should.
const (
	gateHighWater = 256
	// gateResync: if the client reports no progress for this long, the
	// gate assumes it missed completions (an update the SDK rejected before
	// the client saw it) and resets its count.
	gateResync = time.Second
	// maxLineBytes mirrors the SDK's scanner limit; a longer line closes
	// the SDK's connection, so it is protocol garbage here as well.
	maxLineBytes = 10 << 20
)

type lineGate struct {
	br *bufio.Reader
	// onGarbage must not keep line: it may point into br's buffer.
	onGarbage func(why string, line []byte)

	cur      []byte // what is left of the current line for the SDK, in br's buffer
	err      error
	skipping bool   // inside a line longer than the read buffer
	pending  []byte // that line so far, for inspection when it ends

	queued atomic.Int64
	done   atomic.Int64
	signal chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
	badOnce   sync.Once
}

func newLineGate(r io.Reader, onGarbage func(why string, line []byte)) *lineGate {
	return &lineGate{
		br:        bufio.NewReaderSize(r, 64<<10),
		onGarbage: onGarbage,
		signal:    make(chan struct{}, 1),
		closed:    make(chan struct{}),
	}
}

// processed is called by the client after each session/update. It never
// blocks.
func (g *lineGate) processed() {
	g.done.Add(1)
	select {
	case g.signal <- struct{}{}:
	default:
	}
}

// awaitProcessed waits, at most max, until every session/update the gate
// has handed to the SDK so far has been processed by the client. The SDK
// runs an inbound request (session/request_permission) at once on its own
// goroutine, possibly before the notifications that preceded it on the
// wire; the permission handler calls this to see the tool call it is
// about. A short poll: it is rare, and the client never blocks.
func (g *lineGate) awaitProcessed(max time.Duration) {
	target := g.queued.Load()
	deadline := time.Now().Add(max)
	for g.done.Load() < target && time.Now().Before(deadline) {
		select {
		case <-g.closed:
			return
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// close releases a Read waiting for flow control.
func (g *lineGate) close() { g.closeOnce.Do(func() { close(g.closed) }) }

// Read implements io.Reader for the SDK's receive loop (one reader).
func (g *lineGate) Read(p []byte) (int, error) {
	for len(g.cur) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		// No copy: ReadSlice's bytes stay valid until the next read from
		// br, and the loop reads again only once g.cur is used up. What
		// outlives that (a long line's fragments) is copied to pending.
		line, err := g.br.ReadSlice('\n')
		g.cur = line
		switch {
		case err == bufio.ErrBufferFull:
			// A fragment of a long line: pass it through, inspect the
			// line only as a whole.
			if !g.skipping {
				g.skipping = true
				g.pending = append(g.pending[:0], g.cur...)
			} else if len(g.pending) <= maxLineBytes {
				g.pending = append(g.pending, g.cur...)
			}
			continue
		case err != nil:
			g.err = err
		}
		if g.skipping {
			g.skipping = false
			whole := append(g.pending, g.cur...)
			g.pending = nil
			if len(whole) > maxLineBytes {
				g.bad("a line longer than 10 MiB", whole)
				continue
			}
			g.inspect(whole)
			continue
		}
		if len(g.cur) > 0 {
			g.inspect(g.cur)
		}
	}
	n := copy(p, g.cur)
	g.cur = g.cur[n:]
	return n, nil
}

// inspect classifies one complete line as the SDK will and applies flow
// control before the SDK sees it.
func (g *lineGate) inspect(line []byte) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return
	}
	var m struct {
		ID     *json.RawMessage `json:"id"`
		Method string           `json:"method"`
	}
	if err := json.Unmarshal(t, &m); err != nil {
		g.bad("a line that is not JSON", t)
		return
	}
	switch {
	case m.Method == "" && m.ID == nil:
		g.bad("a JSON line that is neither a request, a response nor a notification", t)
	case m.Method == acp.ClientMethodSessionUpdate && m.ID == nil:
		g.admit()
	}
}

func (g *lineGate) bad(why string, line []byte) {
	g.badOnce.Do(func() {
		if g.onGarbage != nil {
			g.onGarbage(why, line)
		}
	})
}

// admit waits until fewer than gateHighWater session/update notifications
// are in flight, then counts one more.
func (g *lineGate) admit() {
	for g.queued.Load()-g.done.Load() >= gateHighWater {
		t := time.NewTimer(gateResync)
		select {
		case <-g.signal:
		case <-g.closed:
			t.Stop()
			g.queued.Add(1)
			return
		case <-t.C:
			g.done.Store(g.queued.Load())
		}
		t.Stop()
	}
	g.queued.Add(1)
}
