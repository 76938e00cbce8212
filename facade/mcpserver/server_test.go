package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
)

// mcpTestAgent and friends are the identity every test facade runs as.
const (
	mcpTestAgent = "claude"
	mcpTestCwd   = "/home/u/project"
	mcpTestPID   = 4242
)

// mcpCall is one recorded service call.
type mcpCall struct {
	Method string
	Caller string
	Args   any
}

// mcpFakeService is a model.AgentService that records every call with the
// caller identity it was made as, and fails a method when told to.
type mcpFakeService struct {
	mu        sync.Mutex
	calls     []mcpCall
	conns     []model.Conn
	errs      map[string]error
	connErr   error
	noResults bool // answer listings with nil slices
}

func mcpNewFake() *mcpFakeService { return &mcpFakeService{errs: map[string]error{}} }

func (f *mcpFakeService) record(method, caller string, args any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, mcpCall{Method: method, Caller: caller, Args: args})
	return f.errs[method]
}

func (f *mcpFakeService) Calls() []mcpCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *mcpFakeService) Conns() []model.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.conns)
}

func (f *mcpFakeService) setErr(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = err
}

func (f *mcpFakeService) setConnErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connErr = err
}

var mcpT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (f *mcpFakeService) SendMessage(_ context.Context, caller string, r model.SendRequest) (model.Message, error) {
	if err := f.record("SendMessage", caller, r); err != nil {
		return model.Message{}, err
	}
	return model.Message{ID: "MSG-1", From: caller, To: r.To, Body: r.Body, ContextID: r.ContextID,
		ReplyTo: r.ReplyTo, Artifacts: r.Artifacts, State: model.MessageStored, CreatedAt: mcpT0}, nil
}

type mcpInboxArgs struct {
	UnreadOnly bool
	Limit      int
}

func (f *mcpFakeService) CheckInbox(_ context.Context, caller string, unreadOnly bool, limit int) (model.Inbox, error) {
	if err := f.record("CheckInbox", caller, mcpInboxArgs{unreadOnly, limit}); err != nil {
		return model.Inbox{}, err
	}
	if f.noResults {
		return model.Inbox{}, nil
	}
	return model.Inbox{Messages: []model.Message{{ID: "MSG-9", From: "codex", To: caller, Body: "hi",
		State: model.MessageRead, CreatedAt: mcpT0}}, Unread: 3}, nil
}

func (f *mcpFakeService) AckMessages(_ context.Context, caller string, ids []string) (model.AckResult, error) {
	if err := f.record("AckMessages", caller, ids); err != nil {
		return model.AckResult{}, err
	}
	return model.AckResult{Acked: len(ids)}, nil
}

func (f *mcpFakeService) SubmitTask(_ context.Context, caller string, r model.SubmitRequest) (model.Task, error) {
	if err := f.record("SubmitTask", caller, r); err != nil {
		return model.Task{}, err
	}
	return model.Task{ID: "T-1", State: model.StateSubmitted, Caller: caller, Target: r.Target, Mode: r.Mode,
		MissionID: r.MissionID, LeaseID: r.LeaseID, Cwd: r.Cwd, CreatedAt: mcpT0, UpdatedAt: mcpT0}, nil
}

func (f *mcpFakeService) GetTask(_ context.Context, caller, id string) (model.Task, error) {
	if err := f.record("GetTask", caller, id); err != nil {
		return model.Task{}, err
	}
	return model.Task{ID: id, State: model.StateWorking, Caller: caller, Target: "codex"}, nil
}

type mcpWaitArgs struct {
	ID   string
	Wait time.Duration
}

func (f *mcpFakeService) WaitTask(_ context.Context, caller, id string, wait time.Duration) (model.Task, error) {
	if err := f.record("WaitTask", caller, mcpWaitArgs{id, wait}); err != nil {
		return model.Task{}, err
	}
	return model.Task{ID: id, State: model.StateCompleted, Caller: caller, Target: "codex"}, nil
}

type mcpListArgs struct {
	State  model.State
	Limit  int
	Before string
}

func (f *mcpFakeService) ListTasks(_ context.Context, caller string, state model.State, limit int, before string) ([]model.Task, error) {
	if err := f.record("ListTasks", caller, mcpListArgs{state, limit, before}); err != nil {
		return nil, err
	}
	if f.noResults {
		return nil, nil
	}
	return []model.Task{{ID: "T-1", State: model.StateCompleted, Caller: caller, Target: "codex", Result: "done"}}, nil
}

func (f *mcpFakeService) CancelTask(_ context.Context, caller, id string) (model.Task, error) {
	if err := f.record("CancelTask", caller, id); err != nil {
		return model.Task{}, err
	}
	return model.Task{ID: id, State: model.StateCanceled, Code: model.CodeCanceledBySubmitter, Caller: caller}, nil
}

