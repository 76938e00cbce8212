package acpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// The stdout limiter sits between the agent's stdout and the SDK's reader.
// It is not one of the gates (package gates) that decide a transition: it
// bounds what the agent's output can make the run hold, doing three
// things the SDK does not:
//
//  1. Protocol garbage is fatal. The SDK logs and skips a line that is not
//     JSON-RPC; the relay treats it as a broken agent (agent_crashed). The
//     limiter checks every line and calls onGarbage on the first bad one.
//
//  2. Long lines are cut before anyone holds them whole. The SDK reads a
//     line of up to 10 MiB into its buffer, decodes it, and queues decoded
//     notifications; a hostile agent streaming 10 MiB updates made one run
//     hold gigabytes. A line longer than the limiter's read buffer is copied
//     through a lineClipper (clip.go) as it arrives, its long strings cut,
//     and reaches the SDK only once it has ended: at most maxHeldLine.
//
//  3. Flow control in bytes and in count. The SDK queues inbound
//     notifications in a channel of 1024 and closes the connection when it
//     overflows, even when the handler is fast: decoding a notification on
//     the processing side costs more than framing it on the receiving side,
//     so a burst of small updates can outrun it. And it runs each inbound
//     request on a goroutine of its own, holding the request until it is
//     answered. The limiter counts the session/update notifications it hands
//     to the SDK and those the client has processed, and the requests and
//     the SDK's answers to them, and stops reading the agent's stdout while
//     more than limiterHighWater notifications or limiterMaxRequests requests,
//     or more than limiterHeldBytes of both, are in flight. Backpressure then
//     reaches the agent through the pipe, as it should.
//
// So what one run holds of the agent's output is bounded in bytes, to a
// few MiB: the read buffer (64 KiB), one line being clipped (at most
// maxHeldLine, 1 MiB), the SDK's line buffer (1 MiB, which a maxHeldLine
// line can grow to 2 MiB), limiterHeldBytes (2 MiB) of notifications and
// requests in flight (or one line, when nothing else is), and the
// decoding of the one being handled.
const (
	limiterHighWater = 256
	// limiterMaxRequests bounds the agent's requests (permission, fs,
	// terminal) the SDK holds unanswered. The relay answers each at once
	// (a permission request may wait up to a second for the tool call it
	// names).
	limiterMaxRequests = 16
	// limiterHeldBytes bounds the bytes of the notifications and requests in
	// flight; one line is always let through when nothing is in flight.
	limiterHeldBytes = 2 << 20
	// limiterResync: if the client reports no progress for this long, the
	// limiter assumes it missed completions (an update or a request the SDK
	// rejected before the client saw it) and resets its counts.
	limiterResync = time.Second
	// maxLineBytes mirrors the SDK's scanner limit; a longer line is
	// protocol garbage, as it was when the SDK read it whole.
	maxLineBytes = 10 << 20
	// limiterReadBuffer is the limiter's read buffer: a line that fits passes
	// as it is, without a copy.
	limiterReadBuffer = 64 << 10
	// limiterClipNotes is how many cut or dropped lines the task log
	// describes one by one; the rest are counted, and the count is logged
	// when the limiter closes.
	limiterClipNotes = 3
)

// Limiter is the reader the SDK reads the agent's stdout through
// (see above); NewLimiter makes one.
type Limiter struct {
	br *bufio.Reader
	// onGarbage must not keep line: it may point into br's buffer.
	onGarbage func(why string, line []byte)
	// note writes a line to the task log; nil discards.
	Note func(format string, args ...any)
	// onRequest, when set, is called with the method of every request the
	// agent sends, before the SDK sees it (it must not block).
	OnRequest func(method string)

	cur  []byte // what is left of the current line for the SDK
	err  error
	long bool // inside a line longer than the read buffer
	clip lineClipper

	// Cut and dropped lines, for the task log (under mu: close reads
	// them while the reader may still run).
	cutLines, dropped int
	rawCut, keptCut   int64

	// queued and done count session/update notifications handed to the
	// SDK and processed by the client (awaitProcessed reads them).
	queued atomic.Int64
	done   atomic.Int64
	signal chan struct{}

	mu       sync.Mutex
	updates  []int            // sizes of the updates in flight, oldest first
	requests map[string][]int // sizes of the requests in flight, by id
	nreq     int              // requests in flight
	held     int              // bytes of both in flight

	closeOnce sync.Once
	closed    chan struct{}
	badOnce   sync.Once
}

