package socketapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// apiJSONEqual compares two values by their JSON form.
func apiJSONEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// apiLastCall returns the fake's only call, failing unless there is exactly
// one new call since n.
func apiLastCall(t *testing.T, f *apiFakeService, n int) apiCall {
	t.Helper()
	calls := f.Calls()
	if len(calls) != n+1 {
		t.Fatalf("fake got %d calls, want %d: %+v", len(calls), n+1, calls)
	}
	return calls[n]
}

func TestAPIRoutesRoundTrip(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	ag := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	op := apiNewClient(t, s.sock, ClientOptions{})
	ctx := context.Background()

	v, err := op.Version(ctx)
	if err != nil || v != "test-1.2.3" {
		t.Fatalf("Version = %q, %v", v, err)
	}
	arts := []model.Artifact{{URI: "file:///tmp/x.md", MediaType: "text/markdown", Name: "x"}}

	type tc struct {
		name       string
		do         func() (any, error)
		wantMethod string
		wantCaller string
		wantArgs   []any
		want       any
	}
	sendReq := model.SendRequest{To: "codex", Body: "hi there", ContextID: "C-7", ReplyTo: "MSG-0", Artifacts: arts}
	subReq := model.SubmitRequest{Target: "codex", Prompt: "review", MissionID: "M-1", LeaseID: "S-1",
		Mode: model.ModeStateChanging, ContextID: "C-7", ReferenceTaskIDs: []string{"T-0"}, Artifacts: arts,
		IdempotencyKey: "k1", Cwd: "/tmp"}
	tFilter := model.TaskFilter{State: model.StateWorking, Agent: "codex", Caller: "claude", Target: "codex", Limit: 5, Before: "T-9"}
	mFilter := model.MessageFilter{To: "codex", From: "claude", UnreadOnly: true, Limit: 3, Before: "MSG-9"}
	wantSent := apiMessage("MSG-1", "claude", "codex")
	wantSent.Body, wantSent.ReplyTo, wantSent.Artifacts = "hi there", "MSG-0", arts
	wantSub := apiTask("T-1", "claude")
	wantSub.Target, wantSub.Prompt, wantSub.Mode, wantSub.Cwd = "codex", "review", model.ModeStateChanging, "/tmp"
	wantCanceled := apiTask("T-1", "claude")
	wantCanceled.State, wantCanceled.Code = model.StateCanceled, model.CodeCanceledBySubmitter
	wantOpCanceled := apiTask("T-3", "claude")
	wantOpCanceled.State, wantOpCanceled.Code = model.StateCanceled, model.CodeCanceledByOperator
	wantShow, _ := f.ShowTask(ctx, "T-3")
	wantProbe, _ := f.ProbeAgent(ctx, "codex", 0)
	wantVerify, _ := f.VerifyAgent(ctx, "claude", 0)
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()

	cases := []tc{
		{"SendMessage", func() (any, error) { return ag.SendMessage(ctx, "", sendReq) },
			"SendMessage", "claude", []any{sendReq}, wantSent},
		{"SendMessage/explicit caller", func() (any, error) { return ag.SendMessage(ctx, "claude", sendReq) },
			"SendMessage", "claude", []any{sendReq}, wantSent},
		{"CheckInbox", func() (any, error) { return ag.CheckInbox(ctx, "claude", false, 7) },
			"CheckInbox", "claude", []any{false, 7}, model.Inbox{Messages: []model.Message{apiMessage("MSG-1", "codex", "claude"), apiMessage("MSG-2", "relay", "claude")}, Unread: 3}},
		{"CheckInbox/defaults", func() (any, error) { return ag.CheckInbox(ctx, "", true, 0) },
			"CheckInbox", "claude", []any{true, 0}, model.Inbox{Messages: []model.Message{apiMessage("MSG-1", "codex", "claude"), apiMessage("MSG-2", "relay", "claude")}, Unread: 3}},
		{"AckMessages", func() (any, error) { return ag.AckMessages(ctx, "", []string{"MSG-1", "MSG-2"}) },
			"AckMessages", "claude", []any{[]string{"MSG-1", "MSG-2"}}, model.AckResult{Acked: 2}},
		{"SubmitTask", func() (any, error) { return ag.SubmitTask(ctx, "", subReq) },
			"SubmitTask", "claude", []any{subReq}, wantSub},
		{"GetTask", func() (any, error) { return ag.GetTask(ctx, "", "T-1") },
			"GetTask", "claude", []any{"T-1"}, apiTask("T-1", "claude")},
		{"GetTask/escaped id", func() (any, error) { return ag.GetTask(ctx, "", "T/1 ?x#") },
			"GetTask", "claude", []any{"T/1 ?x#"}, apiTask("T/1 ?x#", "claude")},
		{"WaitTask", func() (any, error) { return ag.WaitTask(ctx, "", "T-1", 1500*time.Millisecond) },
			"WaitTask", "claude", []any{"T-1", 1500 * time.Millisecond}, apiTask("T-1", "claude")},
		{"WaitTask/no wait is GetTask", func() (any, error) { return ag.WaitTask(ctx, "", "T-1", 0) },
			"GetTask", "claude", []any{"T-1"}, apiTask("T-1", "claude")},
		{"ListTasks", func() (any, error) { return ag.ListTasks(ctx, "", model.StateWorking, 5, "T-9") },
			"ListTasks", "claude", []any{model.StateWorking, 5, "T-9"}, []model.Task{apiTask("T-2", "claude"), apiTask("T-1", "claude")}},
		{"ListTasks/defaults", func() (any, error) { return ag.ListTasks(ctx, "", "", 0, "") },
			"ListTasks", "claude", []any{model.State(""), 0, ""}, []model.Task{apiTask("T-2", "claude"), apiTask("T-1", "claude")}},
		{"CancelTask", func() (any, error) { return ag.CancelTask(ctx, "", "T-1") },
			"CancelTask", "claude", []any{"T-1"}, wantCanceled},
		{"ListAgents", func() (any, error) { return ag.ListAgents(ctx) },
			"ListAgents", "", nil, apiAgents()},
		{"MCPTaskEvent", func() (any, error) { return struct{}{}, ag.MCPTaskEvent(ctx, "", "T-1", model.MCPTaskDelivered) },
			"MCPTaskEvent", "claude", []any{"T-1", model.MCPTaskDelivered}, struct{}{}},
		{"Connected", func() (any, error) {
			return struct{}{}, ag.Connected(ctx, model.Conn{Agent: "claude", PID: 999999, UID: 4242, Kind: "mcp"})
		}, "Connected", "claude", []any{model.Conn{Agent: "claude", PID: os.Getpid(), UID: os.Getuid(), Kind: "mcp"}}, struct{}{}},
		{"Connected/agent from header", func() (any, error) {
			return struct{}{}, ag.Connected(ctx, model.Conn{Kind: "mcp"})
		}, "Connected", "claude", []any{model.Conn{Agent: "claude", PID: os.Getpid(), UID: os.Getuid(), Kind: "mcp"}}, struct{}{}},
		{"Tasks", func() (any, error) { return op.Tasks(ctx, tFilter) },
			"Tasks", "", []any{tFilter}, []model.Task{}},
		{"Tasks/empty filter", func() (any, error) { return op.Tasks(ctx, model.TaskFilter{}) },
			"Tasks", "", []any{model.TaskFilter{}}, []model.Task{}},
		{"ShowTask", func() (any, error) { return op.ShowTask(ctx, "T-3") },
			"ShowTask", "", []any{"T-3"}, wantShow},
		{"CancelTaskAsOperator", func() (any, error) { return op.CancelTaskAsOperator(ctx, "T-3") },
			"CancelTaskAsOperator", "", []any{"T-3"}, wantOpCanceled},
		{"Messages", func() (any, error) { return op.Messages(ctx, mFilter) },
			"Messages", "", []any{mFilter}, []model.Message{apiMessage("MSG-9", "claude", "codex")}},
		{"Agents", func() (any, error) { return op.Agents(ctx) },
			"Agents", "", nil, apiAgents()},
		{"ProbeAgent", func() (any, error) { return op.ProbeAgent(ctx, "codex", 90*time.Second) },
			"ProbeAgent", "", []any{"codex", 90 * time.Second}, wantProbe},
		{"ProbeAgent/default timeout", func() (any, error) { return op.ProbeAgent(ctx, "codex", 0) },
			"ProbeAgent", "", []any{"codex", time.Duration(0)}, wantProbe},
		{"VerifyAgent", func() (any, error) { return op.VerifyAgent(ctx, "claude", 90*time.Second) },
			"VerifyAgent", "", []any{"claude", 90 * time.Second}, wantVerify},
		{"VerifyAgent/default timeout", func() (any, error) { return op.VerifyAgent(ctx, "claude", 0) },
			"VerifyAgent", "", []any{"claude", time.Duration(0)}, wantVerify},
		{"WatchEvents", func() (any, error) {
			return op.WatchEvents(ctx, model.EventFilter{TaskID: "T-3", After: 41, Wait: 2 * time.Second})
		}, "WatchEvents", "", []any{model.EventFilter{TaskID: "T-3", After: 41, Wait: 2 * time.Second}},
			model.EventBatch{Events: []model.WatchEvent{{Seq: 42, At: apiT0, TaskID: "T-3", Kind: model.WatchTransition,
				From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize}}, Cursor: 42}},
		{"InboxShares", func() (any, error) { return op.InboxShares(ctx, "gemini") },
			"InboxShares", "", []any{"gemini"}, []model.InboxShare{{To: "gemini", From: "claude", Messages: 250, Bytes: 250, ShareMessages: 250, ShareBytes: 16 << 20}}},
		{"VerifyAudit", func() (any, error) { return op.VerifyAudit(ctx) },
			"VerifyAudit", "", nil, model.AuditReport{Rows: 42, OK: true, Head: "abc123"}},
	}
	for _, c := range cases {
		n := len(f.Calls())
		got, err := c.do()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		call := apiLastCall(t, f, n)
		if call.Method != c.wantMethod || call.Caller != c.wantCaller {
			t.Errorf("%s: fake got %s as %q, want %s as %q", c.name, call.Method, call.Caller, c.wantMethod, c.wantCaller)
		}
		if !reflect.DeepEqual(call.Args, c.wantArgs) {
			t.Errorf("%s: fake got args %#v, want %#v", c.name, call.Args, c.wantArgs)
		}
		apiJSONEqual(t, c.name+" result", got, c.want)
	}
	// Every model.Service method has a route.
	seen := map[string]bool{}
	for _, c := range f.Calls() {
		seen[c.Method] = true
	}
	svc := reflect.TypeOf((*model.Service)(nil)).Elem()
	for i := range svc.NumMethod() {
		if m := svc.Method(i).Name; !seen[m] {
			t.Errorf("model.Service method %s has no round-trip case", m)
		}
	}
}

