package socketapi

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// The daemon's own routes: status (with the facades the server knows),
// stop (answered, then the hook), and what counts as activity.
func TestAPIDaemonRoutes(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&apiFakeService{}, ServerOptions{Version: "test-1"})
	var stops atomic.Int32
	started := time.Now().UTC().Round(0)
	srv.ServeDaemon(DaemonHooks{
		Status: func(context.Context) (DaemonStatus, error) {
			return DaemonStatus{PID: 42, Home: "/h", Version: "test-1", StartedAt: started, TasksRunning: 1, TasksQueued: 2}, nil
		},
		Stop: func() { stops.Add(1) },
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	ctx := context.Background()
	op := apiNewClient(t, sock, ClientOptions{})

	st, err := op.DaemonStatus(ctx)
	if err != nil || st.PID != 42 || st.TasksRunning != 1 || st.TasksQueued != 2 || !st.StartedAt.Equal(started) || st.Facades == nil || len(st.Facades) != 0 {
		t.Fatalf("DaemonStatus = %+v, %v", st, err)
	}
	// Status requests are not activity: looking does not keep a daemon up.
	n, last := srv.Activity()
	if n != 0 || time.Since(last) < 0 {
		t.Fatalf("Activity = %d, %v", n, last)
	}
	before := last
	op2 := apiNewClient(t, sock, ClientOptions{}) // a new client
	for range 3 {
		if _, err := op2.DaemonStatus(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, last := srv.Activity(); !last.Equal(before) {
		t.Errorf("a status request moved the last activity from %v to %v", before, last)
	}

	// A facade announces itself: it is listed, by the kernel's pid.
	ag := apiNewClient(t, sock, ClientOptions{Agent: "claude"})
	if err := ag.Connected(ctx, model.Conn{Agent: "claude", PID: 1, Kind: "mcp"}); err != nil {
		t.Fatal(err)
	}
	if _, last := srv.Activity(); !last.After(before) {
		t.Error("an agent request did not count as activity")
	}
	st, err = op.DaemonStatus(ctx)
	if err != nil || len(st.Facades) != 1 || st.Facades[0].Agent != "claude" || st.Facades[0].PID != os.Getpid() || st.Facades[0].Kind != "mcp" {
		t.Fatalf("facades after a connection: %+v, %v", st.Facades, err)
	}
	// The operator CLI's own connections are no facade.
	if err := ag.Connected(ctx, model.Conn{Agent: "claude", Kind: "cli"}); err != nil {
		t.Fatal(err)
	}
	if fs := srv.Facades(); len(fs) != 1 {
		t.Errorf("facades after a cli connection: %+v", fs)
	}

	a, err := op.StopDaemon(ctx)
	if err != nil || !a.Stopping || a.PID != os.Getpid() || stops.Load() != 1 {
		t.Fatalf("StopDaemon = %+v, %v; stop hook called %d times", a, err, stops.Load())
	}
}

// A facade whose process is gone is no longer connected.
func TestAPIDaemonFacadeGone(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var fs facadeSet
	fs.add(model.Conn{Agent: "codex", PID: cmd.Process.Pid, Kind: "mcp"})
	if got := fs.live(); len(got) != 1 || got[0].PID != cmd.Process.Pid {
		t.Fatalf("live facades = %+v, want the running one", got)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if got := fs.live(); len(got) != 0 {
		t.Fatalf("live facades after its process ended = %+v, want none", got)
	}
}

// Pause holds new requests without answering them; Resume serves them;
// Shutdown answers those still held daemon_unavailable, with nothing
// done. Pause waits for the requests being served.
func TestAPIPauseHoldsRequests(t *testing.T) {
	t.Parallel()
	serve := func(t *testing.T) (*Server, string, func()) {
		sock := filepath.Join(apiShortDir(t), "relay.sock")
		ln, err := Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServer(&apiFakeService{}, ServerOptions{Version: "test-1"})
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
				<-done
			})
		}
		t.Cleanup(stop)
		return srv, sock, stop
	}
	held := func(t *testing.T, srv *Server, n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for srv.Held() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests held, want %d", srv.Held(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	t.Run("resume serves them", func(t *testing.T) {
		t.Parallel()
		srv, sock, _ := serve(t)
		c := apiNewClient(t, sock, ClientOptions{Agent: "claude"})
		if _, err := c.Version(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := srv.Pause(context.Background()); err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			answered <- c.Connected(context.Background(), model.Conn{Agent: "claude", PID: 1, Kind: "mcp"})
		}()
		held(t, srv, 1)
		select {
		case err := <-answered:
			t.Fatalf("a request was answered while paused: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if n, _ := srv.Activity(); n != 0 {
			t.Errorf("a held request counts as in flight (%d)", n)
		}
		srv.Resume()
		if err := <-answered; err != nil {
			t.Fatalf("the held request, resumed: %v", err)
		}
		if len(srv.Facades()) != 1 {
			t.Error("the resumed request was not served")
		}
	})
	t.Run("shutdown refuses them", func(t *testing.T) {
		t.Parallel()
		srv, sock, stop := serve(t)
		c := apiNewClient(t, sock, ClientOptions{Agent: "claude"})
		if _, err := c.Version(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := srv.Pause(context.Background()); err != nil {
			t.Fatal(err)
		}
		answered := make(chan error, 1)
		go func() {
			answered <- c.Connected(context.Background(), model.Conn{Agent: "claude", PID: 1, Kind: "mcp"})
		}()
		held(t, srv, 1)
		stop()
		err := <-answered
		if model.ErrorCode(err) != model.CodeDaemonUnavailable || len(srv.Facades()) != 0 {
			t.Fatalf("a held request at shutdown: %v (facades %v); want daemon_unavailable, nothing done", err, srv.Facades())
		}
	})
	t.Run("pause waits for requests in flight", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := serve(t)
		srv.inFlight.Add(1) // a request being served
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := srv.Pause(ctx); err == nil {
			t.Fatal("Pause returned with a request in flight")
		}
		srv.inFlight.Add(-1)
		if err := srv.Pause(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv.Resume()
	})
}

// POST /v1/operator/prune passes the operator's overrides to the hook as
// given (a duration, "0" to keep forever, absent to take the config's),
// and refuses a malformed one before calling it.
func TestAPIDaemonPruneRoute(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&apiFakeService{}, ServerOptions{Version: "test-1"})
	var got []model.PruneRequest
	srv.ServeDaemon(DaemonHooks{
		Status: func(context.Context) (DaemonStatus, error) { return DaemonStatus{}, nil },
		Stop:   func() {},
		Prune: func(_ context.Context, r model.PruneRequest) (model.PruneReport, error) {
			got = append(got, r)
			return model.PruneReport{DryRun: r.DryRun, AckedMessages: model.PruneCount{Removed: 3}, More: true}, nil
		},
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	ctx := context.Background()
	op := apiNewClient(t, sock, ClientOptions{})
	hour, zero := time.Hour, time.Duration(0)
	rep, err := op.Prune(ctx, model.PruneRequest{AckedMessages: &hour, TerminalTasks: &zero, DryRun: true})
	if err != nil || !rep.DryRun || rep.AckedMessages.Removed != 3 || !rep.More {
		t.Fatalf("Prune = %+v, %v", rep, err)
	}
	if _, err := op.Prune(ctx, model.PruneRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].DryRun || *got[0].AckedMessages != time.Hour || *got[0].TerminalTasks != 0 ||
		got[1].DryRun || got[1].AckedMessages != nil || got[1].TerminalTasks != nil {
		t.Fatalf("the hook got %+v", got)
	}
	raw := apiRawClient(t, sock)
	for _, target := range []string{"/v1/operator/prune?acked_messages=soon", "/v1/operator/prune?acked_messages=-1h",
		"/v1/operator/prune?older=1h", "/v1/operator/prune?dry_run=maybe"} {
		resp, err := raw.Post("http://relay"+target, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "invalid_args") {
			t.Errorf("POST %s: %d %s", target, resp.StatusCode, body)
		}
	}
	if len(got) != 2 {
		t.Errorf("a refused request reached the hook: %+v", got[2:])
	}
}
