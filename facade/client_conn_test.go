package facade

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
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
	// slow makes GET /v1/tasks wait this long.
	slow time.Duration
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
		if _, err := c.ListTasks(ctx, "claude", "", 10); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	if n := d.posts.Load(); n != 4 {
		t.Errorf("the daemon received %d sends, want 4 (each exactly once)", n)
	}
}

// TestClientNeverReplaysAPost: a POST whose connection is dropped after the
// daemon read it fails with daemon_unavailable; it is not sent again (the
// daemon may have acted on it).
func TestClientNeverReplaysAPost(t *testing.T) {
	t.Parallel()
	d, c := connWarm(t)
	ctx := context.Background()
	d.hangUp.Store(true)
	_, err := c.SendMessage(ctx, "claude", model.SendRequest{To: "codex", Body: "once"})
	if model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Fatalf("err = %v, want daemon_unavailable", err)
	}
	if n := d.posts.Load(); n != 2 {
		t.Errorf("the daemon received %d sends, want 2: the dropped one was replayed", n)
	}
	d.hangUp.Store(false)
	if _, err := c.SendMessage(ctx, "claude", model.SendRequest{To: "codex", Body: "after"}); err != nil {
		t.Errorf("send after a dropped connection: %v", err)
	}
}

// TestClientTimeoutCutsASlowAnswer: the call's timeout ends a call the
// daemon does not answer, promptly, with daemon_unavailable.
func TestClientTimeoutCutsASlowAnswer(t *testing.T) {
	t.Parallel()
	d := startConnDaemon(t)
	d.slow = time.Minute
	c := connTestClient(t, d, 300*time.Millisecond)
	start := time.Now()
	_, err := c.ListTasks(context.Background(), "claude", "", 10)
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
	if _, err := c2.ListTasks(ctx, "claude", "", 10); model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("canceled call: err = %v, want daemon_unavailable", err)
	}
}
