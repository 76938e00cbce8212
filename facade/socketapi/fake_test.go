package socketapi

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// apiCall is one call the fake service received.
type apiCall struct {
	Method string
	Caller string
	Args   []any
}

// apiFakeService is a model.Service that records its calls and answers with
// canned values built from its arguments.
type apiFakeService struct {
	mu    sync.Mutex
	calls []apiCall
	// err, when set, is returned by every method.
	err error
	// hook, when set, runs inside every method (after recording).
	hook func(ctx context.Context, method string) error
	// empty makes CheckInbox and ListTasks answer with nil slices.
	empty bool
}

var _ model.Service = (*apiFakeService)(nil)

var apiT0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func (f *apiFakeService) record(ctx context.Context, method, caller string, args ...any) error {
	f.mu.Lock()
	f.calls = append(f.calls, apiCall{Method: method, Caller: caller, Args: args})
	err, hook := f.err, f.hook
	f.mu.Unlock()
	if hook != nil {
		if herr := hook(ctx, method); herr != nil {
			return herr
		}
	}
	return err
}

func (f *apiFakeService) Calls() []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apiCall(nil), f.calls...)
}

func (f *apiFakeService) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *apiFakeService) setHook(h func(ctx context.Context, method string) error) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func apiTask(id, caller string) model.Task {
	return model.Task{ID: id, State: model.StateSubmitted, Caller: caller, Target: "codex",
		Mode: model.ModeReadOnly, MissionID: "M-1", LeaseID: "S-1", ContextID: "C-1",
		Artifacts: []model.Artifact{}, ReferenceTaskIDs: []string{}, ToolCalls: []model.ToolCall{},
		CreatedAt: apiT0, UpdatedAt: apiT0}
}

func apiMessage(id, from, to string) model.Message {
	return model.Message{ID: id, From: from, To: to, Body: "hello", ContextID: "C-1",
		Artifacts: []model.Artifact{}, State: model.MessageStored, CreatedAt: apiT0}
}

func apiAgents() []model.AgentInfo {
	at := apiT0
	return []model.AgentInfo{
		{Name: "claude", Command: []string{"claude-agent-acp"}, Enabled: true, EnabledReason: "core",
			Configured: true, ConfiguredAt: &at, ConfiguredReason: "on PATH", WorkedLiveReason: "never probed"},
		{Name: "codex", Command: []string{"codex-acp"}, Enabled: true, EnabledReason: "core",
			ConfiguredReason: "not on PATH"},
	}
}

func (f *apiFakeService) SendMessage(ctx context.Context, caller string, r model.SendRequest) (model.Message, error) {
	if err := f.record(ctx, "SendMessage", caller, r); err != nil {
		return model.Message{}, err
	}
	m := apiMessage("MSG-1", caller, r.To)
	m.Body, m.ReplyTo = r.Body, r.ReplyTo
	if r.Artifacts != nil {
		m.Artifacts = r.Artifacts
	}
	return m, nil
}

func (f *apiFakeService) CheckInbox(ctx context.Context, caller string, unreadOnly bool, limit int) (model.Inbox, error) {
	if err := f.record(ctx, "CheckInbox", caller, unreadOnly, limit); err != nil {
		return model.Inbox{}, err
	}
	if f.empty {
		return model.Inbox{}, nil
	}
	return model.Inbox{Messages: []model.Message{apiMessage("MSG-1", "codex", caller), apiMessage("MSG-2", "relay", caller)}, Unread: 3}, nil
}

func (f *apiFakeService) AckMessages(ctx context.Context, caller string, ids []string) (model.AckResult, error) {
	if err := f.record(ctx, "AckMessages", caller, ids); err != nil {
		return model.AckResult{}, err
	}
	return model.AckResult{Acked: len(ids)}, nil
}

