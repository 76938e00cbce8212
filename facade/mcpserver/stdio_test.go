package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
)

// mcpPipes is a facade served by Serve over two in-memory pipes.
type mcpPipes struct {
	toServer   *io.PipeWriter // the facade's stdin
	fromServer *io.PipeReader // the facade's stdout
	done       chan error     // Serve's return value
	cancel     context.CancelFunc
}

// mcpMustServePipes starts Serve on pipes. Closing toServer is EOF on
// the facade's stdin; the facade's stdout is closed once Serve returns.
func mcpMustServePipes(tb testing.TB, svc model.AgentService) *mcpPipes {
	tb.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &mcpPipes{toServer: inW, fromServer: outR, done: make(chan error, 1), cancel: cancel}
	go func() {
		err := Serve(ctx, svc, mcpOptions(), inR, outW)
		_ = outW.Close()
		p.done <- err
	}()
	tb.Cleanup(func() {
		cancel()
		_ = inW.Close()
		_ = outR.Close()
	})
	return p
}

// wait returns Serve's result, failing after a few seconds.
func (p *mcpPipes) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-p.done:
		return err
	case <-time.After(10 * time.Second):
		tb.Fatal("Serve did not return")
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
		t.Errorf("Serve at EOF = %v, want nil", err)
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
		t.Errorf("Serve at EOF = %v", err)
	}
}

func TestServeMCPStopsOnContextDone(t *testing.T) {
	p := mcpMustServePipes(t, mcpNewFake())
	p.cancel()
	if err := p.wait(t); err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
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

// mcpGateService holds every SendMessage until gate is closed, then answers
// it, unless the call's context ended first: that is counted, and
// answered with the context's error.
type mcpGateService struct {
	*mcpFakeService
	gate     <-chan struct{}
	entered  chan struct{} // gets a value as each call arrives, if not nil
	canceled atomic.Int64
}

func (g *mcpGateService) SendMessage(ctx context.Context, caller string, r model.SendRequest) (model.Message, error) {
	if g.entered != nil {
		g.entered <- struct{}{}
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		g.canceled.Add(1)
		return model.Message{}, err
	}
	return g.mcpFakeService.SendMessage(ctx, caller, r)
}

// eofReader closes eof once r has returned io.EOF.
type eofReader struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}

// mcpOneShot is what a one-shot client writes: initialize, initialized and
// n send_message calls (ids 2…n+1), the last line without its newline.
func mcpOneShot(n int) string {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"one-shot","version":"0"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := range n {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"codex","body":"m%d"}}}`, i+2, i)
		if i < n-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestServeMCPFinishesRequestsAfterEOF: a client that writes its requests
// and closes stdin at once gets every answer. Here each call is held in the
// service until the facade has read the end of stdin (as many calls as are
// served at once): none is canceled, each is answered with success, and
// Serve returns nil only after the last answer.
func TestServeMCPFinishesRequestsAfterEOF(t *testing.T) {
	t.Parallel()
	const n = maxInFlight
	in := &eofReader{r: strings.NewReader(mcpOneShot(n)), eof: make(chan struct{})}
	svc := &mcpGateService{mcpFakeService: mcpNewFake(), gate: in.eof}
	var out syncWriter
	if err := Serve(context.Background(), svc, mcpOptions(), in, &out); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	answers := map[float64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("answer is not JSON: %q", line)
		}
		id, _ := m["id"].(float64)
		res, _ := m["result"].(map[string]any)
		if res == nil || res["isError"] == true {
			t.Errorf("id %v: %s", m["id"], line)
		}
		answers[id] = true
	}
	for id := 1; id <= n+1; id++ {
		if !answers[float64(id)] {
			t.Errorf("no answer to id %d", id)
		}
	}
	if c := svc.canceled.Load(); c != 0 {
		t.Errorf("%d calls were canceled at the end of stdin", c)
	}
	if got := len(svc.Calls()); got != n {
		t.Errorf("%d calls reached the service, want %d", got, n)
	}
}

// TestServeMCPFinishesRequestsAfterCancel: when the serve context ends
// (relay mcp got SIGTERM) with a request in flight, the facade reads no
// more but finishes and answers that request.
func TestServeMCPFinishesRequestsAfterCancel(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	svc := &mcpGateService{mcpFakeService: mcpNewFake(), gate: gate, entered: make(chan struct{}, 1)}
	inR, inW := io.Pipe()
	defer inW.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncWriter
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, svc, mcpOptions(), inR, &out) }()
	if _, err := io.WriteString(inW, mcpOneShot(1)+"\n"); err != nil {
		t.Fatal(err)
	}
	<-svc.entered
	cancel()
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if svc.canceled.Load() != 0 || !strings.Contains(out.String(), `"id":2,"result"`) || strings.Contains(out.String(), `"isError":true`) {
		t.Errorf("the call in flight was not answered with success: canceled %d, out %s", svc.canceled.Load(), out.String())
	}
}

// TestServeMCPClientStopsReading: when the client no longer reads stdout,
// every request it sent still reaches the service, and Serve ends
// normally.
func TestServeMCPClientStopsReading(t *testing.T) {
	t.Parallel()
	const n = 10
	svc := mcpNewFake()
	if err := Serve(context.Background(), svc, mcpOptions(), strings.NewReader(mcpOneShot(n)), brokenWriter{}); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if got := len(svc.Calls()); got != n {
		t.Errorf("%d calls reached the service, want %d", got, n)
	}
}

// TestServeMCPDrainBound: a call still running o.Drain after the end of
// stdin is canceled, and Serve returns.
func TestServeMCPDrainBound(t *testing.T) {
	t.Parallel()
	svc := &mcpGateService{mcpFakeService: mcpNewFake(), gate: make(chan struct{})} // never opens
	o := mcpOptions()
	o.Drain = 50 * time.Millisecond
	var out syncWriter
	if err := Serve(context.Background(), svc, o, strings.NewReader(mcpOneShot(2)), &out); err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if c := svc.canceled.Load(); c != 2 {
		t.Errorf("%d calls canceled after the drain bound, want 2", c)
	}
}

// syncWriter is a bytes.Buffer safe for concurrent writes.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// brokenWriter fails every write, as a stdout whose reader is gone does.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }
