package socketapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// connDaemon is a stand-in daemon for the client's connection handling: a
// plain net/http server on a Unix socket that counts connections and
// requests and can drop connections on cue.
type connDaemon struct {
	sock  string
	srv   *http.Server
	conns atomic.Int64 // connections accepted
	posts atomic.Int64 // POST /v1/messages received

	mu   sync.Mutex
	open map[net.Conn]bool
	// hangUp makes POST /v1/messages close its connection without an answer.
	hangUp atomic.Bool
	// slow makes GET /v1/tasks wait this long, and slowPost POST
	// /v1/messages (after it counted the post).
	slow, slowPost time.Duration
}

func startConnDaemon(t *testing.T) *connDaemon {
	t.Helper()
	d := &connDaemon{sock: filepath.Join(apiShortDir(t), "relay.sock"), open: map[net.Conn]bool{}}
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/version", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(VersionInfo{Version: "test", API: APIVersion})
	})
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		d.posts.Add(1)
		select {
		case <-time.After(d.slowPost):
		case <-r.Context().Done():
		}
		if d.hangUp.Load() {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		_ = json.NewEncoder(w).Encode(model.Message{ID: "M-1", State: model.MessageStored})
	})
	mux.HandleFunc("GET /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d.slow):
		case <-r.Context().Done():
		}
		_ = json.NewEncoder(w).Encode(TaskList{Tasks: []model.Task{}})
	})
	d.srv = &http.Server{Handler: mux, ConnState: func(c net.Conn, s http.ConnState) {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch s {
		case http.StateNew:
			d.conns.Add(1)
			d.open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(d.open, c)
		}
	}}
	go func() { _ = d.srv.Serve(ln) }()
	t.Cleanup(func() { _ = d.srv.Close() })
	return d
}

// dropAll closes every connection, as a daemon does with idle ones.
func (d *connDaemon) dropAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.open {
		_ = c.Close()
	}
}

func connTestClient(t *testing.T, d *connDaemon, timeout time.Duration) *Client {
	t.Helper()
	return apiNewClient(t, d.sock, ClientOptions{Agent: "claude", Timeout: timeout})
}

// connWarm starts a stand-in daemon and a client that has made one send,
// so that the client holds an idle connection.
func connWarm(t *testing.T) (*connDaemon, *Client) {
	t.Helper()
	d := startConnDaemon(t)
	c := connTestClient(t, d, 0)
	if _, err := c.SendMessage(context.Background(), "claude", model.SendRequest{To: "codex", Body: "warm"}); err != nil {
		t.Fatal(err)
	}
	return d, c
}