func (f *apiFakeService) SubmitTask(ctx context.Context, caller string, r model.SubmitRequest) (model.Task, error) {
	if err := f.record(ctx, "SubmitTask", caller, r); err != nil {
		return model.Task{}, err
	}
	t := apiTask("T-1", caller)
	t.Target, t.Prompt, t.Mode, t.Cwd = r.Target, r.Prompt, r.Mode, r.Cwd
	return t, nil
}

func (f *apiFakeService) GetTask(ctx context.Context, caller, id string) (model.Task, error) {
	if err := f.record(ctx, "GetTask", caller, id); err != nil {
		return model.Task{}, err
	}
	return apiTask(id, caller), nil
}

func (f *apiFakeService) WaitTask(ctx context.Context, caller, id string, wait time.Duration) (model.Task, error) {
	if err := f.record(ctx, "WaitTask", caller, id, wait); err != nil {
		return model.Task{}, err
	}
	return apiTask(id, caller), nil
}

func (f *apiFakeService) ListTasks(ctx context.Context, caller string, state model.State, limit int, before string) ([]model.Task, error) {
	if err := f.record(ctx, "ListTasks", caller, state, limit, before); err != nil {
		return nil, err
	}
	if f.empty {
		return nil, nil
	}
	return []model.Task{apiTask("T-2", caller), apiTask("T-1", caller)}, nil
}

func (f *apiFakeService) CancelTask(ctx context.Context, caller, id string) (model.Task, error) {
	if err := f.record(ctx, "CancelTask", caller, id); err != nil {
		return model.Task{}, err
	}
	t := apiTask(id, caller)
	t.State, t.Code = model.StateCanceled, model.CodeCanceledBySubmitter
	return t, nil
}

func (f *apiFakeService) ListAgents(ctx context.Context) ([]model.AgentInfo, error) {
	if err := f.record(ctx, "ListAgents", ""); err != nil {
		return nil, err
	}
	return apiAgents(), nil
}

func (f *apiFakeService) Connected(ctx context.Context, c model.Conn) error {
	return f.record(ctx, "Connected", c.Agent, c)
}

func (f *apiFakeService) MCPTaskEvent(ctx context.Context, caller, id string, event model.MCPTaskEvent) error {
	return f.record(ctx, "MCPTaskEvent", caller, id, event)
}

func (f *apiFakeService) Tasks(ctx context.Context, fl model.TaskFilter) ([]model.Task, error) {
	if err := f.record(ctx, "Tasks", "", fl); err != nil {
		return nil, err
	}
	return nil, nil // nil on purpose: the wire must say []
}

func (f *apiFakeService) ShowTask(ctx context.Context, id string) (model.TaskDetail, error) {
	if err := f.record(ctx, "ShowTask", "", id); err != nil {
		return model.TaskDetail{}, err
	}
	return model.TaskDetail{
		Task:     apiTask(id, "claude"),
		Events:   []model.Event{{TaskID: id, From: "", To: model.StateSubmitted, Trigger: "submit", At: apiT0}},
		Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Passed: true, At: apiT0, Detail: map[string]string{"k": "v"}}},
	}, nil
}

func (f *apiFakeService) CancelTaskAsOperator(ctx context.Context, id string) (model.Task, error) {
	if err := f.record(ctx, "CancelTaskAsOperator", "", id); err != nil {
		return model.Task{}, err
	}
	t := apiTask(id, "claude")
	t.State, t.Code = model.StateCanceled, model.CodeCanceledByOperator
	return t, nil
}

func (f *apiFakeService) Messages(ctx context.Context, fl model.MessageFilter) ([]model.Message, error) {
	if err := f.record(ctx, "Messages", "", fl); err != nil {
		return nil, err
	}
	return []model.Message{apiMessage("MSG-9", "claude", "codex")}, nil
}

func (f *apiFakeService) InboxShares(ctx context.Context, to string) ([]model.InboxShare, error) {
	if err := f.record(ctx, "InboxShares", "", to); err != nil {
		return nil, err
	}
	return []model.InboxShare{{To: to, From: "claude", Messages: 250, Bytes: 250, ShareMessages: 250, ShareBytes: 16 << 20}}, nil
}

