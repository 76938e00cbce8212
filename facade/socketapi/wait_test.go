package socketapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// claudeHdr makes a raw request act as claude.
var claudeHdr = map[string]string{AgentHeader: "claude"}

// A waiting get_task outlasts the connection's read and write deadlines:
// the route moves the write deadline past its wait (net/http lifts the
// read deadline itself), so a wait of 3 s under deadlines of 1 s runs to
// its end, its context alive, and its answer arrives.
func TestAPIWaitTaskOutlastsTheDeadlines(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	var cut atomic.Bool
	f.setHook(func(ctx context.Context, method string) error {
		if method == "WaitTask" {
			select {
			case <-time.After(2500 * time.Millisecond):
			case <-ctx.Done():
				cut.Store(true)
			}
		}
		return nil
	})
	s := apiServe(t, f, ServerOptions{ReadTimeout: time.Second, WriteTimeout: time.Second})
	ag := apiNewClient(t, s.sock, ClientOptions{Agent: "claude", Timeout: 2 * time.Second})
	got, err := ag.WaitTask(context.Background(), "", "T-1", 3*time.Second)
	if err != nil || got.ID != "T-1" {
		t.Fatalf("WaitTask under 1 s deadlines: %+v, %v", got, err)
	}
	if cut.Load() {
		t.Error("the wait's context ended before the wait did: the read deadline cut it")
	}
	// The connection serves the next request with its usual deadlines.
	if _, err := ag.GetTask(context.Background(), "", "T-1"); err != nil {
		t.Fatalf("GetTask after the wait: %v", err)
	}
}

// The route refuses a wait it does not keep: over model.MaxTaskWait, below
// zero, not a duration, or another query parameter.
func TestAPIWaitTaskBounds(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	hc := apiRawClient(t, s.sock)
	for _, q := range []string{"wait=51s", "wait=-1s", "wait=soon", "wait=30", "timeout=3s"} {
		status, body := apiDo(t, hc, http.MethodGet, "/v1/tasks/T-1?"+q, claudeHdr, "")
		if status != http.StatusBadRequest {
			t.Errorf("?%s: HTTP %d %s, want 400", q, status, body)
			continue
		}
		apiCheckErrorBody(t, q, body, model.CodeInvalidArgs)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the service was called for refused waits: %+v", calls)
	}
	if status, body := apiDo(t, hc, http.MethodGet, "/v1/tasks/T-1?wait=50s", claudeHdr, ""); status != http.StatusOK {
		t.Fatalf("wait=50s: HTTP %d %s", status, body)
	}
	if c := apiLastCall(t, f, 0); c.Method != "WaitTask" || c.Args[1] != model.MaxTaskWait {
		t.Errorf("wait=50s reached the service as %+v", c)
	}
}

// A waiting get_task does not hold a stopping daemon: Shutdown ends the
// wait at once, and the task is answered as it is.
func TestAPIWaitTaskEndsAtShutdown(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	waiting := make(chan struct{})
	f.setHook(func(ctx context.Context, method string) error {
		if method == "WaitTask" {
			close(waiting)
			<-ctx.Done()
		}
		return nil
	})
	s := apiServe(t, f, ServerOptions{})
	ag := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	type answer struct {
		task model.Task
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		task, err := ag.WaitTask(context.Background(), "", "T-1", 40*time.Second)
		got <- answer{task, err}
	}()
	<-waiting
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Shutdown waited %v for a waiting get_task", d)
	}
	if a := <-got; a.err != nil || a.task.ID != "T-1" {
		t.Errorf("the wait at shutdown: %+v, %v; want the task", a.task, a.err)
	}
	if err := <-s.done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	s.done <- nil
}

// A submission and a message are made inside the task TaskOf names for the
// peer's pid, as the kernel gave it; never inside one a client names (the
// body has no such field, and the client refuses to send one). A peer
// inside a task acts only as that task's target, and neither operator
// requests nor anything at all once the process that connected is gone
// (its pid is asked as 0: unplaceable while tasks run, so a recycled pid
// neither inherits nor sheds a chain).
func TestAPIInsideTaskComesFromThePeer(t *testing.T) {
	t.Parallel()
	peer := exec.Command("sleep", "60")
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Process.Kill(); _ = peer.Wait() })
	pid := peer.Process.Pid
	var asked atomic.Int64
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{
		PeerCred: func(net.Conn) (int, int, error) { return os.Getuid(), pid, nil },
		TaskOf: func(p int) (string, string, error) {
			asked.Add(1)
			switch p {
			case pid:
				return "T-PARENT", "claude", nil
			case 0:
				return "", "", errors.New("no process")
			}
			return "", "", nil
		},
	})
	ctx := context.Background()
	ag := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	sub := model.SubmitRequest{Target: "codex", Prompt: "p", Cwd: "/tmp"}
	if _, err := ag.SubmitTask(ctx, "", sub); err != nil {
		t.Fatal(err)
	}
	if _, err := ag.SendMessage(ctx, "", model.SendRequest{To: "codex", Body: "hi"}); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if r := calls[len(calls)-2].Args[0].(model.SubmitRequest); r.ParentTaskID != "T-PARENT" {
		t.Errorf("a submission from inside T-PARENT reached the service with parent %q", r.ParentTaskID)
	}
	if r := calls[len(calls)-1].Args[0].(model.SendRequest); r.ParentTaskID != "T-PARENT" {
		t.Errorf("a message from inside T-PARENT reached the service with parent %q", r.ParentTaskID)
	}

	// A client cannot name one: the socket client refuses, and the wire
	// has no such field.
	forged := sub
	forged.ParentTaskID = "T-OTHER"
	if _, err := ag.SubmitTask(ctx, "", forged); model.ErrorCode(err) != model.CodeInvalidArgs {
		t.Errorf("a client naming its parent task: %v, want invalid_args", err)
	}
	hc := apiRawClient(t, s.sock)
	n := len(f.Calls())
	status, body := apiDo(t, hc, http.MethodPost, "/v1/tasks", claudeHdr, `{"target":"codex","prompt":"p","parent_task_id":"T-OTHER"}`)
	if status != http.StatusBadRequest || len(f.Calls()) != n {
		t.Errorf("a body naming parent_task_id: HTTP %d %s; want 400 and no call", status, body)
	}

	// Inside T-PARENT, whose target is claude, no other identity: refused
	// before the service is called.
	other := apiNewClient(t, s.sock, ClientOptions{Agent: "codex"})
	n = len(f.Calls())
	if _, err := other.SubmitTask(ctx, "", sub); model.ErrorCode(err) != model.CodeIdentityMismatch || len(f.Calls()) != n {
		t.Errorf("a facade inside T-PARENT (claude's) acting as codex: %v, want identity_mismatch and no call", err)
	}
	status, body = apiDo(t, hc, http.MethodGet, "/v1/operator/tasks", nil, "")
	if status != http.StatusForbidden || !strings.Contains(string(body), "identity_mismatch") {
		t.Errorf("an operator request from inside a task: HTTP %d %s; want 403 identity_mismatch", status, body)
	}

	// The process that connected is gone (its pid free for another): the
	// same connection's next submission cannot be placed, and is refused
	// while tasks run.
	_ = peer.Process.Kill()
	_ = peer.Wait()
	n = len(f.Calls())
	if _, err := ag.SubmitTask(ctx, "", sub); model.ErrorCode(err) != model.CodeIdentityMismatch || len(f.Calls()) != n {
		t.Errorf("after the peer ended: %v, want identity_mismatch and no call", err)
	}
}