func TestAPIClientIdentity(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	ctx := context.Background()

	// A client with an identity refuses to act as another.
	ag := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	_, err := ag.GetTask(ctx, "codex", "T-1")
	if model.ErrorCode(err) != model.CodeInvalidArgs {
		t.Errorf("acting as another agent: %v, want invalid_args", err)
	}
	// A client without one acts as each call's caller.
	anon := apiNewClient(t, s.sock, ClientOptions{})
	if _, err := anon.GetTask(ctx, "gemini", "T-1"); err != nil {
		t.Fatal(err)
	}
	if c := f.Calls(); len(c) != 1 || c[0].Caller != "gemini" {
		t.Errorf("calls = %+v, want one GetTask as gemini", c)
	}
	// With neither, the daemon refuses the agent call.
	_, err = anon.ListAgents(ctx)
	if model.ErrorCode(err) != model.CodeInvalidArgs || !strings.Contains(err.Error(), AgentHeader) {
		t.Errorf("agent call without identity: %v, want invalid_args naming %s", err, AgentHeader)
	}
	// Empty path arguments are refused before any request.
	for name, call := range map[string]func() error{
		"GetTask":    func() error { _, err := ag.GetTask(ctx, "", ""); return err },
		"CancelTask": func() error { _, err := ag.CancelTask(ctx, "", ""); return err },
		"ShowTask":   func() error { _, err := anon.ShowTask(ctx, ""); return err },
		"OpCancel":   func() error { _, err := anon.CancelTaskAsOperator(ctx, ""); return err },
		"Probe":      func() error { _, err := anon.ProbeAgent(ctx, "", 0); return err },
		"Verify":     func() error { _, err := anon.VerifyAgent(ctx, "", 0); return err },
	} {
		if err := call(); model.ErrorCode(err) != model.CodeInvalidArgs {
			t.Errorf("%s with empty id: %v, want invalid_args", name, err)
		}
	}
	if c := f.Calls(); len(c) != 1 {
		t.Errorf("fake got %d calls, want 1", len(c))
	}
}

