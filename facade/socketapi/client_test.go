package socketapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestClientNoDaemon(t *testing.T) {
	t.Parallel()
	dir := apiShortDir(t)
	sock := filepath.Join(dir, "relay.sock")
	c := apiNewClient(t, sock, ClientOptions{Agent: "claude"})
	_, err := c.GetTask(context.Background(), "", "T-1")
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeDaemonUnavailable {
		t.Fatalf("no socket: %v, want daemon_unavailable", err)
	}
	if !strings.Contains(me.Hint, "relay daemon --home "+dir) {
		t.Errorf("hint %q does not say how to start the daemon", me.Hint)
	}

	// A stale socket file (connection refused) is no daemon either.
	apiStaleSocket(t, sock)
	if _, err := c.Version(context.Background()); model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("stale socket: %v, want daemon_unavailable", err)
	}
}

// apiAutostarter starts a server on sock after a delay, as a background
// daemon would, and counts how often it was asked to.
type apiAutostarter struct {
	t     *testing.T
	sock  string
	svc   model.Service
	delay time.Duration
	err   error // returned instead of starting, when set

	calls atomic.Int32
	mu    sync.Mutex
	wg    sync.WaitGroup
	srvs  []*apiServer
}

func (a *apiAutostarter) start(ctx context.Context) error {
	a.calls.Add(1)
	if a.err != nil {
		return a.err
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		time.Sleep(a.delay)
		ln, err := Listen(a.sock)
		if err != nil {
			a.t.Errorf("autostart Listen: %v", err)
			return
		}
		s := &apiServer{srv: NewServer(a.svc, ServerOptions{Version: "auto"}), sock: a.sock, ln: ln, done: make(chan error, 1)}
		a.mu.Lock()
		a.srvs = append(a.srvs, s)
		a.mu.Unlock()
		go func() { s.done <- s.srv.Serve(ln) }()
	}()
	return nil
}

// stopAll stops every server the autostarter started.
func (a *apiAutostarter) stopAll() {
	a.wg.Wait()
	a.mu.Lock()
	srvs := a.srvs
	a.srvs = nil
	a.mu.Unlock()
	for _, s := range srvs {
		s.stop(a.t)
	}
}

func TestClientAutostart(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	a := &apiAutostarter{t: t, sock: sock, svc: f, delay: 200 * time.Millisecond}
	t.Cleanup(a.stopAll)
	c := apiNewClient(t, sock, ClientOptions{Agent: "claude", Autostart: a.start, StartWait: 5 * time.Second})
	task, err := c.GetTask(context.Background(), "", "T-1")
	if err != nil || task.ID != "T-1" {
		t.Fatalf("call with autostart: %+v, %v", task, err)
	}
	if n := a.calls.Load(); n != 1 {
		t.Errorf("Autostart called %d times, want 1", n)
	}
	v, err := c.Version(context.Background())
	if err != nil || v != "auto" {
		t.Errorf("Version = %q, %v", v, err)
	}
}

// apiConcurrentCalls makes n concurrent GetTask calls and returns their
// errors.
func apiConcurrentCalls(c *Client, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.GetTask(context.Background(), "", "T-1")
		})
	}
	wg.Wait()
	return errs
}

func TestClientConcurrentCallsShareOneAutostart(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	a := &apiAutostarter{t: t, sock: sock, svc: f, delay: 200 * time.Millisecond}
	t.Cleanup(a.stopAll)
	c := apiNewClient(t, sock, ClientOptions{Agent: "claude", Autostart: a.start, StartWait: 5 * time.Second})

	for i, err := range apiConcurrentCalls(c, 10) {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if n := a.calls.Load(); n != 1 {
		t.Errorf("10 concurrent first calls made %d Autostart calls, want 1", n)
	}

	// The daemon goes away after having answered (the version is already
	// checked, so every call dials at once): the next burst of concurrent
	// calls shares one new autostart.
	a.stopAll()
	c.Close()
	for i, err := range apiConcurrentCalls(c, 10) {
		if err != nil {
			t.Errorf("call %d after the daemon went away: %v", i, err)
		}
	}
	if n := a.calls.Load(); n != 2 {
		t.Errorf("Autostart called %d times in all, want 2", n)
	}
	if got := len(f.Calls()); got != 20 {
		t.Errorf("the service got %d calls, want 20", got)
	}
}

func TestClientAutostartFailure(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	a := &apiAutostarter{t: t, sock: sock, err: errors.New("relay binary not found")}
	c := apiNewClient(t, sock, ClientOptions{Agent: "claude", Autostart: a.start})
	_, err := c.GetTask(context.Background(), "", "T-1")
	if model.ErrorCode(err) != model.CodeDaemonUnavailable || !strings.Contains(err.Error(), "relay binary not found") {
		t.Errorf("failed autostart: %v", err)
	}
	// A failed attempt is not repeated on every call.
	_, err = c.GetTask(context.Background(), "", "T-1")
	if model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("second call: %v", err)
	}
	if n := a.calls.Load(); n != 1 {
		t.Errorf("Autostart called %d times, want 1", n)
	}
}