func (f *mcpFakeService) ListAgents(context.Context) ([]model.AgentInfo, error) {
	if err := f.record("ListAgents", "", nil); err != nil {
		return nil, err
	}
	if f.noResults {
		return nil, nil
	}
	return []model.AgentInfo{{Name: "codex", Command: []string{"codex-acp"}, Enabled: true}}, nil
}

func (f *mcpFakeService) Connected(_ context.Context, c model.Conn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.connErr != nil {
		return f.connErr
	}
	f.conns = append(f.conns, c)
	return nil
}

func (f *mcpFakeService) MCPTaskEvent(_ context.Context, caller, id string, event model.MCPTaskEvent) error {
	return f.record("MCPTaskEvent", caller, map[string]any{"id": id, "event": string(event)})
}

// mcpOptions are the facade options every test uses.
func mcpOptions() Options {
	return Options{Agent: mcpTestAgent, Cwd: mcpTestCwd, Version: "test", PID: mcpTestPID}
}

// mcpMustClient starts an in-process client on a new facade over svc and
// initializes it with protocol version (skipped when version is "").
func mcpMustClient(tb testing.TB, svc model.AgentService, version string) *client.Client {
	tb.Helper()
	s, err := New(svc, mcpOptions())
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	c, err := client.NewInProcessClient(s)
	if err != nil {
		tb.Fatalf("NewInProcessClient: %v", err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	if version != "" {
		mcpMustInitialize(tb, c, version)
	}
	return c
}

func mcpMustInitialize(tb testing.TB, c *client.Client, version string) *mcp.InitializeResult {
	tb.Helper()
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = version
	ir.Params.ClientInfo = mcp.Implementation{Name: "facade-test", Version: "0"}
	res, err := c.Initialize(context.Background(), ir)
	if err != nil {
		tb.Fatalf("Initialize(%s): %v", version, err)
	}
	return res
}

// mcpMustCall calls a tool and fails the test on a protocol error.
func mcpMustCall(tb testing.TB, c *client.Client, name string, args any) *mcp.CallToolResult {
	tb.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		tb.Fatalf("CallTool(%s): protocol error %v (domain errors must be tool errors)", name, err)
	}
	return res
}

// mcpPayload checks that res carries its structured content also as the
// same JSON in one text block, and returns it decoded.
func mcpPayload(tb testing.TB, res *mcp.CallToolResult) map[string]any {
	tb.Helper()
	obj, ok := res.StructuredContent.(map[string]any)
	if !ok {
		tb.Fatalf("structuredContent is %T, want a JSON object", res.StructuredContent)
	}
	if len(res.Content) != 1 {
		tb.Fatalf("content has %d blocks, want 1 text block", len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		tb.Fatalf("content[0] is %T, want text", res.Content[0])
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(tc.Text), &fromText); err != nil {
		tb.Fatalf("text block is not JSON: %v\n%s", err, tc.Text)
	}
	if !reflect.DeepEqual(obj, fromText) {
		tb.Fatalf("text block differs from structured content:\ntext: %v\nstructured: %v", fromText, obj)
	}
	return obj
}

// mcpMustOK returns a successful result's payload.
func mcpMustOK(tb testing.TB, res *mcp.CallToolResult) map[string]any {
	tb.Helper()
	obj := mcpPayload(tb, res)
	if res.IsError {
		tb.Fatalf("isError with %v, want success", obj)
	}
	return obj
}

// mcpMustToolError returns a tool error's {code, message, hint}.
func mcpMustToolError(tb testing.TB, res *mcp.CallToolResult, code model.Code) map[string]any {
	tb.Helper()
	obj := mcpPayload(tb, res)
	if !res.IsError {
		tb.Fatalf("success with %v, want a tool error %s", obj, code)
	}
	if got := obj["code"]; got != string(code) {
		tb.Fatalf("code = %v, want %s (%v)", got, code, obj)
	}
	for _, k := range []string{"code", "message", "hint"} {
		if _, ok := obj[k].(string); !ok {
			tb.Fatalf("error payload lacks string %q: %v", k, obj)
		}
	}
	if len(obj) != 3 {
		tb.Fatalf("error payload has extra fields: %v", obj)
	}
	return obj
}

// mcpWant is the shape of one tool that agents rely on, written out here
// independently of mcpTools.
type mcpWant struct {
	args                              []string
	required                          []string
	readOnly, destructive, idempotent bool
}

var mcpWantTools = map[string]mcpWant{
	"send_message": {args: []string{"to", "body", "context_id", "reply_to", "artifacts"}, required: []string{"to", "body"}},
	"check_inbox":  {args: []string{"unread_only", "limit"}},
	"ack_messages": {args: []string{"message_ids"}, required: []string{"message_ids"}, idempotent: true},
	"submit_task": {args: []string{"target", "prompt", "mission_id", "lease_id", "mode", "context_id",
		"reference_task_ids", "artifacts", "idempotency_key", "cwd"}, required: []string{"target", "prompt"}},
	"get_task":    {args: []string{"task_id", "wait_seconds"}, required: []string{"task_id"}, readOnly: true, idempotent: true},
	"cancel_task": {args: []string{"task_id"}, required: []string{"task_id"}, destructive: true},
	"list_tasks":  {args: []string{"state", "limit", "before"}, readOnly: true, idempotent: true},
	"list_agents": {readOnly: true, idempotent: true},
}

func TestMCPToolsList(t *testing.T) {
	t.Parallel()
	c := mcpMustClient(t, mcpNewFake(), mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	tl, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	want := make([]string, 0, len(mcpWantTools))
	for n := range mcpWantTools {
		want = append(want, n)
	}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want exactly %v", names, want)
	}

	for _, tool := range tl.Tools {
		w := mcpWantTools[tool.Name]
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var j struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			InputSchema struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			} `json:"inputSchema"`
			Annotations map[string]any `json:"annotations"`
		}
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		t.Run(tool.Name, func(t *testing.T) {
			if len(j.Description) < 80 {
				t.Errorf("description too thin for a model to use unaided: %q", j.Description)
			}
			if j.Title == "" {
				t.Error("no title")
			}
			var props []string
			for p := range j.InputSchema.Properties {
				props = append(props, p)
			}
			sort.Strings(props)
			wantArgs := slices.Clone(w.args)
			sort.Strings(wantArgs)
			if !slices.Equal(props, wantArgs) {
				t.Errorf("arguments = %v, want %v", props, wantArgs)
			}
			if !slices.Equal(j.InputSchema.Required, w.required) && !(len(j.InputSchema.Required) == 0 && len(w.required) == 0) {
				t.Errorf("required = %v, want %v", j.InputSchema.Required, w.required)
			}
			if ap := j.InputSchema.AdditionalProperties; ap == nil || *ap {
				t.Errorf("inputSchema.additionalProperties = %v, want false", ap)
			}
			for _, p := range []string{"from", "sender", "caller"} {
				if _, ok := j.InputSchema.Properties[p]; ok {
					t.Errorf("tool has a %q argument; identity is fixed at launch", p)
				}
			}
			wantHints := map[string]bool{"readOnlyHint": w.readOnly, "destructiveHint": w.destructive,
				"idempotentHint": w.idempotent, "openWorldHint": false}
			for h, v := range wantHints {
				got, ok := j.Annotations[h]
				if !ok {
					t.Errorf("annotation %s missing from the JSON", h)
				} else if got != v {
					t.Errorf("annotation %s = %v, want %v", h, got, v)
				}
			}
			if title, _ := j.Annotations["title"].(string); title == "" {
				t.Error("annotations.title missing")
			}
			if raw, ok := j.InputSchema.Properties["artifacts"]; ok {
				var a struct {
					Type  string `json:"type"`
					Items struct {
						Required             []string                   `json:"required"`
						Properties           map[string]json.RawMessage `json:"properties"`
						AdditionalProperties *bool                      `json:"additionalProperties"`
					} `json:"items"`
				}
				if err := json.Unmarshal(raw, &a); err != nil {
					t.Fatal(err)
				}
				if a.Type != "array" || !slices.Equal(a.Items.Required, []string{"uri"}) ||
					a.Items.AdditionalProperties == nil || *a.Items.AdditionalProperties || len(a.Items.Properties) != 3 {
					t.Errorf("artifacts schema = %s", raw)
				}
			}
		})
	}
}