func TestAPIErrorsKeepCodeMessageHint(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	c := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	raw := apiRawClient(t, s.sock)
	ctx := context.Background()

	for _, code := range model.AllCodes() {
		want := &model.Error{Code: code, Message: "message of " + string(code), Hint: "hint of " + string(code),
			Err: errors.New("SECRET internal detail")}
		f.setErr(want)
		_, err := c.GetTask(ctx, "", "T-1")
		var got *model.Error
		if !errors.As(err, &got) {
			t.Fatalf("%s: error %T %v is not a *model.Error", code, err, err)
		}
		if got.Code != code || got.Message != want.Message || got.Hint != want.Hint || got.Err != nil {
			t.Errorf("%s: got %+v, want code/message/hint of %+v and no inner error", code, got, want)
		}
		if model.ErrorCode(err) != code {
			t.Errorf("%s: ErrorCode = %s", code, model.ErrorCode(err))
		}
		status, body := apiDo(t, raw, "GET", "/v1/tasks/T-1", map[string]string{AgentHeader: "claude"}, "")
		if status != Status(code) {
			t.Errorf("%s: HTTP status %d, want %d", code, status, Status(code))
		}
		apiCheckErrorBody(t, string(code), body, code)
		if bytes.Contains(body, []byte("SECRET")) {
			t.Errorf("%s: body leaks the internal error: %s", code, body)
		}
	}

	// A hint-less error gets the code's default hint.
	f.setErr(model.Errorf(model.CodeNotFound, "no task %q", "T-1"))
	_, err := c.GetTask(ctx, "", "T-1")
	var got *model.Error
	if !errors.As(err, &got) || got.Hint != spec.Hint(model.CodeNotFound) || got.Message != `no task "T-1"` {
		t.Errorf("hint-less error: %+v", got)
	}

	// A plain error is internal and leaks nothing.
	f.setErr(fmt.Errorf("database password=hunter2: %w", io.ErrUnexpectedEOF))
	_, err = c.SubmitTask(ctx, "", model.SubmitRequest{Target: "codex", Prompt: "p"})
	if !errors.As(err, &got) || got.Code != model.CodeInternal || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("plain error: %v", err)
	}
	status, body := apiDo(t, raw, "GET", "/v1/tasks/T-1", map[string]string{AgentHeader: "claude"}, "")
	if status != http.StatusInternalServerError || bytes.Contains(body, []byte("hunter2")) {
		t.Errorf("plain error: %d %s", status, body)
	}

	// A panicking service is an internal error, not a dropped connection.
	f.setErr(nil)
	f.setHook(func(context.Context, string) error { panic("boom") })
	_, err = c.GetTask(ctx, "", "T-1")
	if model.ErrorCode(err) != model.CodeInternal {
		t.Errorf("panic: %v, want internal", err)
	}
}

