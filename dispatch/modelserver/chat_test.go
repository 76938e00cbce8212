package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// chatChunks reads a stream's chunks, and whether it ended with [DONE]:
// its events have no names, and no chunk follows [DONE].
func chatChunks(t *testing.T, resp *http.Response) (chunks []map[string]any, done bool) {
	t.Helper()
	checkContentType(t, resp, "text/event-stream")
	for _, e := range readSSE(t, resp) {
		if e.Event != "" {
			t.Fatalf("an event named %q", e.Event)
		}
		if e.Raw == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("a chunk after [DONE]: %s", e.Raw)
		}
		chunks = append(chunks, e.Data)
	}
	return chunks, done
}

const chatTools = `"tools":[{"type":"function","function":{"name":"bash","description":"run","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}},{"type":"function","function":{"name":"write","parameters":{"type":"object"}}}]`

func TestChatStreamText(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},`+chatTools+`,
		"messages":[{"role":"system","content":"you are [[say not this]]"},{"role":"user","content":[{"type":"text","text":"[[say hello there]]"}]}]}`)
	chunks, done := chatChunks(t, resp)
	if !done {
		t.Fatal("no [DONE]")
	}
	var text strings.Builder
	var finish string
	var usage bool
	for _, c := range chunks {
		if c["object"] != "chat.completion.chunk" {
			t.Fatalf("object %v", c["object"])
		}
		if c["usage"] != nil {
			usage = true
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if d, ok := ch["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					text.WriteString(s)
				}
				if d["tool_calls"] != nil {
					t.Fatalf("a tool call in a text reply: %v", d)
				}
			}
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
		}
	}
	if text.String() != "hello there" || finish != "stop" || !usage {
		t.Fatalf("text %q finish %q usage %v", text.String(), finish, usage)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Turn.API != "chat" || strings.Join(reqs[0].Turn.Tools, ",") != "bash,write" ||
		len(reqs[0].Turn.UserText) != 1 {
		t.Fatalf("turn %+v", reqs)
	}
}

func TestChatStreamToolCall(t *testing.T) {
	s := start(t)
	resp := post(t, s, "/v1/chat/completions", `{"model":"m","stream":true,`+chatTools+`,
		"messages":[{"role":"user","content":"[[tool bash {\"command\":\"touch x\"}]]"}]}`)
	chunks, done := chatChunks(t, resp)
	if !done {
		t.Fatal("no [DONE]")
	}
	var calls []map[string]any
	var finish string
	for _, c := range chunks {
		if c["usage"] != nil {
			t.Fatal("usage without stream_options.include_usage")
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if d, ok := ch["delta"].(map[string]any); ok {
				if tc, ok := d["tool_calls"].([]any); ok {
					for _, x := range tc {
						calls = append(calls, x.(map[string]any))
					}
				}
			}
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
		}
	}
	if len(calls) != 1 || finish != "tool_calls" {
		t.Fatalf("calls %v finish %q", calls, finish)
	}
	c := calls[0]
	fn := c["function"].(map[string]any)
	if c["index"] != float64(0) || c["id"] != "call_1" || c["type"] != "function" || fn["name"] != "bash" {
		t.Fatalf("call %v", c)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil || args["command"] != "touch x" {
		t.Fatalf("arguments %v: %v", fn["arguments"], err)
	}
}

func TestChatToolResultThenText(t *testing.T) {
	s := start(t)
	// The result arrives as a role "tool" message; in parts form here,
	// as a string in the next test.
	resp := post(t, s, "/v1/chat/completions", `{"model":"m","stream":true,`+chatTools+`,"messages":[
		{"role":"user","content":[{"type":"text","text":"[[tool bash {\"command\":\"touch x\"}]]\n[[say finished]]"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"touch x\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"permission denied"}]}]}`)
	chunks, _ := chatChunks(t, resp)
	var text strings.Builder
	for _, c := range chunks {
		for _, ch := range c["choices"].([]any) {
			if d, ok := ch.(map[string]any)["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					text.WriteString(s)
				}
			}
		}
	}
	if text.String() != "finished\n[result 1] permission denied" {
		t.Fatalf("text %q", text.String())
	}
}

func TestChatNonStreaming(t *testing.T) {
	s := start(t)
	decode := func(resp *http.Response) map[string]any {
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// A call.
	out := decode(post(t, s, "/v1/chat/completions", `{"model":"m",`+chatTools+`,"messages":[
		{"role":"user","content":"[[tool write {\"filePath\":\"/x\"}]] [[tool bash {}]]"},
		{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"write","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"no"}]}`))
	ch := out["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	tc := msg["tool_calls"].([]any)[0].(map[string]any)
	if out["object"] != "chat.completion" || ch["finish_reason"] != "tool_calls" || tc["id"] != "call_2" ||
		tc["function"].(map[string]any)["name"] != "bash" || tc["function"].(map[string]any)["arguments"] != "{}" {
		t.Fatalf("response %v", out)
	}
	// No tools offered (a title request): text, never a call.
	out = decode(post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"title"},
		{"role":"user","content":"[[tool bash {}]] [[say a title]]"}]}`))
	ch = out["choices"].([]any)[0].(map[string]any)
	msg = ch["message"].(map[string]any)
	if ch["finish_reason"] != "stop" || msg["content"] != "a title" || msg["tool_calls"] != nil {
		t.Fatalf("response %v", out)
	}
}

func TestChatBadRequest(t *testing.T) {
	s := start(t)
	for _, body := range []string{`{`, `{"messages":[{"role":"user","content":42}]}`} {
		resp := post(t, s, "/v1/chat/completions", body, anyStatus)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: status %d", body, resp.StatusCode)
		}
	}
	if len(s.Errors()) != 2 {
		t.Fatalf("errors %v", s.Errors())
	}
}