func TestClientAutostartTimesOut(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	started := false
	c := apiNewClient(t, sock, ClientOptions{Agent: "claude", StartWait: 300 * time.Millisecond,
		Autostart: func(context.Context) error { started = true; return nil }}) // starts nothing
	t0 := time.Now()
	_, err := c.GetTask(context.Background(), "", "T-1")
	if model.ErrorCode(err) != model.CodeDaemonUnavailable || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("autostarted daemon that never answers: %v", err)
	}
	if d := time.Since(t0); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("gave up after %s, want about StartWait (300ms)", d)
	}
	if !started {
		t.Error("Autostart was not called")
	}
}

// TestClientRefusesAPIMismatch: an answer from a daemon of another socket
// API version (its X-Relay-API header) is refused, daemon_unavailable with
// both versions, and its body is not taken as this version's answer;
// Version refuses one whose body says so. The client asks for no version
// first: its first request is the call itself.
func TestClientRefusesAPIMismatch(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		paths []string
	)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get(APIHeader))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(APIHeader, "2")
		w.Header().Set(VersionHeader, "9.9.9")
		_, _ = w.Write([]byte(`{"version":"9.9.9","api":2,"messages":[],"unread":0}`))
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Shutdown(context.Background()); <-done })

	c := apiNewClient(t, sock, ClientOptions{Agent: "claude"})
	_, err = c.CheckInbox(context.Background(), "claude", true, 10)
	if model.ErrorCode(err) != model.CodeDaemonUnavailable || !strings.Contains(err.Error(), "API 2") || !strings.Contains(err.Error(), "9.9.9") {
		t.Errorf("API mismatch: %v", err)
	}
	if _, err := c.Version(context.Background()); err == nil {
		t.Error("Version accepted API 2")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"POST /v1/inbox 1", "GET /v1/version 1"}; !slices.Equal(paths, want) {
		t.Errorf("the daemon got %q, want %q (no version round trip before a call; every request says its API)", paths, want)
	}
}

func TestClientUndecodableErrorBody(t *testing.T) {
	t.Parallel()
	err := clientDecodeError(502, []byte("<html>bad gateway</html>"))
	if model.ErrorCode(err) != model.CodeInternal || !strings.Contains(err.Error(), "502") {
		t.Errorf("non-JSON error body: %v", err)
	}
}

// TestClientRefusesADaemonOfAnotherUID: a client whose socket is served by
// another uid (as SO_PEERCRED reports it) refuses with daemon_unavailable
// naming that uid, and the server never gets a request; BeforeDial's
// refusal is returned as it is, before any connection.
func TestClientRefusesADaemonOfAnotherUID(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	other := os.Geteuid() + 1
	c := apiNewClient(t, s.sock, ClientOptions{Agent: "claude",
		PeerCred: func(conn net.Conn) (int, int, error) {
			_, pid, err := PeerCred(conn)
			return other, pid, err
		}})
	_, err := c.CheckInbox(context.Background(), "claude", true, 10)
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeDaemonUnavailable || !strings.Contains(me.Message, fmt.Sprintf("served by uid %d", other)) || me.Hint == "" {
		t.Fatalf("another uid's socket: %v, want daemon_unavailable naming uid %d with a hint", err, other)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the server was called: %v", calls)
	}

	refusal := &model.Error{Code: model.CodeDaemonUnavailable, Message: "home owned by someone else", Hint: "h"}
	c2 := apiNewClient(t, s.sock, ClientOptions{Agent: "claude", BeforeDial: func() error { return refusal }})
	if _, err := c2.CheckInbox(context.Background(), "claude", true, 10); !errors.As(err, &me) || me != refusal {
		t.Errorf("BeforeDial refusal: %v, want it as it is", err)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the server was called: %v", calls)
	}
}
