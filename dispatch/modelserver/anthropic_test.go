package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// anthropicHeaders are the headers Claude Code sends besides Content-Type.
var anthropicHeaders = withHeaders("anthropic-version", "2023-06-01", "x-api-key", "scripted")

func anthropicEventNames(evs []sseEvent) string {
	var names []string
	for _, e := range evs {
		names = append(names, e.Event)
	}
	return strings.Join(names, " ")
}

// The offered tools, as Claude Code sends them (a server tool has a type).
var anthropicTools = []map[string]any{
	{"name": "Read", "description": "read a file", "input_schema": map[string]any{"type": "object"}},
	{"name": "Write", "description": "write a file", "input_schema": map[string]any{"type": "object"}},
	{"type": "web_search_20250305", "name": "web_search"},
}

const anthropicScript = `[[tool Write {"file_path": "/tmp/x", "content": "hi"}]] [[say all written]]`

// The first user message as Claude Code sends it: text blocks, with its
// system reminders.
var anthropicFirstUser = map[string]any{
	"role": "user",
	"content": []any{
		map[string]any{"type": "text", "text": "<system-reminder>\nbe careful\n</system-reminder>"},
		map[string]any{"type": "text", "text": anthropicScript, "cache_control": map[string]any{"type": "ephemeral"}},
	},
}

func TestAnthropicStreamedText(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/messages?beta=true", map[string]any{
		"model":      "claude-sonnet-4-6",
		"max_tokens": 512,
		"stream":     true,
		"system":     []any{map[string]any{"type": "text", "text": "Generate a title"}},
		"messages":   []any{map[string]any{"role": "user", "content": "[[say hello there]]"}},
	}, anthropicHeaders)
	checkContentType(t, resp, "text/event-stream")
	evs := readSSE(t, resp)
	checkEventTypes(t, evs)
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := anthropicEventNames(evs); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if cb := evs[1].Data["content_block"].(map[string]any); cb["type"] != "text" {
		t.Errorf("content block %v", cb)
	}
	if d := evs[2].Data["delta"].(map[string]any); d["type"] != "text_delta" || d["text"] != "hello there" {
		t.Errorf("delta %v", d)
	}
	if d := evs[4].Data["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Errorf("message_delta %v", d)
	}
	if m := evs[0].Data["message"].(map[string]any); m["model"] != "claude-sonnet-4-6" || m["role"] != "assistant" {
		t.Errorf("message_start %v", m)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || len(reqs[0].Turn.Tools) != 0 || reqs[0].Turn.API != "anthropic" || reqs[0].Turn.Path != "/v1/messages" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestAnthropicStreamedToolCall(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/messages?beta=true", map[string]any{
		"model":    "claude-sonnet-4-6",
		"stream":   true,
		"tools":    anthropicTools,
		"messages": []any{anthropicFirstUser},
	}, anthropicHeaders)
	evs := readSSE(t, resp)
	checkEventTypes(t, evs)
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := anthropicEventNames(evs); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	cb := evs[1].Data["content_block"].(map[string]any)
	if cb["type"] != "tool_use" || cb["name"] != "Write" || !strings.HasPrefix(cb["id"].(string), "toolu_") {
		t.Errorf("content block %v", cb)
	}
	d := evs[2].Data["delta"].(map[string]any)
	if d["type"] != "input_json_delta" {
		t.Fatalf("delta %v", d)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(d["partial_json"].(string)), &args); err != nil || args["file_path"] != "/tmp/x" || args["content"] != "hi" {
		t.Errorf("arguments %v (%v)", d["partial_json"], err)
	}
	if d := evs[4].Data["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Errorf("message_delta %v", d)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	turn := reqs[0].Turn
	if strings.Join(turn.Tools, ",") != "Read,Write,web_search" {
		t.Errorf("tools %v", turn.Tools)
	}
	if len(turn.UserText) != 2 || !strings.Contains(turn.UserText[0], "system-reminder") {
		t.Errorf("user text %q", turn.UserText)
	}
}

// The tool's result comes back as a tool_result block whose content is a
// list of text blocks (or a string): the reply is the final text, quoting
// it.
func TestAnthropicToolResultThenText(t *testing.T) {
	for name, content := range map[string]any{
		"blocks": []any{map[string]any{"type": "text", "text": "File created successfully"}},
		"string": "File created successfully",
	} {
		t.Run(name, func(t *testing.T) {
			s := start(t)
			resp := post(t, s, "/v1/messages?beta=true", map[string]any{
				"model":  "claude-sonnet-4-6",
				"stream": true,
				"tools":  anthropicTools,
				"messages": []any{
					anthropicFirstUser,
					map[string]any{"role": "assistant", "content": []any{
						map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Write", "input": map[string]any{"file_path": "/tmp/x"}},
					}},
					map[string]any{"role": "user", "content": []any{
						map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": content},
						map[string]any{"type": "text", "text": "<system-reminder>later</system-reminder>"},
					}},
				},
			}, anthropicHeaders)
			evs := readSSE(t, resp)
			checkEventTypes(t, evs)
			if len(evs) != 6 {
				t.Fatalf("events %q", anthropicEventNames(evs))
			}
			d := evs[2].Data["delta"].(map[string]any)
			if d["type"] != "text_delta" || d["text"] != "all written\n[result 1] File created successfully" {
				t.Errorf("delta %v", d)
			}
			if d := evs[4].Data["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
				t.Errorf("message_delta %v", d)
			}
			turn := s.Requests()[0].Turn
			if len(turn.ToolResults) != 1 || turn.ToolResults[0] != "File created successfully" || len(turn.UserText) != 3 {
				t.Errorf("turn %+v", turn)
			}
		})
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	s := start(t)
	var msg struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Role       string `json:"role"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage map[string]int `json:"usage"`
	}
	// A tool call.
	resp := post(t, s, "/v1/messages", map[string]any{
		"model": "claude-haiku-4-5", "tools": anthropicTools, "messages": []any{anthropicFirstUser},
	}, anthropicHeaders)
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.StopReason != "tool_use" || len(msg.Content) != 1 ||
		msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "Write" || !strings.Contains(string(msg.Content[0].Input), `"/tmp/x"`) {
		t.Errorf("tool call %+v", msg)
	}
	if _, ok := msg.Usage["input_tokens"]; !ok {
		t.Errorf("usage %v", msg.Usage)
	}
	// No tools offered (a title or a check): text, even though the script
	// has a tool step.
	resp = post(t, s, "/v1/messages", map[string]any{
		"model": "claude-haiku-4-5", "messages": []any{anthropicFirstUser},
	}, anthropicHeaders)
	msg.Content = nil
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "all written" {
		t.Errorf("text %+v", msg)
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/messages/count_tokens?beta=true", map[string]any{
		"model": "claude-sonnet-4-6", "tools": anthropicTools, "messages": []any{map[string]any{"role": "user", "content": "count"}},
	}, anthropicHeaders)
	var n struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || n.InputTokens <= 0 {
		t.Errorf("count %+v (%v)", n, err)
	}
	if len(s.Requests()) != 0 {
		t.Errorf("token counting was recorded as a turn")
	}
}

func TestAnthropicBadRequest(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/messages", `{"messages": [{"role": "user", "content": 7}]}`, anyStatus)
	if resp.StatusCode != http.StatusBadRequest || len(s.Errors()) != 1 {
		t.Errorf("status %s, errors %q", resp.Status, s.Errors())
	}
}
