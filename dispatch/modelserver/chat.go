package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The OpenAI chat-completions API, as the AI SDK's openai-compatible
// provider speaks it (opencode's custom providers): POST
// /v1/chat/completions, streaming (server-sent chunks ending in
// "data: [DONE]") or not. opencode asks for nothing else: its model list
// comes from its config, not from GET /v1/models.

func init() {
	registrars = append(registrars, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
		mux.HandleFunc("POST /chat/completions", s.chatCompletions)
	})
}

// chatRequest is the part of a chat-completions request the server reads.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Tools         []chatTool    `json:"tools"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"` // a string, null, or an array of parts
	ToolCallID string          `json:"tool_call_id"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// chatText is the text of a message's content: a string, or the text
// parts of an array of parts, joined by newlines.
func chatText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("the content is neither a string nor an array of parts: %v", err)
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" || (p.Type == "" && p.Text != "") {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// chatTurn reads a request into a Turn.
func chatTurn(path string, req *chatRequest) (Turn, error) {
	t := Turn{API: "chat", Path: path}
	for _, tl := range req.Tools {
		if tl.Function.Name != "" {
			t.Tools = append(t.Tools, tl.Function.Name)
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "user", "tool":
			text, err := chatText(m.Content)
			if err != nil {
				return t, fmt.Errorf("message %d (%s): %v", i, m.Role, err)
			}
			if m.Role == "user" {
				t.UserText = append(t.UserText, text)
			} else {
				t.ToolResults = append(t.ToolResults, text)
			}
		}
	}
	return t, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the body is not a chat-completions request: %v", err)
		return
	}
	t, err := chatTurn(r.URL.Path, &req)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	reply := s.answer(t)
	model := req.Model
	if model == "" {
		model = "scripted"
	}
	id := fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano())
	created := time.Now().Unix()
	usage := map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}

	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Text}
		finish := "stop"
		if reply.Call != nil {
			msg["content"] = nil
			msg["tool_calls"] = []any{chatToolCall(reply.Call, nil)}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}

	startSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	finish := "stop"
	if reply.Call != nil {
		idx := 0
		sse(w, "", chunk(map[string]any{"role": "assistant", "content": nil,
			"tool_calls": []any{chatToolCall(reply.Call, &idx)}}, nil))
		finish = "tool_calls"
	} else {
		sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		sse(w, "", chunk(map[string]any{"content": reply.Text}, nil))
	}
	sse(w, "", chunk(map[string]any{}, finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		sse(w, "", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usage,
		})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// chatToolCall renders a call; a streamed call carries its index.
func chatToolCall(c *Call, index *int) map[string]any {
	args := string(c.Args)
	if args == "" {
		args = "{}"
	}
	tc := map[string]any{
		"id":       c.ID,
		"type":     "function",
		"function": map[string]any{"name": c.Name, "arguments": args},
	}
	if index != nil {
		tc["index"] = *index
	}
	return tc
}