func (f *apiFakeService) Agents(ctx context.Context) ([]model.AgentInfo, error) {
	if err := f.record(ctx, "Agents", ""); err != nil {
		return nil, err
	}
	return apiAgents(), nil
}

func (f *apiFakeService) ProbeAgent(ctx context.Context, name string, timeout time.Duration) (model.AgentInfo, error) {
	if err := f.record(ctx, "ProbeAgent", "", name, timeout); err != nil {
		return model.AgentInfo{}, err
	}
	a := apiAgents()[0]
	a.Name, a.WorkedLive, a.WorkedLiveAt, a.WorkedLiveReason = name, true, &apiT0, "end_turn"
	return a, nil
}

func (f *apiFakeService) VerifyAgent(ctx context.Context, name string, timeout time.Duration) (model.Verification, error) {
	if err := f.record(ctx, "VerifyAgent", "", name, timeout); err != nil {
		return model.Verification{}, err
	}
	return model.Verification{Agent: name, Status: model.HardeningVerified, At: apiT0, AdapterVersion: "0.23.1",
		Profile: "claude-agent-acp", Reason: "all 1 attempts stopped", Attempts: []model.VerifyAttempt{{Name: "shell",
			Mode: model.ModeReadOnly, Tool: "Bash", Target: "/tmp/m", StoppedBy: model.StopToolNotOffered, Detail: "not offered"}}}, nil
}

func (f *apiFakeService) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	if err := f.record(ctx, "VerifyAudit", ""); err != nil {
		return model.AuditReport{}, err
	}
	return model.AuditReport{Rows: 42, OK: true, Head: "abc123"}, nil
}

func (f *apiFakeService) WatchEvents(ctx context.Context, ef model.EventFilter) (model.EventBatch, error) {
	if err := f.record(ctx, "WatchEvents", "", ef); err != nil {
		return model.EventBatch{}, err
	}
	return model.EventBatch{Events: []model.WatchEvent{{Seq: ef.After + 1, At: apiT0, TaskID: ef.TaskID,
		Kind: model.WatchTransition, From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize}}, Cursor: ef.After + 1}, nil
}

// apiShortDir returns a fresh 0700 directory with a short path (sun_path
// holds 108 bytes; t.TempDir's names can be longer).
func apiShortDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("", "rl")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// apiServer is a running test server.
type apiServer struct {
	srv  *Server
	sock string
	ln   net.Listener
	done chan error
}

// stop shuts the server down and waits for Serve to return.
func (s *apiServer) stop(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		tb.Errorf("Shutdown: %v", err)
	}
	if err := <-s.done; err != nil {
		tb.Errorf("Serve: %v", err)
	}
	s.done <- nil // later stops return at once
}

// apiServeAt starts a server for svc on sock.
func apiServeAt(tb testing.TB, sock string, svc model.Service, o ServerOptions) *apiServer {
	tb.Helper()
	ln, err := Listen(sock)
	if err != nil {
		tb.Fatalf("Listen: %v", err)
	}
	if o.Version == "" {
		o.Version = "test-1.2.3"
	}
	s := &apiServer{srv: NewServer(svc, o), sock: sock, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	tb.Cleanup(func() { s.stop(tb) })
	return s
}

// apiServe starts a server for svc on a fresh socket.
func apiServe(tb testing.TB, svc model.Service, o ServerOptions) *apiServer {
	tb.Helper()
	return apiServeAt(tb, filepath.Join(apiShortDir(tb), "relay.sock"), svc, o)
}

// apiNewClient returns a client closed at cleanup.
func apiNewClient(tb testing.TB, sock string, o ClientOptions) *Client {
	tb.Helper()
	c := NewClient(sock, o)
	tb.Cleanup(c.Close)
	return c
}

// apiRawClient is a plain http.Client on the socket, for requests the
// Client would never send.
func apiRawClient(tb testing.TB, sock string) *http.Client {
	tb.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