// apiDo sends one raw request and returns the status and body.
func apiDo(t *testing.T, hc *http.Client, method, path string, hdr map[string]string, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://relay"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, b
}

// apiCheckErrorBody checks an error body has exactly code, message, hint.
func apiCheckErrorBody(t *testing.T, what string, body []byte, code model.Code) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: error body %s: %v", what, body, err)
	}
	if len(m) != 3 || m["code"] != string(code) || m["message"] == "" {
		t.Errorf("%s: error body %s, want {code:%s, message, hint}", what, body, code)
	}
	if _, ok := m["hint"]; !ok {
		t.Errorf("%s: error body %s has no hint", what, body)
	}
	return m
}

func TestAPIStrictRequests(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{MaxBody: 1024})
	raw := apiRawClient(t, s.sock)
	ag := map[string]string{AgentHeader: "claude"}
	big := `{"target":"codex","prompt":"` + strings.Repeat("x", 2000) + `"}`

	cases := []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		status             int
		code               model.Code
		mention            string // the message must contain it
	}{
		{"unknown field", "POST", "/v1/tasks", ag, `{"target":"codex","prompt":"p","bogus":1}`, 400, model.CodeInvalidArgs, `"bogus"`},
		{"identity smuggled in body", "POST", "/v1/messages", ag, `{"to":"codex","body":"b","from":"gemini"}`, 400, model.CodeInvalidArgs, `"from"`},
		{"unknown nested field", "POST", "/v1/tasks", ag, `{"target":"codex","artifacts":[{"uri":"u","size":3}]}`, 400, model.CodeInvalidArgs, `"size"`},
		{"trailing object", "POST", "/v1/tasks", ag, `{"target":"codex"} {}`, 400, model.CodeInvalidArgs, "after"},
		{"trailing garbage", "POST", "/v1/tasks", ag, `{"target":"codex"}xyz`, 400, model.CodeInvalidArgs, "after"},
		{"wrong type string", "POST", "/v1/tasks", ag, `{"target":5,"prompt":"p"}`, 400, model.CodeInvalidArgs, `"target"`},
		{"wrong type array", "POST", "/v1/tasks", ag, `{"target":"codex","reference_task_ids":"T-1"}`, 400, model.CodeInvalidArgs, `"reference_task_ids"`},
		{"wrong nested type", "POST", "/v1/messages", ag, `{"to":"codex","body":"b","artifacts":[{"uri":1}]}`, 400, model.CodeInvalidArgs, "uri"},
		{"not an object", "POST", "/v1/tasks", ag, `["codex"]`, 400, model.CodeInvalidArgs, "object"},
		{"null", "POST", "/v1/tasks", ag, `null`, 400, model.CodeInvalidArgs, "object"},
		{"empty body", "POST", "/v1/messages", ag, ``, 400, model.CodeInvalidArgs, "empty"},
		{"truncated", "POST", "/v1/tasks", ag, `{"target":`, 400, model.CodeInvalidArgs, ""},
		{"malformed", "POST", "/v1/tasks", ag, `{"target" "codex"}`, 400, model.CodeInvalidArgs, "JSON"},
		{"oversized", "POST", "/v1/tasks", ag, big, 413, model.CodePayloadTooLarge, "1024"},
		{"oversized message", "POST", "/v1/messages", ag, `{"to":"codex","body":"` + strings.Repeat("y", 1100) + `"}`, 413, model.CodePayloadTooLarge, ""},
		{"ack ids not an array", "POST", "/v1/inbox/ack", ag, `{"message_ids":"MSG-1"}`, 400, model.CodeInvalidArgs, "message_ids"},
		{"ack unknown field", "POST", "/v1/inbox/ack", ag, `{"ids":["MSG-1"]}`, 400, model.CodeInvalidArgs, `"ids"`},
		{"conn unknown field", "POST", "/v1/connections", ag, `{"agent":"claude","extra":1}`, 400, model.CodeInvalidArgs, `"extra"`},
		{"conn as another agent", "POST", "/v1/connections", ag, `{"agent":"codex","kind":"mcp"}`, 400, model.CodeInvalidArgs, "codex"},
		{"cancel with arguments", "POST", "/v1/tasks/T-1/cancel", ag, `{"reason":"x"}`, 400, model.CodeInvalidArgs, `"reason"`},
		{"op cancel with garbage", "POST", "/v1/operator/tasks/T-1/cancel", nil, `nope`, 400, model.CodeInvalidArgs, ""},
		{"missing identity", "GET", "/v1/tasks/T-1", nil, ``, 400, model.CodeInvalidArgs, AgentHeader},
		{"acting as the relay", "POST", "/v1/messages", map[string]string{AgentHeader: "relay"}, `{"to":"codex","body":"b"}`, 400, model.CodeInvalidArgs, "relay"},
		{"unclean path", "GET", "/v1//version", nil, ``, 404, model.CodeNotFound, "clean"},
		{"dot-dot path", "GET", "/v1/operator/../version", nil, ``, 404, model.CodeNotFound, "clean"},
		{"trailing slash", "GET", "/v1/tasks/", ag, ``, 404, model.CodeNotFound, ""},
		{"missing identity on send", "POST", "/v1/messages", nil, `{"to":"codex","body":"b"}`, 400, model.CodeInvalidArgs, AgentHeader},
		{"limit not an int", "POST", "/v1/inbox?limit=abc", ag, ``, 400, model.CodeInvalidArgs, "limit"},
		{"limit negative", "POST", "/v1/inbox?limit=-1", ag, ``, 400, model.CodeInvalidArgs, "limit"},
		{"limit float", "GET", "/v1/tasks?limit=1.5", ag, ``, 400, model.CodeInvalidArgs, "limit"},
		{"limit twice", "GET", "/v1/tasks?limit=1&limit=2", ag, ``, 400, model.CodeInvalidArgs, "limit"},
		{"unread_only not a bool", "POST", "/v1/inbox?unread_only=maybe", ag, ``, 400, model.CodeInvalidArgs, "unread_only"},
		{"unknown query parameter", "POST", "/v1/inbox?from=codex", ag, ``, 400, model.CodeInvalidArgs, `"from"`},
		{"op limit not an int", "GET", "/v1/operator/tasks?limit=x", nil, ``, 400, model.CodeInvalidArgs, "limit"},
		{"op messages limit negative", "GET", "/v1/operator/messages?limit=-3", nil, ``, 400, model.CodeInvalidArgs, "limit"},
		{"probe timeout bad", "POST", "/v1/operator/agents/codex/probe?timeout=soon", nil, ``, 400, model.CodeInvalidArgs, "timeout"},
		{"probe timeout negative", "POST", "/v1/operator/agents/codex/probe?timeout=-5s", nil, ``, 400, model.CodeInvalidArgs, "timeout"},
		{"verify timeout bad", "POST", "/v1/operator/agents/codex/verify?timeout=soon", nil, ``, 400, model.CodeInvalidArgs, "timeout"},
		{"unknown route", "GET", "/v1/nope", nil, ``, 404, model.CodeNotFound, "/v1/nope"},
		{"root", "GET", "/", nil, ``, 404, model.CodeNotFound, ""},
		{"unknown operator route", "POST", "/v1/operator/tasks/T-1/retry", nil, ``, 404, model.CodeNotFound, ""},
		{"wrong method", "DELETE", "/v1/tasks", ag, ``, 405, model.CodeInvalidArgs, "DELETE"},
		{"GET on a POST route", "GET", "/v1/messages", ag, ``, 405, model.CodeInvalidArgs, "GET"},
		{"POST on a GET route", "POST", "/v1/version", nil, ``, 405, model.CodeInvalidArgs, "POST"},
		{"GET on cancel", "GET", "/v1/tasks/T-1/cancel", ag, ``, 405, model.CodeInvalidArgs, ""},
		// A request made for another socket API version is refused before
		// its body is read: the daemon never acts on what it may misread.
		{"another API version", "POST", "/v1/messages", map[string]string{AgentHeader: "claude", APIHeader: "2"},
			`{"to":"codex","body":"hi"}`, 503, model.CodeDaemonUnavailable, "socket API 1; the request was made for 2"},
		{"another API version, operator", "POST", "/v1/operator/tasks/T-1/cancel", map[string]string{APIHeader: "0"},
			``, 503, model.CodeDaemonUnavailable, "made for 0"},
	}
	for _, c := range cases {
		status, body := apiDo(t, raw, c.method, c.path, c.hdr, c.body)
		if status != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, status, c.status, body)
		}
		m := apiCheckErrorBody(t, c.name, body, c.code)
		if !strings.Contains(m["message"], c.mention) {
			t.Errorf("%s: message %q does not mention %q", c.name, m["message"], c.mention)
		}
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the service was called for refused requests: %+v", calls)
	}
	// The refused requests did not break the connection or the server.
	status, body := apiDo(t, raw, "GET", "/v1/version", map[string]string{APIHeader: "1"}, "")
	if status != 200 || !bytes.Contains(body, []byte(`"api":1`)) {
		t.Errorf("version after refusals: %d %s", status, body)
	}
}

