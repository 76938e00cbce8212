package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The facade's own stdio transport: newline-delimited JSON-RPC on stdin and
// stdout, served by the MCP server's HandleMessage.
//
// mcp-go's StdioServer cancels the context of every request in flight as
// soon as stdin ends (v1.6.0 still does: its workers then run the calls
// still queued with that canceled context), so a one-shot client
// (`printf … | relay mcp`) got daemon_unavailable for calls the daemon
// had stored, or no answer at all. Here requests run on a
// context that stdin's end does not cancel; at the end of stdin (or of the
// serve context) reading stops, every request already read is finished
// and answered, and only then does Serve return.

// DefaultDrain is how long requests still running when stdin ends get to
// finish before they are canceled: longer than a daemon call's own bound
// (socketapi.DefaultClientTimeout, 30 s; a test keeps it twice that), so
// that in practice none is cut.
const DefaultDrain = 60 * time.Second

// maxInFlight bounds the requests served at once; the facade reads the
// next line when one of them is done.
const maxInFlight = 16

// mcpStdio serves one MCP client over stdio.
type mcpStdio struct {
	s     *server.MCPServer
	tasks *taskLayer // the MCP tasks extension, in front of s (nil: none)
	log   *slog.Logger

	// outMu serializes writes to out. outErr is the first write error:
	// the client no longer reads, so later answers are dropped (their
	// requests still run to the end).
	outMu  sync.Mutex
	out    io.Writer
	outErr error

	reqs  sync.WaitGroup // requests being served
	slots chan struct{}  // one per request being served
}

// serveStdio serves s on in and out until in ends, reading fails, or ctx
// is done; then it waits for the requests already read (at most drain,
// after which they are canceled) and returns the read error, if any.
func serveStdio(ctx context.Context, s *server.MCPServer, tasks *taskLayer, in io.Reader, out io.Writer, drain time.Duration, log *slog.Logger) error {
	sess := &mcpSession{notes: make(chan mcp.JSONRPCNotification, 100)}
	// Requests outlive stdin and ctx: a request read is a request the
	// client sent, finished whether or not the client is still there.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	reqCtx = s.WithContext(reqCtx, sess)
	if err := s.RegisterSession(reqCtx, sess); err != nil {
		return fmt.Errorf("register the stdio session: %w", err)
	}
	defer s.UnregisterSession(reqCtx, sess.SessionID())

	st := &mcpStdio{s: s, tasks: tasks, log: log, out: out, slots: make(chan struct{}, maxInFlight)}
	notesDone := make(chan struct{})
	stopNotes := make(chan struct{})
	go func() {
		defer close(notesDone)
		for {
			select {
			case n := <-sess.notes:
				st.write(n)
			case <-stopNotes:
				return
			}
		}
	}()

	err := st.read(ctx, reqCtx, in)

	served := make(chan struct{})
	go func() { st.reqs.Wait(); close(served) }()
	t := time.NewTimer(drain)
	select {
	case <-served:
		t.Stop()
	case <-t.C:
		log.Warn("mcp: requests still running after the drain bound; canceling them", "drain", drain)
		cancelReqs()
		<-served
	}
	close(stopNotes)
	<-notesDone
	return err
}

// mcpLine is one line read from stdin, or the read's error.
type mcpLine struct {
	b   []byte
	err error
}

