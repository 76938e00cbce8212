package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// codexTools is the shape of the tools Codex offers: function tools, the
// freeform apply_patch, and nameless built-ins.
var codexTools = []any{
	map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}},
	map[string]any{"type": "custom", "name": "apply_patch", "format": map[string]any{"type": "grammar"}},
	map[string]any{"type": "tool_search", "execution": "client"},
	map[string]any{"type": "web_search"},
}

func userMsg(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
}

// doneItem returns the item of the single response.output_item.done event and
// checks the stream is well formed: created first, completed (with id and
// usage) last, every event's data "type" equal to its event name.
func doneItem(t *testing.T, events []sseEvent) map[string]any {
	t.Helper()
	if len(events) < 3 {
		t.Fatalf("too few events: %+v", events)
	}
	if events[0].Event != "response.created" {
		t.Errorf("first event %q, want response.created", events[0].Event)
	}
	last := events[len(events)-1]
	if last.Event != "response.completed" {
		t.Fatalf("last event %q, want response.completed", last.Event)
	}
	resp, _ := last.Data["response"].(map[string]any)
	if id, _ := resp["id"].(string); id == "" {
		t.Errorf("response.completed has no response id: %v", last.Data)
	}
	usage, _ := resp["usage"].(map[string]any)
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		if _, ok := usage[k]; !ok {
			t.Errorf("usage lacks %s: %v", k, usage)
		}
	}
	checkEventTypes(t, events)
	var item map[string]any
	n := 0
	for _, e := range events {
		if e.Event == "response.output_item.done" {
			item, _ = e.Data["item"].(map[string]any)
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d output_item.done events, want 1", n)
	}
	return item
}

func TestResponsesStreamText(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/responses", map[string]any{
		"model":  "gpt-5.5",
		"stream": true,
		"input": []any{
			map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "[[say not from the user]]"}}},
			map[string]any{"type": "message", "role": "user", "content": []any{
				map[string]any{"type": "input_text", "text": "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\n[[say planted]]\n</INSTRUCTIONS>"},
				map[string]any{"type": "input_text", "text": "<environment_context>...</environment_context>"},
			}},
			userMsg("[[say hello there]]"),
		},
		"tools": codexTools,
	})
	checkContentType(t, resp, "text/event-stream")
	events := readSSE(t, resp)
	item := doneItem(t, events)
	if item["type"] != "message" || item["role"] != "assistant" {
		t.Fatalf("item %v, want an assistant message", item)
	}
	content, _ := item["content"].([]any)
	part, _ := content[0].(map[string]any)
	if part["type"] != "output_text" || part["text"] != "hello there" {
		t.Errorf("content %v", content)
	}
	var delta string
	for _, e := range events {
		if e.Event == "response.output_text.delta" {
			delta += e.Data["delta"].(string)
		}
	}
	if delta != "hello there" {
		t.Errorf("deltas %q", delta)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	turn := reqs[0].Turn
	if turn.API != "responses" || len(turn.UserText) != 1 || turn.UserText[0] != "[[say hello there]]" {
		t.Errorf("turn %+v: want the user's text only", turn)
	}
	if strings.Join(turn.Tools, ",") != "exec_command,apply_patch,tool_search,web_search" {
		t.Errorf("tools %v", turn.Tools)
	}
}

func TestResponsesStreamFunctionCall(t *testing.T) {
	s := start(t)
	script := ToolStep("exec_command", map[string]any{"cmd": "touch marker"}) + "\n[[say finished]]"
	resp := post(t, s, "/v1/responses", map[string]any{
		"stream": true,
		"input":  []any{userMsg(script)},
		"tools":  codexTools,
	})
	events := readSSE(t, resp)
	item := doneItem(t, events)
	if item["type"] != "function_call" || item["name"] != "exec_command" {
		t.Fatalf("item %v, want a function_call of exec_command", item)
	}
	if item["call_id"] == "" || item["call_id"] == nil {
		t.Errorf("no call_id: %v", item)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(item["arguments"].(string)), &args); err != nil || args["cmd"] != "touch marker" {
		t.Errorf("arguments %v (%v)", item["arguments"], err)
	}
	var argDelta string
	for _, e := range events {
		if e.Event == "response.function_call_arguments.delta" {
			argDelta += e.Data["delta"].(string)
		}
	}
	if argDelta != item["arguments"] {
		t.Errorf("argument deltas %q, want %q", argDelta, item["arguments"])
	}
}

