package facade

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
)

// mcpStdioMu serializes the stdio tests: mcp-go keeps its stdio session in
// a package-level variable, so one process runs one stdio server at a time.
var mcpStdioMu sync.Mutex

// mcpPipes is a facade served by ServeMCP over two in-memory pipes.
type mcpPipes struct {
	toServer   *io.PipeWriter // the facade's stdin
	fromServer *io.PipeReader // the facade's stdout
	done       chan error     // ServeMCP's return value
	cancel     context.CancelFunc
}

// mcpMustServePipes starts ServeMCP on pipes. Closing toServer is EOF on
// the facade's stdin; the facade's stdout is closed once ServeMCP returns.
func mcpMustServePipes(tb testing.TB, svc model.AgentService) *mcpPipes {
	tb.Helper()
	mcpStdioMu.Lock()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &mcpPipes{toServer: inW, fromServer: outR, done: make(chan error, 1), cancel: cancel}
	go func() {
		err := ServeMCP(ctx, svc, mcpOptions(), inR, outW)
		_ = outW.Close()
		p.done <- err
	}()
	tb.Cleanup(func() {
		cancel()
		_ = inW.Close()
		_ = outR.Close()
		mcpStdioMu.Unlock()
	})
	return p
}

// wait returns ServeMCP's result, failing after a few seconds.
func (p *mcpPipes) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(10 * time.Second):
		tb.Fatal("ServeMCP did not return")
		return nil
	}
}

func TestServeMCPWithMCPGoClient(t *testing.T) {
	svc := mcpNewFake()
	p := mcpMustServePipes(t, svc)
	c := client.NewClient(transport.NewIO(p.fromServer, p.toServer, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	res := mcpMustInitialize(t, c, mcp.ProtocolVersion20250618)
	if res.ProtocolVersion != mcp.ProtocolVersion20250618 {
		t.Errorf("negotiated %q", res.ProtocolVersion)
	}
	tl, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tl.Tools) != 8 {
		t.Fatalf("tools/list: %d tools, %v", len(tl.Tools), err)
	}
	e := mcpMustToolError(t, mcpMustCall(t, c, "send_message", map[string]any{"to": "codex", "body": "hi", "from": "codex"}), model.CodeInvalidArgs)
	if !strings.Contains(e["message"].(string), `"from"`) {
		t.Errorf("error = %v", e)
	}
	out := mcpMustOK(t, mcpMustCall(t, c, "submit_task", map[string]any{"target": "codex", "prompt": "p"}))
	if out["caller"] != mcpTestAgent || out["cwd"] != mcpTestCwd || out["mode"] != "read_only" {
		t.Errorf("task = %v", out)
	}
	if got := svc.Conns(); len(got) != 1 || got[0].PID != mcpTestPID || got[0].Agent != mcpTestAgent {
		t.Errorf("Connected = %+v", got)
	}

	if err := c.Close(); err != nil { // EOF on the facade's stdin
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Errorf("ServeMCP at EOF = %v, want nil", err)
	}
}

// mcpRawRPC writes one JSON-RPC line and, for a request, reads its answer.
func mcpRawRPC(t *testing.T, p *mcpPipes, r *bufio.Reader, line string, wantAnswer bool) map[string]any {
	t.Helper()
	if _, err := io.WriteString(p.toServer, line+"\n"); err != nil {
		t.Fatal(err)
	}
	if !wantAnswer {
		return nil
	}
	type read struct {
		s   string
		err error
	}
	ch := make(chan read, 1)
	go func() { s, err := r.ReadString('\n'); ch <- read{s, err} }()
	select {
	case got := <-ch:
		if got.err != nil {
			t.Fatalf("read answer to %s: %v", line, got.err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(got.s), &m); err != nil {
			t.Fatalf("answer is not JSON: %v\n%s", err, got.s)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to %s", line)
		return nil
	}
}

func TestServeMCPRawJSONRPC(t *testing.T) {
	svc := mcpNewFake()
	p := mcpMustServePipes(t, svc)
	r := bufio.NewReader(p.fromServer)

	init := mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, true)
	if v := init["result"].(map[string]any)["protocolVersion"]; v != "2025-11-25" {
		t.Fatalf("initialize = %v", init)
	}
	mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)

	list := mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, true)
	tools := list["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 8 {
		t.Fatalf("tools/list has %d tools", len(tools))
	}
	for _, tl := range tools {
		tool := tl.(map[string]any)
		if ap, ok := tool["inputSchema"].(map[string]any)["additionalProperties"]; !ok || ap != false {
			t.Errorf("%s: additionalProperties = %v on the wire", tool["name"], ap)
		}
		ann := tool["annotations"].(map[string]any)
		for _, h := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "title"} {
			if _, ok := ann[h]; !ok {
				t.Errorf("%s: annotation %s missing on the wire", tool["name"], h)
			}
		}
		if ann["openWorldHint"] != false {
			t.Errorf("%s: openWorldHint = %v", tool["name"], ann["openWorldHint"])
		}
	}

	call := mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_task","arguments":{"task_id":"T-1","sender":"codex"}}}`, true)
	if _, isRPCErr := call["error"]; isRPCErr {
		t.Fatalf("unknown argument came back as a JSON-RPC error: %v", call)
	}
	res := call["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] != true || sc["code"] != "invalid_args" {
		t.Fatalf("tools/call = %v", res)
	}
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil || fromText["code"] != "invalid_args" {
		t.Errorf("text block = %q", text)
	}

	svc.setErr("GetTask", model.Errorf(model.CodeNotFound, "no task T-2"))
	call = mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_task","arguments":{"task_id":"T-2"}}}`, true)
	res = call["result"].(map[string]any)
	if sc, _ := res["structuredContent"].(map[string]any); res["isError"] != true || sc["code"] != "not_found" || sc["message"] != "no task T-2" {
		t.Errorf("service error = %v", call)
	}

	if len(svc.Calls()) != 1 {
		t.Errorf("service calls = %v, want only the valid get_task", svc.Calls())
	}
	_ = p.toServer.Close()
	if err := p.wait(t); err != nil {
		t.Errorf("ServeMCP at EOF = %v", err)
	}
}