func TestMCPToolSchemaDetails(t *testing.T) {
	t.Parallel()
	c := mcpMustClient(t, mcpNewFake(), mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	tl, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	prop := func(tool, arg string) map[string]any {
		for _, tt := range tl.Tools {
			if tt.Name == tool {
				p, _ := tt.InputSchema.Properties[arg].(map[string]any)
				return p
			}
		}
		return nil
	}
	if p := prop("submit_task", "mode"); p["default"] != "read_only" || !reflect.DeepEqual(p["enum"], []any{"read_only", "state_changing"}) {
		t.Errorf("submit_task.mode = %v", p)
	}
	states := []any{}
	for _, s := range model.AllStates() {
		states = append(states, string(s))
	}
	if p := prop("list_tasks", "state"); !reflect.DeepEqual(p["enum"], states) {
		t.Errorf("list_tasks.state = %v, want enum of the 8 states", p)
	}
	if p := prop("check_inbox", "unread_only"); p["default"] != true || p["type"] != "boolean" {
		t.Errorf("check_inbox.unread_only = %v", p)
	}
	for _, tool := range []string{"check_inbox", "list_tasks"} {
		if p := prop(tool, "limit"); p["type"] != "integer" || p["default"] != float64(50) || p["maximum"] != float64(1000) || p["minimum"] != float64(1) {
			t.Errorf("%s.limit = %v", tool, p)
		}
	}
	// Array bounds are the daemon's own, so that a client checking the
	// schema never sends what the relay then refuses.
	for _, c := range []struct {
		tool, arg string
		max       int
	}{
		{"submit_task", "reference_task_ids", model.MaxReferenceTaskIDs},
		{"submit_task", "artifacts", model.MaxArtifacts},
		{"send_message", "artifacts", model.MaxArtifacts},
		{"ack_messages", "message_ids", 1000},
	} {
		if p := prop(c.tool, c.arg); p["maxItems"] != float64(c.max) {
			t.Errorf("%s.%s maxItems = %v, want %d", c.tool, c.arg, p["maxItems"], c.max)
		}
	}
	if p := prop("submit_task", "cwd"); !strings.Contains(fmt.Sprint(p["description"]), mcpTestCwd) {
		t.Errorf("submit_task.cwd does not name the default cwd: %v", p)
	}
}

func TestMCPToolsCallTheService(t *testing.T) {
	t.Parallel()
	arts := []any{map[string]any{"uri": "file:///tmp/a.md", "media_type": "text/markdown", "name": "a"}}
	wantArts := []model.Artifact{{URI: "file:///tmp/a.md", MediaType: "text/markdown", Name: "a"}}
	cases := []struct {
		name   string
		tool   string
		args   any
		want   mcpCall
		result func(t *testing.T, out map[string]any)
	}{
		{name: "send_message", tool: "send_message",
			args: map[string]any{"to": "codex", "body": "hello", "context_id": "ctx-1", "reply_to": "MSG-0", "artifacts": arts},
			want: mcpCall{"SendMessage", mcpTestAgent, model.SendRequest{To: "codex", Body: "hello", ContextID: "ctx-1", ReplyTo: "MSG-0", Artifacts: wantArts}},
			result: func(t *testing.T, out map[string]any) {
				if out["message_id"] != "MSG-1" || out["from"] != mcpTestAgent || out["state"] != "stored" {
					t.Errorf("message = %v", out)
				}
			}},
		{name: "send_message minimal", tool: "send_message",
			args: map[string]any{"to": "codex", "body": "hello", "context_id": nil},
			want: mcpCall{"SendMessage", mcpTestAgent, model.SendRequest{To: "codex", Body: "hello"}}},
		{name: "check_inbox defaults", tool: "check_inbox", args: map[string]any{},
			want: mcpCall{"CheckInbox", mcpTestAgent, mcpInboxArgs{UnreadOnly: true, Limit: 50}},
			result: func(t *testing.T, out map[string]any) {
				msgs, _ := out["messages"].([]any)
				if len(msgs) != 1 || out["unread"] != float64(3) {
					t.Errorf("inbox = %v", out)
				}
			}},
		{name: "check_inbox no arguments at all", tool: "check_inbox", args: nil,
			want: mcpCall{"CheckInbox", mcpTestAgent, mcpInboxArgs{UnreadOnly: true, Limit: 50}}},
		{name: "check_inbox explicit", tool: "check_inbox", args: map[string]any{"unread_only": false, "limit": 1000},
			want: mcpCall{"CheckInbox", mcpTestAgent, mcpInboxArgs{UnreadOnly: false, Limit: 1000}}},
		{name: "check_inbox integral float limit", tool: "check_inbox", args: map[string]any{"limit": 7.0},
			want: mcpCall{"CheckInbox", mcpTestAgent, mcpInboxArgs{UnreadOnly: true, Limit: 7}}},
		{name: "ack_messages", tool: "ack_messages", args: map[string]any{"message_ids": []any{"MSG-1", "MSG-2"}},
			want: mcpCall{"AckMessages", mcpTestAgent, []string{"MSG-1", "MSG-2"}},
			result: func(t *testing.T, out map[string]any) {
				if !reflect.DeepEqual(out, map[string]any{"acked": float64(2)}) {
					t.Errorf("ack = %v", out)
				}
			}},
		{name: "submit_task defaults", tool: "submit_task", args: map[string]any{"target": "codex", "prompt": "review"},
			want: mcpCall{"SubmitTask", mcpTestAgent, model.SubmitRequest{Target: "codex", Prompt: "review", Mode: model.ModeReadOnly, Cwd: mcpTestCwd}},
			result: func(t *testing.T, out map[string]any) {
				if out["task_id"] != "T-1" || out["state"] != "submitted" || out["caller"] != mcpTestAgent || out["cwd"] != mcpTestCwd {
					t.Errorf("task = %v", out)
				}
			}},
		{name: "submit_task full", tool: "submit_task", args: map[string]any{"target": "claude", "prompt": "fix it",
			"mission_id": "M-1", "lease_id": "S-1", "mode": "state_changing", "context_id": "ctx-2",
			"reference_task_ids": []any{"T-0"}, "artifacts": arts, "idempotency_key": "k1", "cwd": "/srv/repo"},
			want: mcpCall{"SubmitTask", mcpTestAgent, model.SubmitRequest{Target: "claude", Prompt: "fix it", MissionID: "M-1",
				LeaseID: "S-1", Mode: model.ModeStateChanging, ContextID: "ctx-2", ReferenceTaskIDs: []string{"T-0"},
				Artifacts: wantArts, IdempotencyKey: "k1", Cwd: "/srv/repo"}}},
		{name: "get_task", tool: "get_task", args: map[string]any{"task_id": "T-7"},
			want: mcpCall{"GetTask", mcpTestAgent, "T-7"},
			result: func(t *testing.T, out map[string]any) {
				if out["task_id"] != "T-7" || out["state"] != "working" {
					t.Errorf("task = %v", out)
				}
			}},
		{name: "get_task no wait", tool: "get_task", args: map[string]any{"task_id": "T-7", "wait_seconds": 0},
			want: mcpCall{"GetTask", mcpTestAgent, "T-7"}},
		{name: "get_task wait", tool: "get_task", args: map[string]any{"task_id": "T-7", "wait_seconds": 30},
			want: mcpCall{"WaitTask", mcpTestAgent, mcpWaitArgs{"T-7", 30 * time.Second}},
			result: func(t *testing.T, out map[string]any) {
				if out["task_id"] != "T-7" || out["state"] != "completed" {
					t.Errorf("task = %v", out)
				}
			}},
		{name: "get_task longest wait", tool: "get_task", args: map[string]any{"task_id": "T-7", "wait_seconds": 50.0},
			want: mcpCall{"WaitTask", mcpTestAgent, mcpWaitArgs{"T-7", 50 * time.Second}}},
		{name: "cancel_task", tool: "cancel_task", args: map[string]any{"task_id": "T-7"},
			want: mcpCall{"CancelTask", mcpTestAgent, "T-7"},
			result: func(t *testing.T, out map[string]any) {
				if out["state"] != "canceled" || out["code"] != "canceled_by_submitter" {
					t.Errorf("task = %v", out)
				}
			}},
		{name: "list_tasks defaults", tool: "list_tasks", args: map[string]any{},
			want: mcpCall{"ListTasks", mcpTestAgent, mcpListArgs{State: "", Limit: 50}},
			result: func(t *testing.T, out map[string]any) {
				ts, _ := out["tasks"].([]any)
				if len(out) != 1 || len(ts) != 1 {
					t.Errorf("tasks = %v", out)
				}
			}},
		{name: "list_tasks filtered", tool: "list_tasks", args: map[string]any{"state": "blocked", "limit": 5, "before": "T-9"},
			want: mcpCall{"ListTasks", mcpTestAgent, mcpListArgs{State: model.StateBlocked, Limit: 5, Before: "T-9"}}},
		{name: "list_agents", tool: "list_agents", args: map[string]any{},
			want: mcpCall{"ListAgents", "", nil},
			result: func(t *testing.T, out map[string]any) {
				as, _ := out["agents"].([]any)
				if len(out) != 1 || len(as) != 1 || as[0].(map[string]any)["name"] != "codex" {
					t.Errorf("agents = %v", out)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := mcpNewFake()
			c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
			out := mcpMustOK(t, mcpMustCall(t, c, tc.tool, tc.args))
			calls := svc.Calls()
			if len(calls) != 1 || !reflect.DeepEqual(calls[0], tc.want) {
				t.Fatalf("service calls = %#v\nwant [%#v]", calls, tc.want)
			}
			if tc.result != nil {
				tc.result(t, out)
			}
		})
	}
}

func TestMCPEmptyListingsAreArrays(t *testing.T) {
	t.Parallel()
	svc := mcpNewFake()
	svc.noResults = true
	c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	for tool, key := range map[string]string{"check_inbox": "messages", "list_tasks": "tasks", "list_agents": "agents"} {
		out := mcpMustOK(t, mcpMustCall(t, c, tool, map[string]any{}))
		if arr, ok := out[key].([]any); !ok || len(arr) != 0 {
			t.Errorf("%s: %s = %#v, want []", tool, key, out[key])
		}
	}
}

func TestMCPRefusesUnknownArguments(t *testing.T) {
	t.Parallel()
	valid := map[string]map[string]any{
		"send_message": {"to": "codex", "body": "hi"},
		"check_inbox":  {},
		"ack_messages": {"message_ids": []any{"MSG-1"}},
		"submit_task":  {"target": "codex", "prompt": "p"},
		"get_task":     {"task_id": "T-1"},
		"cancel_task":  {"task_id": "T-1"},
		"list_tasks":   {},
		"list_agents":  {},
	}
	for tool, args := range valid {
		for _, extra := range []string{"from", "sender", "caller", "priority"} {
			t.Run(tool+"/"+extra, func(t *testing.T) {
				t.Parallel()
				svc := mcpNewFake()
				c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
				a := map[string]any{extra: "codex"}
				for k, v := range args {
					a[k] = v
				}
				e := mcpMustToolError(t, mcpMustCall(t, c, tool, a), model.CodeInvalidArgs)
				if !strings.Contains(e["message"].(string), fmt.Sprintf("%q", extra)) {
					t.Errorf("message does not name the argument %q: %v", extra, e)
				}
				if extra != "priority" && !strings.Contains(e["hint"].(string), "fixed at launch") {
					t.Errorf("hint does not explain the fixed identity: %v", e)
				}
				if calls := svc.Calls(); len(calls) != 0 {
					t.Errorf("service called despite the unknown argument: %v", calls)
				}
			})
		}
	}
}

func TestMCPRefusesBadArguments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tool    string
		args    any
		mention string
	}{
		{"send_message", map[string]any{"body": "hi"}, `"to"`},
		{"send_message", map[string]any{"to": "codex", "body": ""}, `"body"`},
		{"send_message", map[string]any{"to": []any{"codex", "gemini"}, "body": "hi"}, `"to"`},
		{"send_message", map[string]any{"to": "codex", "body": 42}, `"body"`},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": "file:///x"}, `"artifacts"`},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": []any{"file:///x"}}, "artifacts[0]"},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": []any{map[string]any{"name": "x"}}}, "artifacts[0].uri"},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": []any{map[string]any{"uri": ""}}}, "artifacts[0].uri"},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": []any{map[string]any{"uri": "file:///x", "content": "secret"}}}, `"content"`},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": []any{map[string]any{"uri": "file:///x", "name": 3}}}, "artifacts[0].name"},
		{"check_inbox", map[string]any{"unread_only": "true"}, `"unread_only"`},
		{"check_inbox", map[string]any{"limit": -1}, `"limit"`},
		{"check_inbox", map[string]any{"limit": 0}, `"limit"`},
		{"check_inbox", map[string]any{"limit": 2.5}, `"limit"`},
		{"check_inbox", map[string]any{"limit": 1001}, `"limit"`},
		{"check_inbox", map[string]any{"limit": json.RawMessage("99999999999999999999999")}, `"limit"`},
		{"check_inbox", map[string]any{"limit": "10"}, `"limit"`},
		{"check_inbox", []any{"limit"}, "JSON object"},
		{"check_inbox", "unread_only", "JSON object"},
		{"ack_messages", map[string]any{}, `"message_ids"`},
		{"ack_messages", map[string]any{"message_ids": "MSG-1"}, `"message_ids"`},
		{"ack_messages", map[string]any{"message_ids": []any{}}, `"message_ids"`},
		{"ack_messages", map[string]any{"message_ids": []any{"MSG-1", 2}}, "message_ids[1]"},
		{"ack_messages", map[string]any{"message_ids": []any{""}}, "message_ids[0]"},
		{"submit_task", map[string]any{"target": "codex"}, `"prompt"`},
		{"submit_task", map[string]any{"target": "codex", "prompt": "p", "mode": "yolo"}, `"mode"`},
		{"submit_task", map[string]any{"target": "codex", "prompt": "p", "mode": ""}, `"mode"`},
		{"submit_task", map[string]any{"target": "codex", "prompt": "p", "reference_task_ids": "T-1"}, `"reference_task_ids"`},
		{"submit_task", map[string]any{"target": "codex", "prompt": "p", "cwd": 7}, `"cwd"`},
		{"submit_task", map[string]any{"target": "codex", "prompt": "p", "reference_task_ids": manyStrings(model.MaxReferenceTaskIDs + 1)}, "at most 64"},
		{"send_message", map[string]any{"to": "codex", "body": "hi", "artifacts": manyArtifacts(model.MaxArtifacts + 1)}, "at most 64"},
		{"submit_task", map[string]any{"target": "codex", "prompt": "p", "mission_id": map[string]any{}}, `"mission_id"`},
		{"get_task", map[string]any{}, `"task_id"`},
		{"get_task", map[string]any{"task_id": nil}, `"task_id"`},
		{"get_task", map[string]any{"task_id": "T-1", "wait_seconds": 51}, "from 0 to 50"},
		{"get_task", map[string]any{"task_id": "T-1", "wait_seconds": -1}, `"wait_seconds"`},
		{"get_task", map[string]any{"task_id": "T-1", "wait_seconds": 2.5}, `"wait_seconds"`},
		{"get_task", map[string]any{"task_id": "T-1", "wait_seconds": "30"}, `"wait_seconds"`},
		{"get_task", map[string]any{"task_id": "T-1", "wait_seconds": true}, `"wait_seconds"`},
		{"get_task", map[string]any{"task_id": "T-1", "wait_seconds": json.RawMessage("1e9")}, `"wait_seconds"`},
		{"cancel_task", map[string]any{"task_id": 12}, `"task_id"`},
		{"list_tasks", map[string]any{"state": "running"}, `"state"`},
		{"list_tasks", map[string]any{"limit": true}, `"limit"`},
		{"list_agents", map[string]any{"name": "codex"}, `"name"`},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, tc.tool), func(t *testing.T) {
			t.Parallel()
			svc := mcpNewFake()
			c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
			e := mcpMustToolError(t, mcpMustCall(t, c, tc.tool, tc.args), model.CodeInvalidArgs)
			if !strings.Contains(e["message"].(string), tc.mention) {
				t.Errorf("message %q does not mention %s", e["message"], tc.mention)
			}
			if e["hint"] == "" {
				t.Error("empty hint")
			}
			if calls := svc.Calls(); len(calls) != 0 {
				t.Errorf("service called with bad arguments: %v", calls)
			}
		})
	}
}