func NewLimiter(r io.Reader, onGarbage func(why string, line []byte)) *Limiter {
	return &Limiter{
		br:        bufio.NewReaderSize(r, limiterReadBuffer),
		onGarbage: onGarbage,
		signal:    make(chan struct{}, 1),
		closed:    make(chan struct{}),
		requests:  map[string][]int{},
	}
}

func (sl *Limiter) logf(format string, args ...any) {
	if sl.Note != nil {
		sl.Note(format, args...)
	}
}

func (sl *Limiter) wake() {
	select {
	case sl.signal <- struct{}{}:
	default:
	}
}

// processed is called by the client after each session/update. It never
// blocks.
func (sl *Limiter) Processed() {
	sl.done.Add(1)
	sl.mu.Lock()
	if len(sl.updates) > 0 {
		sl.held -= sl.updates[0]
		sl.updates = sl.updates[1:]
	}
	sl.mu.Unlock()
	sl.wake()
}

// answered is called with every message the SDK writes to the agent; an
// answer to one of the agent's requests releases it. It never blocks.
func (sl *Limiter) answered(msg []byte) {
	var m struct {
		ID     *json.RawMessage `json:"id"`
		Method string           `json:"method"`
	}
	if json.Unmarshal(msg, &m) != nil || m.ID == nil || m.Method != "" {
		return // the relay's own request or notification
	}
	id := idKey(*m.ID)
	sl.mu.Lock()
	if sizes := sl.requests[id]; len(sizes) > 0 {
		sl.held -= sizes[0]
		sl.nreq--
		if len(sizes) == 1 {
			delete(sl.requests, id)
		} else {
			sl.requests[id] = sizes[1:]
		}
	}
	sl.mu.Unlock()
	sl.wake()
}

// idKey is a JSON-RPC id in one spelling, as read and as the SDK echoes
// it (it re-encodes the id it read).
func idKey(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// writer wraps the agent's stdin for the SDK: every message it writes
// (one per Write) goes through answered.
func (sl *Limiter) Writer(w io.Writer) io.Writer { return answerWatch{w, sl} }

type answerWatch struct {
	w  io.Writer
	sl *Limiter
}

func (a answerWatch) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.sl.answered(p)
	return n, err
}