// read reads lines from in and serves each until in ends (nil), a read
// fails (its error) or ctx is done (nil). Only the goroutine blocked in a
// read of in may outlive it, until in is closed.
func (st *mcpStdio) read(ctx, reqCtx context.Context, in io.Reader) error {
	lines := make(chan mcpLine)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		br := bufio.NewReader(in)
		for {
			b, err := br.ReadBytes('\n')
			select {
			case lines <- mcpLine{b, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var l mcpLine
		select {
		case l = <-lines:
		case <-ctx.Done():
			return nil
		}
		// A last line without its newline is still a message.
		if len(bytes.TrimSpace(l.b)) > 0 && (l.err == nil || l.err == io.EOF) {
			st.serve(reqCtx, l.b)
		}
		if l.err == io.EOF {
			return nil
		}
		if l.err != nil {
			return l.err
		}
	}
}

// frame is what the facade's own layers read of a JSON-RPC message, parsed
// once per line: the id (nil for a notification), the method and the raw
// params, which the task layer reads only for the methods it answers.
// mcp-go parses the line again itself (HandleMessage takes bytes).
type frame struct {
	raw    json.RawMessage
	id     any
	method string
	params json.RawMessage
}

// parseFrame parses one line; an error means it is not JSON.
func parseFrame(line []byte) (frame, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	// A message that is JSON but not an object (an array, a string) is
	// still served: mcp-go answers it as an invalid request.
	if err := json.Unmarshal(line, &m); err != nil {
		var ute *json.UnmarshalTypeError
		if !errors.As(err, &ute) {
			return frame{}, err
		}
	}
	f := frame{raw: json.RawMessage(line), method: m.Method, params: m.Params}
	if len(m.ID) > 0 && string(m.ID) != "null" {
		var id any
		if json.Unmarshal(m.ID, &id) == nil {
			f.id = id
		}
	}
	return f, nil
}

// serve serves one message: a request on its own goroutine (the next line
// is read meanwhile, up to maxInFlight requests at once), a
// notification in line, so that it takes effect before the next message.
func (st *mcpStdio) serve(ctx context.Context, line []byte) {
	f, err := parseFrame(line)
	if err != nil {
		st.write(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(nil),
			Error: mcp.NewJSONRPCErrorDetails(mcp.PARSE_ERROR, "Parse error", nil)})
		return
	}
	if f.id == nil {
		st.handle(ctx, f)
		return
	}
	st.slots <- struct{}{}
	st.reqs.Go(func() {
		defer func() { <-st.slots }()
		st.handle(ctx, f)
	})
}

// handle runs HandleMessage and writes its answer, if any. A panic is
// answered as an internal JSON-RPC error (for a request) and logged.
func (st *mcpStdio) handle(ctx context.Context, f frame) {
	id := f.id
	var resp mcp.JSONRPCMessage
	func() {
		defer func() {
			if r := recover(); r != nil {
				st.log.Error("mcp: panic serving a message", "panic", r)
				if id != nil {
					resp = mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
						Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, "internal error", nil)}
				}
			}
		}()
		// The frame is checked whole before mcp-go reads it (checkFrame):
		// mcp-go (v1.6) refuses some ambiguous frames itself, with a
		// message that does not name the relay's code.
		if err := checkFrame(f.raw); err != nil {
			if id != nil {
				resp = mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
					Error: mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, err.Error(), nil)}
			}
			return
		}
		next := func() mcp.JSONRPCMessage { return st.s.HandleMessage(ctx, f.raw) }
		if st.tasks != nil {
			if r, ok := st.tasks.serve(ctx, f, next); ok {
				resp = r
				return
			}
		}
		resp = next()
	}()
	if resp != nil {
		st.write(resp)
	}
}

// write writes msg as one line. After a failed write nothing more is
// written: the client has stopped reading (its end of stdout is closed).
func (st *mcpStdio) write(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		st.log.Error("mcp: encode an answer", "err", err)
		return
	}
	b = append(b, '\n')
	st.outMu.Lock()
	defer st.outMu.Unlock()
	if st.outErr != nil {
		return
	}
	if _, err := st.out.Write(b); err != nil {
		st.outErr = err
		st.log.Warn("mcp: the client no longer reads answers; the requests it sent still run to the end", "err", err)
	}
}

// mcpSession is the one client session of a stdio facade.
type mcpSession struct {
	notes       chan mcp.JSONRPCNotification
	initialized atomic.Bool

	mu      sync.Mutex
	info    mcp.Implementation
	caps    mcp.ClientCapabilities
	version string
}

var (
	_ server.SessionWithClientInfo      = (*mcpSession)(nil)
	_ server.SessionWithProtocolVersion = (*mcpSession)(nil)
)

// SessionID implements server.ClientSession. One process serves one stdio
// client, so the id is fixed.
func (*mcpSession) SessionID() string { return "stdio" }

// NotificationChannel implements server.ClientSession.
func (s *mcpSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return s.notes }

// Initialize implements server.ClientSession.
func (s *mcpSession) Initialize() { s.initialized.Store(true) }

// Initialized implements server.ClientSession.
func (s *mcpSession) Initialized() bool { return s.initialized.Load() }

// GetClientInfo implements server.SessionWithClientInfo.
func (s *mcpSession) GetClientInfo() mcp.Implementation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// SetClientInfo implements server.SessionWithClientInfo.
func (s *mcpSession) SetClientInfo(i mcp.Implementation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info = i
}

// GetClientCapabilities implements server.SessionWithClientInfo.
func (s *mcpSession) GetClientCapabilities() mcp.ClientCapabilities {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

// SetClientCapabilities implements server.SessionWithClientInfo.
func (s *mcpSession) SetClientCapabilities(c mcp.ClientCapabilities) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps = c
}

// ProtocolVersion implements server.SessionWithProtocolVersion: the version
// negotiated at initialize.
func (s *mcpSession) ProtocolVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// SetProtocolVersion records the version negotiated at initialize (mcp-go
// calls it on sessions that have it).
func (s *mcpSession) SetProtocolVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}