// What encoding/json would accept and then silently alter or choose among
// — a lone surrogate escape, invalid UTF-8, a key given twice, keys or a
// key differing from a field's name only in case — is invalid_args on
// every route that takes a body, at the top level and inside an artifact,
// and the service is never called. So is a second X-Relay-Agent header.
func TestAPIRefusesAmbiguousJSON(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{})
	raw := apiRawClient(t, s.sock)
	ag := map[string]string{AgentHeader: "claude"}

	type route struct{ path, doc string } // doc holds one %s: a value or a key/value pair
	strRoutes := []route{
		{"/v1/messages", `{"to":"codex","body":%s}`},
		{"/v1/messages", `{"to":"codex","body":"b","artifacts":[{"uri":"file:///a","name":%s}]}`},
		{"/v1/tasks", `{"target":"codex","prompt":%s}`},
		{"/v1/tasks", `{"target":"codex","prompt":"p","reference_task_ids":["T-1",%s]}`},
		{"/v1/tasks", `{"target":"codex","prompt":"p","artifacts":[{"uri":%s}]}`},
		{"/v1/inbox/ack", `{"message_ids":[%s]}`},
		{"/v1/connections", `{"agent":"claude","kind":%s}`},
	}
	var cases []struct{ name, path, body, mention string }
	add := func(name, path, body, mention string) {
		cases = append(cases, struct{ name, path, body, mention string }{name, path, body, mention})
	}
	for _, r := range strRoutes {
		for _, v := range []struct{ name, val, mention string }{
			{"lone high surrogate", `"\ud800"`, `\ud800`},
			{"lone low surrogate", `"\udc00"`, `\udc00`},
			{"high surrogate then not a low one", `"x\ud800\u0041y"`, `\ud800`},
			{"two high surrogates", `"\ud83d\ud83d"`, `\ud83d`},
			{"raw invalid UTF-8", "\"\xff\xfe\"", "UTF-8"},
			{"a surrogate encoded in UTF-8", "\"\xed\xa0\x80\"", "UTF-8"},
		} {
			add(v.name+" in "+r.doc, r.path, fmt.Sprintf(r.doc, v.val), v.mention)
		}
	}
	add("duplicate key", "/v1/messages", `{"to":"codex","body":"a","body":"b"}`, `"body" is given twice`)
	add("duplicate escaped key", "/v1/messages", `{"to":"codex","body":"a","b\u006fdy":"b"}`, `"body" is given twice`)
	add("duplicate key in an artifact", "/v1/messages", `{"to":"codex","body":"b","artifacts":[{"uri":"file:///a","uri":"file:///b"}]}`, `"uri" is given twice`)
	add("duplicate key in a task's artifact", "/v1/tasks", `{"target":"codex","prompt":"p","artifacts":[{"uri":"file:///a"},{"uri":"file:///a","name":"x","name":"y"}]}`, "artifacts[1]")
	add("duplicate ack ids key", "/v1/inbox/ack", `{"message_ids":["MSG-1"],"message_ids":["MSG-2"]}`, `"message_ids" is given twice`)
	add("keys differing in case", "/v1/tasks", `{"TARGET":"claude","target":"codex","prompt":"p"}`, `"TARGET"`)
	add("keys differing in case, lower first", "/v1/tasks", `{"target":"codex","Target":"claude","prompt":"p"}`, "differ only in case")
	add("keys differing in case in an artifact", "/v1/tasks", `{"target":"codex","prompt":"p","artifacts":[{"uri":"file:///a","URI":"file:///b"}]}`, "differ only in case")
	add("a key matching a field only in case", "/v1/tasks", `{"Target":"codex","prompt":"p"}`, `"Target"`)
	add("a key matching only with the Kelvin sign", "/v1/tasks", "{\"target\":\"codex\",\"prompt\":\"p\",\"idempotency_\u212aey\":\"k\"}", "idempotency_")
	add("an artifact key matching only in case", "/v1/messages", `{"to":"codex","body":"b","artifacts":[{"Uri":"file:///a"}]}`, `"Uri"`)
	add("a conn key matching only in case", "/v1/connections", `{"AGENT":"claude"}`, `"AGENT"`)
	add("a lone surrogate in a cancel body", "/v1/tasks/T-1/cancel", `{"\ud800":1}`, `\ud800`)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := apiDo(t, raw, "POST", c.path, ag, c.body)
			if status != 400 {
				t.Fatalf("status %d, want 400 (%s)", status, body)
			}
			m := apiCheckErrorBody(t, c.name, body, model.CodeInvalidArgs)
			if !strings.Contains(m["message"], c.mention) {
				t.Errorf("message %q does not mention %q", m["message"], c.mention)
			}
			if !utf8.Valid(body) {
				t.Errorf("the answer is not valid UTF-8: %q", body)
			}
		})
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the service was called for refused requests: %+v", calls)
	}

	// One identity, once: a second X-Relay-Agent header (in any spelling)
	// is refused, whatever the first said, not resolved first-wins.
	for _, second := range []string{"X-Relay-Agent", "x-relay-agent", "X-RELAY-AGENT"} {
		req, err := http.NewRequest("GET", "http://relay/v1/tasks/T-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header[AgentHeader] = []string{"claude"}
		if second == AgentHeader {
			req.Header[AgentHeader] = append(req.Header[AgentHeader], "codex")
		} else {
			req.Header[second] = []string{"codex"} // sent as written; the server canonicalizes it
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("two identity headers (%s): status %d, want 400 (%s)", second, resp.StatusCode, b)
		}
		if m := apiCheckErrorBody(t, "two identity headers", b, model.CodeInvalidArgs); !strings.Contains(m["message"], AgentHeader) {
			t.Errorf("two identity headers: message %q", m["message"])
		}
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the service was called with two identities: %+v", calls)
	}
}