func manyStrings(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("T-%d", i)
	}
	return out
}

func manyArtifacts(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"uri": fmt.Sprintf("file:///a/%d", i)}
	}
	return out
}

func TestMCPArgumentsDecoding(t *testing.T) {
	t.Parallel()
	tool := mcpTool{name: "x", params: []mcpParam{{name: "a", kind: mcpString}}}
	for _, raw := range []string{`{"a":"1","a":"2"}`, `{"a":"1"} {}`, `{"a":`, `[1]`, `"a"`, `7`} {
		var req mcp.CallToolRequest
		req.Params.RawArguments = json.RawMessage(raw)
		if _, err := parseArgs(tool, req); model.ErrorCode(err) != model.CodeInvalidArgs {
			t.Errorf("%s: err = %v, want invalid_args", raw, err)
		}
	}
	for _, raw := range []string{`{}`, `null`, ` {"a": null} `, `{"a":"v"}`} {
		var req mcp.CallToolRequest
		req.Params.RawArguments = json.RawMessage(raw)
		if _, err := parseArgs(tool, req); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

func TestMCPServiceErrorsAreToolErrors(t *testing.T) {
	t.Parallel()
	svc := mcpNewFake()
	svc.setErr("GetTask", model.Errorf(model.CodeNotFound, "no task T-404").WithHint("list_tasks shows yours"))
	svc.setErr("SendMessage", model.Errorf(model.CodeInvalidRecipient, "you cannot message yourself")) // no hint
	svc.setErr("CancelTask", &model.Error{Code: model.CodeTaskNotCancelable, Message: "task T-1 is completed",
		Err: errors.New("row 17 in tasks: state completed")})
	svc.setErr("ListTasks", fmt.Errorf("sql: database is locked at /home/u/.local/state/hai-relay/relay.db"))
	svc.setErr("ListAgents", context.DeadlineExceeded)
	c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION)

	e := mcpMustToolError(t, mcpMustCall(t, c, "get_task", map[string]any{"task_id": "T-404"}), model.CodeNotFound)
	if e["message"] != "no task T-404" || e["hint"] != "list_tasks shows yours" {
		t.Errorf("not_found = %v", e)
	}
	e = mcpMustToolError(t, mcpMustCall(t, c, "send_message", map[string]any{"to": mcpTestAgent, "body": "x"}), model.CodeInvalidRecipient)
	if e["hint"] == "" {
		t.Errorf("missing default hint from the catalogue: %v", e)
	}
	e = mcpMustToolError(t, mcpMustCall(t, c, "cancel_task", map[string]any{"task_id": "T-1"}), model.CodeTaskNotCancelable)
	if strings.Contains(fmt.Sprint(e), "row 17") {
		t.Errorf("wrapped internal detail leaked: %v", e)
	}
	for _, tool := range []string{"list_tasks", "list_agents"} {
		res := mcpMustCall(t, c, tool, map[string]any{})
		mcpMustToolError(t, res, model.CodeInternal)
		text := res.Content[0].(mcp.TextContent).Text
		if strings.Contains(text, "sql") || strings.Contains(text, "relay.db") || strings.Contains(text, "deadline") {
			t.Errorf("internal error leaked: %s", text)
		}
	}
}

func TestMCPProtocolVersions(t *testing.T) {
	t.Parallel()
	for _, v := range []string{mcp.ProtocolVersion20250618, mcp.ProtocolVersion20251125} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			svc := mcpNewFake()
			c := mcpMustClient(t, svc, "")
			res := mcpMustInitialize(t, c, v)
			if res.ProtocolVersion != v {
				t.Errorf("negotiated %q, want %q", res.ProtocolVersion, v)
			}
			if res.ServerInfo.Name != serverName || res.ServerInfo.Version != "test" {
				t.Errorf("serverInfo = %+v", res.ServerInfo)
			}
			if !strings.Contains(res.Instructions, mcpTestAgent) {
				t.Errorf("instructions do not name the identity: %q", res.Instructions)
			}
			// The connection audit runs beside the initialize answer; the
			// first tool call waits for it.
			mcpMustOK(t, mcpMustCall(t, c, "list_agents", map[string]any{}))
			if got := svc.Conns(); len(got) != 1 {
				t.Errorf("Connected calls after initialize and a tool call = %v, want 1", got)
			}
		})
	}
}