func TestServeMCPStopsOnContextDone(t *testing.T) {
	p := mcpMustServePipes(t, mcpNewFake())
	p.cancel()
	if err := p.wait(t); err != nil {
		t.Errorf("ServeMCP after cancel = %v, want nil", err)
	}
	// mcp-go's reader goroutine is still blocked on stdin; the cleanup's
	// close of the pipe releases it before goleak looks.
}

// Over stdio, what encoding/json would accept and then silently alter or
// choose among is refused, and the service is never called: in a tool's
// arguments (nested artifacts and id arrays included) as an invalid_args
// tool error; anywhere else in the frame (the tool's name, a second
// "arguments", the id) as a JSON-RPC invalid request naming invalid_args.
func TestServeMCPRefusesAmbiguousJSON(t *testing.T) {
	svc := mcpNewFake()
	p := mcpMustServePipes(t, svc)
	r := bufio.NewReader(p.fromServer)
	mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, true)
	mcpRawRPC(t, p, r, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)

	id := 100
	call := func(params string) map[string]any {
		id++
		return mcpRawRPC(t, p, r, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params), true)
	}

	// In the arguments: a tool error, invalid_args, naming the defect.
	args := map[string][]string{ // tool → argument documents, %s is the bad string
		"send_message": {`{"to":"codex","body":%s}`, `{"to":%s,"body":"b"}`, `{"to":"codex","body":"b","reply_to":%s}`,
			`{"to":"codex","body":"b","context_id":%s}`, `{"to":"codex","body":"b","artifacts":[{"uri":"file:///a","media_type":%s}]}`},
		"submit_task": {`{"target":"codex","prompt":%s}`, `{"target":"codex","prompt":"p","reference_task_ids":["T-1",%s]}`,
			`{"target":"codex","prompt":"p","artifacts":[{"uri":%s}]}`, `{"target":"codex","prompt":"p","cwd":%s}`},
		"ack_messages": {`{"message_ids":[%s]}`},
		"get_task":     {`{"task_id":%s}`},
		"cancel_task":  {`{"task_id":%s}`},
		"list_tasks":   {`{"state":%s}`},
	}
	bad := map[string]string{
		`"\ud800"`:             `\ud800`,
		`"\udc00"`:             `\udc00`,
		`"x\ud800\u0041"`:      `\ud800`,
		`"\ud83d\ud83d\ude00"`: `\ud83d`,
		"\"\xff\"":             "UTF-8",
		"\"\xed\xa0\x80\"":     "UTF-8",
	}
	var cases [][3]string // tool, arguments, mention
	for tool, docs := range args {
		for _, doc := range docs {
			for val, mention := range bad {
				cases = append(cases, [3]string{tool, fmt.Sprintf(doc, val), mention})
			}
		}
	}
	cases = append(cases,
		[3]string{"send_message", `{"to":"codex","body":"b","artifacts":[{"uri":"file:///a","uri":"file:///b"}]}`, `"uri" is given twice`},
		[3]string{"submit_task", `{"target":"codex","prompt":"p","artifacts":[{"uri":"file:///a"},{"uri":"file:///b","name":"x","name":"y"}]}`, `artifacts[1]`},
		[3]string{"submit_task", `{"target":"codex","prompt":"p","artifacts":[{"uri":"file:///a","URI":"file:///b"}]}`, "differ only in case"},
		[3]string{"send_message", `{"to":"codex","body":"b","b\u006fdy":"c"}`, `"body" is given twice`},
	)
	for _, c := range cases {
		res, ok := call(`{"name":"` + c[0] + `","arguments":` + c[1] + `}`)["result"].(map[string]any)
		if !ok {
			t.Errorf("%s %q: no tool result", c[0], c[1])
			continue
		}
		sc, _ := res["structuredContent"].(map[string]any)
		msg, _ := sc["message"].(string)
		if res["isError"] != true || sc["code"] != "invalid_args" || !strings.Contains(msg, c[2]) {
			t.Errorf("%s %q: %v, want invalid_args mentioning %s", c[0], c[1], sc, c[2])
		}
	}

	// Elsewhere in the frame: the request is refused before any tool runs.
	for _, params := range []string{
		`{"name":"get_task","name":"cancel_task","arguments":{"task_id":"T-1"}}`,
		`{"name":"get_task","NAME":"cancel_task","arguments":{"task_id":"T-1"}}`,
		`{"name":"cancel_task","arguments":{"task_id":"T-1"},"arguments":{"task_id":"T-2"}}`,
		`{"name":"cancel_task","arguments":{"task_id":"\ud800"},"arguments":{"task_id":"T-2"}}`,
		`{"name":"cancel_task","Arguments":{"task_id":"T-2"},"arguments":{"task_id":"T-1"}}`,
		`{"name":"get_task","arguments":{"task_id":"T-1"},"_meta":{"progressToken":"\udc00"}}`,
		"{\"name\":\"get_\xfftask\",\"arguments\":{\"task_id\":\"T-1\"}}",
	} {
		got := call(params)
		e, _ := got["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if code, _ := e["code"].(float64); code != -32600 || !strings.Contains(msg, "invalid_args") {
			t.Errorf("params %q: %v, want a JSON-RPC invalid request naming invalid_args", params, got)
		}
	}
	// A duplicate member of the frame itself, beside params.
	id++
	got := mcpRawRPC(t, p, r, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","method":"tools/list","params":{"name":"get_task","arguments":{"task_id":"T-1"}}}`, id), true)
	if e, _ := got["error"].(map[string]any); e == nil || e["code"] != float64(-32600) {
		t.Errorf("a method given twice: %v, want a JSON-RPC invalid request", got)
	}

	if calls := svc.Calls(); len(calls) != 0 {
		t.Errorf("the service was called for refused requests: %+v", calls)
	}
	// The facade goes on serving.
	res := call(`{"name":"get_task","arguments":{"task_id":"T-1"}}`)["result"].(map[string]any)
	if res["isError"] == true || len(svc.Calls()) != 1 {
		t.Errorf("a clean call after the refusals: %v", res)
	}
}