func TestAPIDecoders(t *testing.T) {
	t.Parallel()
	r, err := DecodeSubmitRequest(strings.NewReader(` {"target":"codex","prompt":"p","mode":"read_only","reference_task_ids":["T-1"]}
`), 1024)
	if err != nil || r.Target != "codex" || r.Mode != model.ModeReadOnly || len(r.ReferenceTaskIDs) != 1 {
		t.Errorf("DecodeSubmitRequest = %+v, %v", r, err)
	}
	ids, err := DecodeAckRequest(strings.NewReader(`{"message_ids":["a","b"]}`), 1024)
	if err != nil || !reflect.DeepEqual(ids, []string{"a", "b"}) {
		t.Errorf("DecodeAckRequest = %v, %v", ids, err)
	}
	if _, err := DecodeSendRequest(strings.NewReader(`{"to":"x","body":"`+strings.Repeat("b", 100)+`"}`), 50); model.ErrorCode(err) != model.CodePayloadTooLarge {
		t.Errorf("oversized: %v", err)
	}
	// Exactly max bytes is fine.
	body := `{"agent":"claude","kind":"mcp"}`
	if c, err := DecodeConn(strings.NewReader(body), int64(len(body))); err != nil || c.Agent != "claude" {
		t.Errorf("DecodeConn at the limit = %+v, %v", c, err)
	}
	for _, ok := range []string{"", "  \n", "{}", " {} "} {
		if err := DecodeEmpty(strings.NewReader(ok), 64); err != nil {
			t.Errorf("DecodeEmpty(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{`{"a":1}`, `[]`, `{} {}`, `x`} {
		if err := DecodeEmpty(strings.NewReader(bad), 64); model.ErrorCode(err) != model.CodeInvalidArgs {
			t.Errorf("DecodeEmpty(%q) = %v, want invalid_args", bad, err)
		}
	}
	// A failing reader is invalid_args, not a panic or internal error.
	if _, err := DecodeConn(io.MultiReader(strings.NewReader(`{"agent":`), apiErrReader{}), 64); model.ErrorCode(err) != model.CodeInvalidArgs {
		t.Errorf("read error: %v", err)
	}
}

type apiErrReader struct{}

func (apiErrReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestAPIRefusesOtherUID(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	var refuse, credErr atomic.Bool
	type refusal struct{ uid, pid int }
	refused := make(chan refusal, 4)
	s := apiServe(t, f, ServerOptions{
		PeerCred: func(c net.Conn) (int, int, error) {
			uid, pid, err := PeerCred(c)
			if credErr.Load() {
				return 0, 0, errors.New("no credentials")
			}
			if refuse.Load() {
				uid++
			}
			return uid, pid, err
		},
		OnRefused: func(ctx context.Context, uid, pid int) { refused <- refusal{uid, pid} },
	})
	ctx := context.Background()

	refuse.Store(true)
	bad := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	_, err := bad.GetTask(ctx, "", "T-1")
	if model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("refused peer: %v, want daemon_unavailable", err)
	}
	select {
	case r := <-refused:
		if r.uid != os.Getuid()+1 || r.pid != os.Getpid() {
			t.Errorf("OnRefused(%d, %d), want (%d, %d)", r.uid, r.pid, os.Getuid()+1, os.Getpid())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnRefused was not called")
	}

	credErr.Store(true)
	if _, err := bad.GetTask(ctx, "", "T-1"); model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("peer without credentials: %v, want daemon_unavailable", err)
	}
	select {
	case r := <-refused:
		if r.uid != -1 || r.pid != -1 {
			t.Errorf("OnRefused(%d, %d) for a credential error, want (-1, -1)", r.uid, r.pid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnRefused was not called for a credential error")
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the service was called for a refused peer: %+v", calls)
	}

	// The server keeps serving the next good client.
	credErr.Store(false)
	refuse.Store(false)
	good := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	if _, err := good.GetTask(ctx, "", "T-1"); err != nil {
		t.Errorf("good client after a refusal: %v", err)
	}
}

func TestAPIDeadlinesCutSlowClients(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	s := apiServe(t, f, ServerOptions{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: time.Second})
	good := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})

	slow := func(name, prefix, trickle string) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("unix", s.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, prefix); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() { // one byte every 100 ms: far below any sane rate
				defer close(trickled)
				for i := 0; i < len(trickle); i++ {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					if _, err := conn.Write([]byte{trickle[i]}); err != nil {
						return
					}
				}
			}()
			defer func() { close(stop); <-trickled }()

			// Another client is served meanwhile.
			if _, err := good.GetTask(context.Background(), "", "T-1"); err != nil {
				t.Errorf("good client while a slow one trickles: %v", err)
			}
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server did not cut the slow client off within 10 s")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the slow client was cut off after %s", d)
			}
		})
	}
	slow("headers", "GET /v1/version HTTP/1.1\r\n", "Host: relay\r\nX-Relay-Agent: claude\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n")
	slow("body", "POST /v1/tasks HTTP/1.1\r\nHost: relay\r\nX-Relay-Agent: claude\r\nContent-Type: application/json\r\nContent-Length: 120\r\n\r\n",
		`{"target":"codex","prompt":"`+strings.Repeat("p", 90)+`"}`)
}