// awaitProcessed waits, at most max, until every session/update the limiter
// has handed to the SDK so far has been processed by the client. The SDK
// runs an inbound request (session/request_permission) at once on its own
// goroutine, possibly before the notifications that preceded it on the
// wire; the permission handler calls this to see the tool call it is
// about. A short poll: it is rare, and the client never blocks.
func (sl *Limiter) AwaitProcessed(max time.Duration) {
	target := sl.queued.Load()
	deadline := time.Now().Add(max)
	for sl.done.Load() < target && time.Now().Before(deadline) {
		select {
		case <-sl.closed:
			return
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// close releases a Read waiting for flow control, and logs how many lines
// were cut or dropped beyond those described one by one.
func (sl *Limiter) Close() {
	sl.closeOnce.Do(func() {
		close(sl.closed)
		sl.mu.Lock()
		cut, dropped, raw, kept := sl.cutLines, sl.dropped, sl.rawCut, sl.keptCut
		sl.mu.Unlock()
		if cut+dropped > limiterClipNotes {
			sl.logf("in all, %d long line(s) from the agent were cut (%d MiB read, %d KiB kept) and %d dropped, to bound what the run holds",
				cut, raw>>20, kept>>10, dropped)
		}
	})
}

// Read implements io.Reader for the SDK's receive loop (one reader).
func (sl *Limiter) Read(p []byte) (int, error) {
	for len(sl.cur) == 0 {
		if sl.err != nil {
			return 0, sl.err
		}
		// No copy for a line that fits the buffer: ReadSlice's bytes stay
		// valid until the next read from br, and the loop reads again only
		// once sl.cur is used up. A longer line is copied, clipped, by the
		// lineClipper as its fragments come.
		line, err := sl.br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if !sl.long {
				sl.long = true
				sl.clip.reset()
			}
			sl.clip.write(line)
			continue
		case err != nil:
			sl.err = err
		}
		if sl.long {
			sl.long = false
			sl.cur = sl.endLong(line)
		} else {
			sl.cur = line
		}
		if len(sl.cur) > 0 {
			sl.inspect(sl.cur)
		}
	}
	n := copy(p, sl.cur)
	sl.cur = sl.cur[n:]
	return n, nil
}

// endLong finishes a line longer than the read buffer with its last
// fragment and returns what the SDK gets of it: the clipped line, or
// nothing (a line dropped, or refused as garbage).
func (sl *Limiter) endLong(last []byte) []byte {
	nl := len(last) > 0 && last[len(last)-1] == '\n'
	if nl {
		last = last[:len(last)-1]
	}
	c := &sl.clip
	c.write(last)
	raw := c.raw
	switch {
	case raw > maxLineBytes:
		sl.bad("a line longer than 10 MiB", c.out)
		return nil
	case c.over && c.method != "" && !c.hasID:
		// A notification needs no answer: dropped, and said so.
		if sl.tally(func() { sl.dropped++ }) {
			sl.logf("dropped a %s notification of %d bytes from the agent: more than %d KiB even with its strings cut",
				quoteMethod(c.method), raw, maxHeldLine>>10)
		}
		return nil
	case c.over:
		sl.bad(fmt.Sprintf("a request or response of more than %d KiB even with its strings cut", maxHeldLine>>10), c.out)
		return nil
	}
	if c.cutStrings > 0 {
		if sl.tally(func() {
			sl.cutLines, sl.rawCut, sl.keptCut = sl.cutLines+1, sl.rawCut+int64(raw), sl.keptCut+int64(len(c.out))
		}) {
			sl.logf("cut a %s line of %d bytes from the agent to %d: %d string(s) longer than %d KiB (%d KiB for its message text) cut, marked \"…[N bytes cut]\"",
				quoteMethod(c.method), raw, len(c.out), c.cutStrings, clipOtherBytes>>10, clipTextBytes>>10)
		}
	}
	if nl {
		c.out = append(c.out, '\n')
	}
	return c.out
}

// tally counts a cut or dropped line with f, under sl.mu, and reports
// whether it is one of those the task log describes one by one.
func (sl *Limiter) tally(f func()) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	f()
	return sl.cutLines+sl.dropped <= limiterClipNotes
}

func quoteMethod(m string) string {
	if m == "" {
		return "response"
	}
	return fmt.Sprintf("%q", m)
}

// inspect classifies one complete line as the SDK will and applies flow
// control before the SDK sees it.
func (sl *Limiter) inspect(line []byte) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return
	}
	var m struct {
		ID     *json.RawMessage `json:"id"`
		Method string           `json:"method"`
	}
	if err := json.Unmarshal(t, &m); err != nil {
		sl.bad("a line that is not JSON", t)
		return
	}
	switch {
	case m.Method == "" && m.ID == nil:
		sl.bad("a JSON line that is neither a request, a response nor a notification", t)
	case m.Method == acp.ClientMethodSessionUpdate && m.ID == nil:
		sl.admit(len(line), "")
	case m.Method != "" && m.ID != nil:
		if sl.OnRequest != nil {
			sl.OnRequest(m.Method)
		}
		sl.admit(len(line), idKey(*m.ID))
	}
}

func (sl *Limiter) bad(why string, line []byte) {
	sl.badOnce.Do(func() {
		if sl.onGarbage != nil {
			sl.onGarbage(why, line)
		}
	})
}

// admit waits until the line (an update when id is "", else a request)
// fits in flight, then counts it.
func (sl *Limiter) admit(n int, id string) {
	for {
		sl.mu.Lock()
		fits := sl.held == 0 || sl.held+n <= limiterHeldBytes
		if id == "" {
			fits = fits && len(sl.updates) < limiterHighWater
		} else {
			fits = fits && sl.nreq < limiterMaxRequests
		}
		if fits {
			sl.count(n, id)
			sl.mu.Unlock()
			return
		}
		sl.mu.Unlock()
		t := time.NewTimer(limiterResync)
		select {
		case <-sl.signal:
		case <-sl.closed:
			t.Stop()
			sl.mu.Lock()
			sl.count(n, id)
			sl.mu.Unlock()
			return
		case <-t.C:
			sl.resync()
		}
		t.Stop()
	}
}

// count records a line in flight. sl.mu is held.
func (sl *Limiter) count(n int, id string) {
	sl.held += n
	if id == "" {
		sl.updates = append(sl.updates, n)
		sl.queued.Add(1)
		return
	}
	sl.requests[id] = append(sl.requests[id], n)
	sl.nreq++
}

// resync forgets what is in flight (see limiterResync).
func (sl *Limiter) resync() {
	sl.mu.Lock()
	sl.updates, sl.requests, sl.nreq, sl.held = nil, map[string][]int{}, 0, 0
	sl.mu.Unlock()
	sl.done.Store(sl.queued.Load())
}
