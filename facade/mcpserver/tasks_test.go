package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hai-relay/relay/model"
)

// The published schemas of the tasks extension and of the MCP revision it
// builds on (testdata/README.md says where they come from).
const (
	tasksSchemaURL = "https://modelcontextprotocol.io/ext-tasks/schema.json"
	specSchemaURL  = "https://modelcontextprotocol.io/spec/schema.json"
)

var (
	schemaOnce sync.Once
	schemas    *jsonschema.Compiler
	schemaErr  error
)

// mcpSchema compiles definition def of the extension's schema (ext) or of
// the core one.
func mcpSchema(t *testing.T, ext bool, def string) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		schemas = jsonschema.NewCompiler()
		for url, file := range map[string]string{tasksSchemaURL: "tasks-extension.schema.json", specSchemaURL: "mcp-spec.schema.json"} {
			f, err := os.Open(filepath.Join("testdata", file))
			if err != nil {
				schemaErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err == nil {
				err = schemas.AddResource(url, doc)
			}
			if err != nil {
				schemaErr = fmt.Errorf("%s: %w", file, err)
				return
			}
		}
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	url := specSchemaURL
	if ext {
		url = tasksSchemaURL
	}
	s, err := schemas.Compile(url + "#/$defs/" + def)
	if err != nil {
		t.Fatalf("compile %s: %v", def, err)
	}
	return s
}

// conforms checks v (a decoded JSON value) against a definition.
func conforms(t *testing.T, ext bool, def string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := mcpSchema(t, ext, def).Validate(doc); err != nil {
		t.Errorf("%s does not conform to %s: %v", b, def, err)
	}
}

// tasksFake answers GetTask from a table of tasks, as the daemon would:
// an id it does not hold is not_found.
type tasksFake struct {
	*mcpFakeService
	tasks map[string]model.Task
}

func (f *tasksFake) GetTask(_ context.Context, caller, id string) (model.Task, error) {
	_ = f.record("GetTask", caller, id)
	t, ok := f.tasks[id]
	if !ok {
		return model.Task{}, model.Errorf(model.CodeNotFound, "no task %q", id)
	}
	return t, nil
}

// stdioClient speaks JSON-RPC lines to a facade served over pipes.
type stdioClient struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startStdio(t *testing.T, svc model.AgentService) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), svc, mcpOptions(), inR, outW); _ = outW.Close() }()
	t.Cleanup(func() {
		_ = inW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the facade did not end at the end of its input")
		}
	})
	return &stdioClient{t: t, in: inW, out: bufio.NewReader(outR)}
}

// request sends method with params declaring the tasks extension or not,
// and returns the whole response.
func (c *stdioClient) request(method string, tasks bool, params map[string]any) map[string]any {
	c.t.Helper()
	c.id++
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "schema-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("%s: no answer: %v", method, err)
	}
	var resp map[string]any
	if err := json.Unmarshal(line, &resp); err != nil || resp["id"] != float64(c.id) {
		c.t.Fatalf("%s: answer %s (%v)", method, line, err)
	}
	return resp
}

func result(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	r, ok := resp["result"].(map[string]any)
	if !ok {
		t.Fatalf("want a result: %v", resp)
	}
	return r
}