func TestResponsesCustomToolCall(t *testing.T) {
	s := start(t)
	patch := "*** Begin Patch\n*** Add File: new.txt\n+x\n*** End Patch\n"
	resp := post(t, s, "/v1/responses", map[string]any{
		"stream": true,
		"input":  []any{userMsg(ToolStep("apply_patch", map[string]any{"input": patch}))},
		"tools":  codexTools,
	})
	item := doneItem(t, readSSE(t, resp))
	if item["type"] != "custom_tool_call" || item["name"] != "apply_patch" || item["input"] != patch {
		t.Fatalf("item %v, want a custom_tool_call of apply_patch with the raw patch", item)
	}

	// The same step against a function apply_patch is a function_call with
	// the JSON arguments.
	resp = post(t, s, "/v1/responses", map[string]any{
		"stream": true,
		"input":  []any{userMsg(ToolStep("apply_patch", map[string]any{"input": patch}))},
		"tools":  []any{map[string]any{"type": "function", "name": "apply_patch"}},
	})
	item = doneItem(t, readSSE(t, resp))
	if item["type"] != "function_call" || item["name"] != "apply_patch" {
		t.Fatalf("item %v, want a function_call", item)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(item["arguments"].(string)), &args); err != nil || args["input"] != patch {
		t.Errorf("arguments %v (%v)", item["arguments"], err)
	}
}

func TestResponsesToolResultsThenText(t *testing.T) {
	s := start(t)
	script := ToolStep("exec_command", map[string]any{"cmd": "touch marker"}) + "\n" +
		ToolStep("apply_patch", map[string]any{"input": "*** Begin Patch\n*** End Patch\n"}) + "\n[[say finished]]"
	input := []any{
		userMsg(script),
		map[string]any{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": `{"cmd":"touch marker"}`},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "touch: cannot touch 'marker': Read-only file system"},
	}
	// One result: the next step is the second tool.
	resp := post(t, s, "/v1/responses", map[string]any{"stream": true, "input": input, "tools": codexTools})
	item := doneItem(t, readSSE(t, resp))
	if item["type"] != "custom_tool_call" || item["name"] != "apply_patch" {
		t.Fatalf("item %v, want the second step", item)
	}
	// Two results (the second as a list of content parts): the final text.
	input = append(input,
		map[string]any{"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "..."},
		map[string]any{"type": "custom_tool_call_output", "call_id": "c2", "output": []any{map[string]any{"type": "input_text", "text": "patch rejected by user"}}},
	)
	resp = post(t, s, "/v1/responses", map[string]any{"stream": true, "input": input, "tools": codexTools})
	item = doneItem(t, readSSE(t, resp))
	content, _ := item["content"].([]any)
	if item["type"] != "message" || len(content) != 1 {
		t.Fatalf("item %v, want the final message", item)
	}
	text := content[0].(map[string]any)["text"].(string)
	for _, want := range []string{"finished", "[result 1] touch: cannot touch 'marker': Read-only file system", "[result 2] patch rejected by user"} {
		if !strings.Contains(text, want) {
			t.Errorf("final text %q lacks %q", text, want)
		}
	}
	reqs := s.Requests()
	if got := reqs[len(reqs)-1].Turn.ToolResults; len(got) != 2 {
		t.Errorf("tool results %q", got)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/responses", map[string]any{
		"input": []any{userMsg(ToolStep("exec_command", map[string]any{"cmd": "ls"}))},
		"tools": codexTools,
	})
	var out struct {
		ID     string           `json:"id"`
		Status string           `json:"status"`
		Output []map[string]any `json:"output"`
		Usage  map[string]any   `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.ID == "" || out.Status != "completed" || len(out.Output) != 1 || out.Usage == nil {
		t.Fatalf("response %+v", out)
	}
	if out.Output[0]["type"] != "function_call" || out.Output[0]["arguments"] != `{"cmd":"ls"}` {
		t.Errorf("output %v", out.Output[0])
	}

	// A string input, no tools: plain text.
	resp = post(t, s, "/v1/responses", map[string]any{"input": "[[tool exec_command {}]] [[say hi]]"})
	out.Output = nil
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Output) != 1 || out.Output[0]["type"] != "message" {
		t.Fatalf("output %v, want a message", out.Output)
	}
}

func TestResponsesBadRequest(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/responses", "{not json", anyStatus)
	if resp.StatusCode != http.StatusBadRequest || len(s.Errors()) != 1 {
		t.Errorf("bad request: status %d, errors %v", resp.StatusCode, s.Errors())
	}
}

func TestResponsesReviewerAllows(t *testing.T) {
	s := start(t)
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"outcome": map[string]any{"type": "string", "enum": []any{"allow", "deny"}},
	}}
	resp := post(t, s, "/v1/responses", map[string]any{
		"model":  "codex-auto-review",
		"stream": true,
		"input":  []any{userMsg(">>> TRANSCRIPT START\n[1] user: " + ToolStep("exec_command", map[string]any{"cmd": "touch marker"}))},
		"tools":  codexTools,
		"text":   map[string]any{"format": map[string]any{"type": "json_schema", "name": "codex_output_schema", "schema": schema}},
	})
	item := doneItem(t, readSSE(t, resp))
	if item["type"] != "message" {
		t.Fatalf("item %v, want the verdict message", item)
	}
	var verdict map[string]string
	text := item["content"].([]any)[0].(map[string]any)["text"].(string)
	if err := json.Unmarshal([]byte(text), &verdict); err != nil || verdict["outcome"] != "allow" {
		t.Errorf("verdict %q (%v)", text, err)
	}
}
