package socketapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The client's own HTTP/1.1 round trips over pooled socket connections.
//
// net/http's Transport runs a reader and a writer goroutine per connection
// and hands every request and answer between them and the caller; across
// processes each hand-off is a thread wake-up, and a facade's send_message
// paid for two of them on top of the socket I/O. Here the calling goroutine
// writes the request and reads the answer itself, on a connection it holds
// alone for the call; the wire is the same HTTP/1.1 the daemon's net/http
// server speaks.
//
// It is kept instead of an http.Client on a Transport with a unix
// DialContext because it measured clearly cheaper where the relay is
// short of its aim: BENCHMARKS.md, "What was changed", "The facade's
// socket client makes its own HTTP/1.1 round trips" (the
// send_message_8_facades row's facade CPU per call, and
// BenchmarkAPIGetTask against BenchmarkAPIGetTaskHTTPTransport). The
// Transport also hides whether a failed request reached the daemon, which
// daemon_unavailable ("nothing was changed") against outcome_unknown
// needs: a daemon that closed the connection with the request unread
// (ECONNRESET) looks to it like one that read it and then closed.

// clientMaxIdle bounds the idle connections a client keeps.
const clientMaxIdle = 16

// clientIdleFor is how long an idle connection is reused: shorter than the
// server's idle timeout, so the daemon has not closed it yet.
const clientIdleFor = DefaultIdleTimeout / 2

// clientConn is one connection to the daemon.
type clientConn struct {
	nc   net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // when it went back to the pool
}

// clientPool holds a client's idle connections, newest last.
type clientPool struct {
	mu   sync.Mutex
	idle []*clientConn
}

// get returns an idle connection young enough to reuse, or nil.
func (p *clientPool) get() *clientConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		cc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		if time.Since(cc.idle) < clientIdleFor {
			return cc
		}
		_ = cc.nc.Close()
	}
	return nil
}

// put returns cc to the pool, or closes it when the pool is full.
func (p *clientPool) put(cc *clientConn) {
	cc.idle = time.Now()
	p.mu.Lock()
	if len(p.idle) < clientMaxIdle {
		p.idle = append(p.idle, cc)
		cc = nil
	}
	p.mu.Unlock()
	if cc != nil {
		_ = cc.nc.Close()
	}
}

// closeAll closes every idle connection.
func (p *clientPool) closeAll() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, cc := range idle {
		_ = cc.nc.Close()
	}
}

// clientReq is one request to the daemon.
type clientReq struct {
	method string
	target string // path and query, already escaped
	agent  string // AgentHeader, if any
	body   []byte // JSON, if any
}

// write writes r to w as an HTTP/1.1 request. The request is written by
// hand rather than by http.Request.Write, whose error for a body cut short
// by the daemon hides the broken pipe behind a type without Unwrap.
func (r clientReq) write(w *bufio.Writer) error {
	for _, v := range []string{r.method, r.target, r.agent} {
		if strings.ContainsAny(v, "\r\n") {
			return errors.New("facade: a request line or header holds a line break")
		}
	}
	w.WriteString(r.method)
	w.WriteByte(' ')
	w.WriteString(r.target)
	w.WriteString(" HTTP/1.1\r\nHost: relay\r\nUser-Agent: relay\r\n" + APIHeader + ": " + apiVersionText + "\r\n")
	if r.agent != "" {
		w.WriteString(AgentHeader + ": " + r.agent + "\r\n")
	}
	if r.body != nil {
		w.WriteString("Content-Type: application/json\r\n")
	}
	if r.body != nil || r.method == http.MethodPost {
		w.WriteString("Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n")
	}
	w.WriteString("\r\n")
	w.Write(r.body)
	return w.Flush()
}

// errNotSent marks a failure before the daemon had the whole request: it
// cannot have acted on it, and the request may be sent again on another
// connection.
var errNotSent = errors.New("request not sent")

// errAnswerLost marks a failure after the whole request was written and
// before its whole answer was read: the daemon may have carried it out.
var errAnswerLost = errors.New("request sent, answer lost")

// do makes one round trip and returns the answer's status and body (at most
// limit bytes). A request that fails on a reused connection before it
// reached the daemon (the daemon had closed the idle connection) is sent
// once more on a new one; nothing that may have reached the daemon is sent
// twice, so a POST is never replayed.
func (c *Client) do(ctx context.Context, req clientReq, limit int64) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		cc := c.pool.get()
		reused := cc != nil
		if cc == nil {
			nc, err := c.dial(ctx, "unix", c.sock)
			if err != nil {
				return 0, nil, err
			}
			cc = &clientConn{nc: nc, br: bufio.NewReaderSize(nc, 8<<10), bw: bufio.NewWriterSize(nc, 8<<10)}
		}
		status, body, keep, err := cc.roundTrip(ctx, req, limit)
		if err == nil && keep {
			c.pool.put(cc)
		} else {
			_ = cc.nc.Close()
		}
		if err != nil && reused && attempt == 0 && errors.Is(err, errNotSent) {
			continue
		}
		return status, body, err
	}
}

// roundTrip writes req and reads its answer on cc. keep says whether cc may
// be reused.
func (cc *clientConn) roundTrip(ctx context.Context, req clientReq, limit int64) (status int, body []byte, keep bool, err error) {
	dl, _ := ctx.Deadline()
	if err := cc.nc.SetDeadline(dl); err != nil {
		return 0, nil, false, err
	}
	// Cancellation interrupts blocked I/O by moving the deadline to the
	// past. If that may still happen after the call (the context ended as
	// it finished), the connection is not reused: the late deadline would
	// cut the next call short.
	stop := context.AfterFunc(ctx, func() { _ = cc.nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			keep = false
		}
	}()

	werr := req.write(cc.bw)
	if werr != nil && !peerClosed(werr) {
		return 0, nil, false, ctxErr(ctx, werr)
	}
	// When the daemon closed the connection while the request was being
	// written, it may have answered first (a body over its limit gets 413
	// before the rest is read): that answer is in the socket's buffer. A
	// closed peer makes this read return at once.
	resp, err := http.ReadResponse(cc.br, nil)
	if werr != nil && err != nil {
		// No answer: the daemon cannot have acted on a request it did
		// not receive whole.
		return 0, nil, false, errors.Join(errNotSent, werr)
	}
	if err != nil && errors.Is(err, syscall.ECONNRESET) {
		// A Unix socket's reader sees ECONNRESET, not EOF, when the
		// daemon closed its end with bytes of the request still unread
		// (a daemon that stops closes its idle connections so): it never
		// had the whole request, so it cannot have acted on it.
		return 0, nil, false, errors.Join(errNotSent, err)
	}
	if err != nil {
		return 0, nil, false, errors.Join(errAnswerLost, ctxErr(ctx, err))
	}
	if v := resp.Header.Values(APIHeader); len(v) > 0 && (len(v) > 1 || v[0] != apiVersionText) {
		// A daemon of another version: nothing of its answer is read.
		resp.Body.Close()
		return 0, nil, false, &apiMismatch{api: strings.Join(v, ", "), version: resp.Header.Get(VersionHeader)}
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, limit))
	resp.Body.Close()
	if err != nil {
		return 0, nil, false, errors.Join(errAnswerLost, ctxErr(ctx, err))
	}
	// An answer longer than limit leaves bytes unread, and a request cut
	// short leaves the connection closed: neither is reused.
	keep = werr == nil && !resp.Close && int64(len(body)) < limit && ctx.Err() == nil
	return resp.StatusCode, body, keep, nil
}

// apiMismatch is an answer from a daemon of another socket API version
// (APIHeader), with its relay version.
type apiMismatch struct{ api, version string }

func (e *apiMismatch) Error() string {
	return fmt.Sprintf("the daemon speaks socket API %s (version %q)", e.api, e.version)
}

// peerClosed reports whether a write failed because the daemon had closed
// the connection.
func peerClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// ctxErr prefers the context's error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