func TestMCPConnectedAudit(t *testing.T) {
	t.Parallel()
	t.Run("on initialize, once", func(t *testing.T) {
		t.Parallel()
		svc := mcpNewFake()
		c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		mcpMustOK(t, mcpMustCall(t, c, "list_agents", nil))
		mcpMustOK(t, mcpMustCall(t, c, "check_inbox", nil))
		want := []model.Conn{{Agent: mcpTestAgent, PID: mcpTestPID, UID: svc.Conns()[0].UID, Kind: "mcp"}}
		if got := svc.Conns(); !reflect.DeepEqual(got, want) {
			t.Errorf("Connected = %+v, want %+v", got, want)
		}
	})
	t.Run("without initialize, before the first call", func(t *testing.T) {
		t.Parallel()
		svc := mcpNewFake()
		// The stateless 2026-07-28 revision has no initialize handshake.
		c := mcpMustClient(t, svc, mcp.LATEST_PROTOCOL_VERSION)
		if got := svc.Conns(); len(got) != 0 {
			t.Fatalf("Connected before any call: %v", got)
		}
		mcpMustOK(t, mcpMustCall(t, c, "list_agents", nil))
		mcpMustOK(t, mcpMustCall(t, c, "list_agents", nil))
		if got := svc.Conns(); len(got) != 1 || got[0].Agent != mcpTestAgent || got[0].PID != mcpTestPID || got[0].Kind != "mcp" {
			t.Errorf("Connected = %+v", got)
		}
	})
	t.Run("fails closed", func(t *testing.T) {
		t.Parallel()
		svc := mcpNewFake()
		svc.setConnErr(model.Errorf(model.CodeDaemonUnavailable, "no daemon"))
		c := mcpMustClient(t, svc, mcp.LATEST_LEGACY_PROTOCOL_VERSION) // initialize still succeeds
		mcpMustToolError(t, mcpMustCall(t, c, "submit_task", map[string]any{"target": "codex", "prompt": "p"}), model.CodeDaemonUnavailable)
		if calls := svc.Calls(); len(calls) != 0 {
			t.Fatalf("tool served on an unaudited connection: %v", calls)
		}
		svc.setConnErr(nil)
		mcpMustOK(t, mcpMustCall(t, c, "submit_task", map[string]any{"target": "codex", "prompt": "p"}))
		if got := svc.Conns(); len(got) != 1 {
			t.Errorf("Connected = %v, want one after recovery", got)
		}
	})
}

func TestNewMCPServerOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Agent: "", Cwd: "/x"},
		{Agent: model.RelayAgent, Cwd: "/x"},
		{Agent: "Claude Code", Cwd: "/x"},
		{Agent: "claude", Cwd: "relative/dir"},
	} {
		if _, err := New(mcpNewFake(), o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := New(nil, mcpOptions()); err == nil {
		t.Error("nil service accepted")
	}
	o, err := Options{Agent: "codex"}.withDefaults()
	if err != nil || o.Cwd == "" || o.PID == 0 || o.Version == "" || o.Logger == nil {
		t.Errorf("defaults = %+v, %v", o, err)
	}
}