// TestClientReusesOneConnection: sequential calls share one connection.
func TestClientReusesOneConnection(t *testing.T) {
	t.Parallel()
	d := startConnDaemon(t)
	c := connTestClient(t, d, 0)
	for range 20 {
		if _, err := c.SendMessage(context.Background(), "claude", model.SendRequest{To: "codex", Body: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.conns.Load(); n != 1 {
		t.Errorf("%d connections for 21 sequential calls, want 1", n)
	}
}

// TestClientRetriesAConnectionTheDaemonClosed: a call on an idle connection
// the daemon has closed goes out once on a new connection, and reaches the
// daemon exactly once.
func TestClientRetriesAConnectionTheDaemonClosed(t *testing.T) {
	t.Parallel()
	d, c := connWarm(t)
	ctx := context.Background()
	for i := range 3 {
		d.dropAll()
		time.Sleep(20 * time.Millisecond) // the close reaches the client's end
		if _, err := c.SendMessage(ctx, "claude", model.SendRequest{To: "codex", Body: "again"}); err != nil {
			t.Fatalf("send %d after the daemon closed the idle connection: %v", i, err)
		}
		if _, err := c.ListTasks(ctx, "claude", "", 10, ""); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	if n := d.posts.Load(); n != 4 {
		t.Errorf("the daemon received %d sends, want 4 (each exactly once)", n)
	}
}

// TestClientNeverReplaysAPost: a POST whose connection is dropped after the
// daemon read it fails with outcome_unknown (the daemon may have acted on
// it), never daemon_unavailable, which says nothing was done; it is not
// sent again.
func TestClientNeverReplaysAPost(t *testing.T) {
	t.Parallel()
	d, c := connWarm(t)
	ctx := context.Background()
	d.hangUp.Store(true)
	_, err := c.SendMessage(ctx, "claude", model.SendRequest{To: "codex", Body: "once"})
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeOutcomeUnknown || me.Hint == "" || !strings.Contains(me.Message, "may have been carried out") {
		t.Fatalf("err = %v, want outcome_unknown with a hint", err)
	}
	if n := d.posts.Load(); n != 2 {
		t.Errorf("the daemon received %d sends, want 2: the dropped one was replayed", n)
	}
	d.hangUp.Store(false)
	if _, err := c.SendMessage(ctx, "claude", model.SendRequest{To: "codex", Body: "after"}); err != nil {
		t.Errorf("send after a dropped connection: %v", err)
	}
}

// TestClientTimeoutCutsASlowAnswer: the call's timeout ends a read the
// daemon does not answer, promptly, with daemon_unavailable (a read
// changes nothing, whether or not the daemon served it).
func TestClientTimeoutCutsASlowAnswer(t *testing.T) {
	t.Parallel()
	d := startConnDaemon(t)
	d.slow = time.Minute
	c := connTestClient(t, d, 300*time.Millisecond)
	start := time.Now()
	_, err := c.ListTasks(context.Background(), "claude", "", 10, "")
	if model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Fatalf("err = %v, want daemon_unavailable", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the call took %v, want about the 300 ms timeout", el)
	}
	// Cancellation works the same way.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	c2 := connTestClient(t, d, -1)
	if _, err := c2.ListTasks(ctx, "claude", "", 10, ""); model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("canceled call: err = %v, want daemon_unavailable", err)
	}
}

// TestClientTimeoutAfterAPostIsOutcomeUnknown: a POST the daemon received
// but did not answer within the call's timeout, or whose call was
// canceled meanwhile, is outcome_unknown: the daemon may still carry it
// out.
func TestClientTimeoutAfterAPostIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	d := startConnDaemon(t)
	d.slowPost = time.Minute
	c := connTestClient(t, d, 300*time.Millisecond)
	_, err := c.SendMessage(context.Background(), "claude", model.SendRequest{To: "codex", Body: "slow"})
	if model.ErrorCode(err) != model.CodeOutcomeUnknown || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("timed out: err = %v, want outcome_unknown naming the timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c2 := connTestClient(t, d, -1)
	posts := d.posts.Load()
	go func() {
		// Cancel once the daemon has the request.
		for d.posts.Load() == posts {
			runtime.Gosched()
		}
		cancel()
	}()
	if _, err := c2.SendMessage(ctx, "claude", model.SendRequest{To: "codex", Body: "canceled"}); model.ErrorCode(err) != model.CodeOutcomeUnknown || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("canceled: err = %v, want outcome_unknown naming the cancel", err)
	}
}

// unreadDaemon is a stand-in daemon that answers the first n requests on
// its first connection (HTTP/1.1, kept alive), then closes every
// connection as soon as a request's first byte has arrived, with the rest
// of it unread, as a daemon does that stops or is killed before it read
// the request.
type unreadDaemon struct {
	sock     string
	answered atomic.Int64 // requests answered
	cut      atomic.Int64 // connections closed with a request unread
}

func startUnreadDaemon(t *testing.T, n int) *unreadDaemon {
	t.Helper()
	d := &unreadDaemon{sock: filepath.Join(apiShortDir(t), "relay.sock")}
	ln, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	conns.Go(func() {
		for first := true; ; first = false {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			serve := 0
			if first {
				serve = n
			}
			conns.Go(func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for range serve {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					body := `{"message_id":"MSG-1","state":"stored"}`
					fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
					d.answered.Add(1)
				}
				var b [1]byte
				if _, err := nc.Read(b[:]); err == nil {
					d.cut.Add(1)
				}
			})
		}
	})
	return d
}

// TestClientRequestClosedUnreadIsNotSent: a daemon that closes the
// connection with the request unread never had it: on a fresh connection
// the call is daemon_unavailable (nothing was done; a retry is safe), and
// on a reused one it goes out once more on a new connection, as when the
// daemon had closed the idle connection first.
func TestClientRequestClosedUnreadIsNotSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := model.SendRequest{To: "codex", Body: strings.Repeat("x", 1000)}

	d := startUnreadDaemon(t, 0)
	c := connTestClient(t, &connDaemon{sock: d.sock}, 0)
	_, err := c.SendMessage(ctx, "claude", req)
	if model.ErrorCode(err) != model.CodeDaemonUnavailable || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("fresh connection: err = %v, want daemon_unavailable saying nothing was changed", err)
	}
	if d.cut.Load() != 1 {
		t.Errorf("%d connections cut, want 1", d.cut.Load())
	}

	d = startUnreadDaemon(t, 1)
	c = connTestClient(t, &connDaemon{sock: d.sock}, 0)
	if _, err := c.SendMessage(ctx, "claude", req); err != nil {
		t.Fatal(err)
	}
	_, err = c.SendMessage(ctx, "claude", req)
	if model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Fatalf("reused connection: err = %v, want daemon_unavailable after one retry", err)
	}
	if d.cut.Load() != 2 {
		t.Errorf("%d connections cut, want 2: the reused one and the retry's", d.cut.Load())
	}
}