func TestAPIGracefulShutdown(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	started := make(chan struct{})
	var finished atomic.Bool
	f.setHook(func(ctx context.Context, method string) error {
		if method == "GetTask" {
			close(started)
			time.Sleep(300 * time.Millisecond)
			finished.Store(true)
		}
		return nil
	})
	s := apiServe(t, f, ServerOptions{})
	c := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	if _, err := c.Version(context.Background()); err != nil {
		t.Fatal(err)
	}

	type result struct {
		task model.Task
		err  error
	}
	res := make(chan result, 1)
	go func() {
		task, err := c.GetTask(context.Background(), "", "T-5")
		res <- result{task, err}
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !finished.Load() {
		t.Error("Shutdown returned before the in-flight request finished")
	}
	r := <-res
	if r.err != nil || r.task.ID != "T-5" {
		t.Errorf("in-flight call during shutdown: %+v, %v", r.task, r.err)
	}
	if err := <-s.done; err != nil {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	s.done <- nil
	if _, err := os.Lstat(s.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after shutdown: %v", err)
	}
	if _, err := c.GetTask(context.Background(), "", "T-5"); model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("call after shutdown: %v, want daemon_unavailable", err)
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestAPIProbeOutlastsWriteTimeout(t *testing.T) {
	t.Parallel()
	f := &apiFakeService{}
	f.setHook(func(ctx context.Context, method string) error {
		if method == "ProbeAgent" || method == "VerifyAgent" || method == "GetTask" {
			time.Sleep(700 * time.Millisecond)
		}
		return nil
	})
	s := apiServe(t, f, ServerOptions{WriteTimeout: 300 * time.Millisecond})
	c := apiNewClient(t, s.sock, ClientOptions{Agent: "claude"})
	if _, err := c.ProbeAgent(context.Background(), "codex", time.Second); err != nil {
		t.Errorf("a probe within its own timeout: %v", err)
	}
	if _, err := c.VerifyAgent(context.Background(), "codex", time.Second); err != nil {
		t.Errorf("a verification within its own timeout: %v", err)
	}
	// An ordinary route is bound by WriteTimeout.
	if _, err := c.GetTask(context.Background(), "", "T-1"); model.ErrorCode(err) != model.CodeDaemonUnavailable {
		t.Errorf("a call past WriteTimeout: %v, want daemon_unavailable", err)
	}
}

func TestAPIShutdownDoesNotWaitForSilentConnections(t *testing.T) {
	t.Parallel()
	s := apiServe(t, &apiFakeService{}, ServerOptions{})
	// A pooled connection that never sends a request (net/http would wait
	// 5 s for it).
	silent, err := net.Dial("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.srv.connMu.Lock()
		n := len(s.srv.conns)
		s.srv.connMu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not accept the connection")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %s with one silent connection open", d)
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("silent connection after Shutdown: read %d, %v; want closed", n, err)
	}
}

// apiBigTaskService answers GetTask with a task whose result is n bytes.
type apiBigTaskService struct {
	apiFakeService
	n int
}

func (f *apiBigTaskService) GetTask(ctx context.Context, caller, id string) (model.Task, error) {
	t := apiTask(id, caller)
	t.Result = strings.Repeat("<", f.n)
	return t, nil
}

// TestAPIAnswerBound: an answer over the server's MaxAnswer is never sent
// cut: the client gets a small internal error at once, and the daemon
// logs it; an answer under the bound is sent whole.
func TestAPIAnswerBound(t *testing.T) {
	t.Parallel()
	const bound = 64 << 10
	for _, tc := range []struct {
		name   string
		n      int
		status int
	}{
		{"under the bound", bound / 8, 200},
		{"over the bound once escaped", bound / 4, 500}, // '<' escapes to 6 bytes
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewServer(&apiBigTaskService{n: tc.n}, ServerOptions{MaxAnswer: bound})
			req := httptest.NewRequest("GET", "/v1/tasks/T-1", nil)
			req.Header.Set(AgentHeader, "claude")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			body := w.Body.Bytes()
			if w.Code != tc.status || len(body) > bound {
				t.Fatalf("status %d, %d bytes; want %d within %d", w.Code, len(body), tc.status, bound)
			}
			if tc.status == 200 {
				var got model.Task
				if err := json.Unmarshal(body, &got); err != nil || len(got.Result) != tc.n {
					t.Fatalf("task result of %d bytes, want %d (%v)", len(got.Result), tc.n, err)
				}
				return
			}
			var e model.Error
			if err := json.Unmarshal(body, &e); err != nil || e.Code != model.CodeInternal ||
				!strings.Contains(e.Message, "over the socket API's bound") || e.Hint == "" {
				t.Fatalf("error body %s (%v)", body, err)
			}
		})
	}
}

// Every answer, an error or not, carries the daemon's socket API version
// and its relay version, so that a client learns both without asking.
func TestAPIAnswersCarryTheVersion(t *testing.T) {
	t.Parallel()
	s := apiServe(t, &apiFakeService{}, ServerOptions{Version: "1.2.3"})
	raw := apiRawClient(t, s.sock)
	for _, c := range []struct{ method, path, agent string }{
		{"POST", "/v1/inbox", "claude"},
		{"GET", "/v1/nope", ""},
		{"POST", "/v1/messages", ""}, // refused: no identity
	} {
		req, _ := http.NewRequest(c.method, "http://relay"+c.path, nil)
		if c.agent != "" {
			req.Header.Set(AgentHeader, c.agent)
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got, ver := resp.Header.Get(APIHeader), resp.Header.Get(VersionHeader); got != "1" || ver != "1.2.3" {
			t.Errorf("%s %s (%d): %s %q, %s %q; want 1 and 1.2.3", c.method, c.path, resp.StatusCode, APIHeader, got, VersionHeader, ver)
		}
	}
}