// Every answer the tasks extension concerns conforms to the published
// schemas of the extension and of MCP 2026-07-28, and carries what the
// relay task says: the handle for a submit that declares the extension,
// working until the task ends, completed with get_task's CallToolResult
// (isError for a failed, rejected or blocked task), cancelled for a
// canceled one; the extension's errors for an unknown task and for a
// request that does not declare the extension. A submit that does not
// declare it gets today's CallToolResult.
func TestMCPTasksConformToTheSchemas(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	task := func(id string, st model.State, code model.Code, result string) model.Task {
		return model.Task{ID: id, State: st, Code: code, Caller: mcpTestAgent, Target: "codex", Mode: model.ModeReadOnly,
			MissionID: "M-1", LeaseID: "S-1", Result: result, CreatedAt: t0, UpdatedAt: t0.Add(time.Minute)}
	}
	fake := &tasksFake{mcpFakeService: mcpNewFake(), tasks: map[string]model.Task{
		"T-1":        task("T-1", model.StateWorking, "", ""),
		"T-done":     task("T-done", model.StateCompleted, "", "the answer is 42"),
		"T-failed":   task("T-failed", model.StateFailed, model.CodeAgentRefused, ""),
		"T-rejected": task("T-rejected", model.StateRejected, model.CodeAuthorityDenied, ""),
		"T-canceled": task("T-canceled", model.StateCanceled, model.CodeCanceledBySubmitter, ""),
		"T-theirs":   {ID: "T-theirs", State: model.StateWorking, Caller: "gemini", Target: mcpTestAgent, CreatedAt: t0, UpdatedAt: t0},
	}}
	c := startStdio(t, fake)

	disc := result(t, c.request("server/discover", true, nil))
	conforms(t, false, "DiscoverResult", disc)
	ext := disc["capabilities"].(map[string]any)["extensions"].(map[string]any)[tasksExtension]
	conforms(t, true, "TasksExtensionCapability", ext)

	args := map[string]any{"target": "codex", "prompt": "review parser.go", "mission_id": "M-1", "lease_id": "S-1"}
	h := result(t, c.request("tools/call", true, map[string]any{"name": "submit_task", "arguments": args}))
	conforms(t, true, "CreateTaskResult", h)
	if h["taskId"] != "T-1" || h["status"] != "working" || h["pollIntervalMs"] != float64(TaskPollInterval.Milliseconds()) {
		t.Errorf("the handle: %v", h)
	}
	// A client polls at the pace the handle asks: a task's end must reach
	// the model within a second, not two.
	if ms, _ := h["pollIntervalMs"].(float64); ms <= 0 || ms > 1000 {
		t.Errorf("the handle asks for a poll every %v ms, want at most 1000", h["pollIntervalMs"])
	}

	for id, want := range map[string]struct {
		status  string
		isError any // nil: no result
		state   model.State
	}{
		"T-1":        {"working", nil, ""},
		"T-done":     {"completed", false, model.StateCompleted},
		"T-failed":   {"completed", true, model.StateFailed},
		"T-rejected": {"completed", true, model.StateRejected},
		"T-canceled": {"cancelled", nil, ""},
	} {
		got := result(t, c.request("tasks/get", true, map[string]any{"taskId": id}))
		conforms(t, true, "GetTaskResult", got)
		if got["taskId"] != id || got["status"] != want.status || got["resultType"] != "complete" {
			t.Errorf("tasks/get %s: %v, want %s", id, got, want.status)
		}
		r, hasResult := got["result"].(map[string]any)
		if (want.isError == nil) == hasResult {
			t.Errorf("tasks/get %s: result %v", id, got["result"])
			continue
		}
		if !hasResult {
			continue
		}
		conforms(t, false, "CallToolResult", r)
		isErr, _ := r["isError"].(bool)
		sc, _ := r["structuredContent"].(map[string]any)
		if isErr != want.isError || sc["task_id"] != id || sc["state"] != string(want.state) {
			t.Errorf("tasks/get %s: result %v, want isError %v and the task", id, r, want.isError)
		}
	}
	conforms(t, true, "UpdateTaskResult", result(t, c.request("tasks/update", true, map[string]any{"taskId": "T-1", "inputResponses": map[string]any{}})))
	conforms(t, true, "CancelTaskResult", result(t, c.request("tasks/cancel", true, map[string]any{"taskId": "T-1"})))

	// Errors: an unknown task, another agent's task to cancel, and a
	// request that does not declare the extension.
	for _, e := range []struct {
		method, id string
		tasks      bool
		code       float64
		def        string
	}{
		{"tasks/get", "T-nope", true, codeInvalidParams, "InvalidParamsError"},
		{"tasks/update", "T-nope", true, codeInvalidParams, "InvalidParamsError"},
		{"tasks/cancel", "T-nope", true, codeInvalidParams, "InvalidParamsError"},
		{"tasks/cancel", "T-theirs", true, codeInvalidParams, "InvalidParamsError"},
		{"tasks/get", "T-1", false, codeMissingClientCapabilities, "MissingRequiredClientCapabilityError"},
	} {
		resp := c.request(e.method, e.tasks, map[string]any{"taskId": e.id})
		conforms(t, false, "JSONRPCErrorResponse", resp)
		errObj, _ := resp["error"].(map[string]any)
		if errObj["code"] != e.code {
			t.Errorf("%s %s: %v, want code %v", e.method, e.id, resp, e.code)
			continue
		}
		if e.def == "MissingRequiredClientCapabilityError" {
			conforms(t, false, e.def, resp) // the schema's is the whole response
		} else {
			conforms(t, false, e.def, errObj)
		}
	}

	// Without the extension: today's answer, a CallToolResult.
	plain := result(t, c.request("tools/call", false, map[string]any{"name": "submit_task", "arguments": args}))
	conforms(t, false, "CallToolResult", plain)
	if plain["resultType"] == "task" || plain["taskId"] != nil {
		t.Errorf("submit_task without the extension: %v", plain)
	}

	// The audit events the facade asked the daemon for: the handle's
	// creation, one delivery per ended task (a second tasks/get of an
	// ended task delivers nothing new), and the cancel.
	_ = result(t, c.request("tasks/get", true, map[string]any{"taskId": "T-done"}))
	var events []string
	for _, call := range fake.Calls() {
		if call.Method == "MCPTaskEvent" {
			m := call.Args.(map[string]any)
			events = append(events, m["id"].(string)+":"+m["event"].(string))
		}
	}
	want := []string{"T-1:created", "T-done:delivered", "T-failed:delivered", "T-rejected:delivered", "T-canceled:delivered", "T-1:cancel_requested"}
	if !sameSet(events, want) {
		t.Errorf("MCP task events %v, want %v", events, want)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s]--; seen[s] < 0 {
			return false
		}
	}
	return true
}
