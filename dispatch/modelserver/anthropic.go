package modelserver

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// The Anthropic Messages API, as Claude Code (bundled by claude-agent-acp)
// speaks it: POST /v1/messages (streamed as server-sent events when the
// request says "stream": true, else one JSON message) and
// POST /v1/messages/count_tokens. Claude Code adds "?beta=true" to both
// paths; the query is not part of the pattern.

func init() {
	registrars = append(registrars, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/messages", s.anthropicMessages)
		mux.HandleFunc("POST /v1/messages/count_tokens", s.anthropicCountTokens)
	})
}

// anthropicRequest is the part of a Messages request that the scripted
// model reads.
type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

// anthropicBlock is one content block of a message. A tool_result's
// content is, like a message's, a string or a list of blocks.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// anthropicContent reads a content field: a string is one text block.
func anthropicContent(raw json.RawMessage) ([]anthropicBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	return blocks, nil
}

// anthropicText joins the text blocks of a tool result's content.
func anthropicText(raw json.RawMessage) (string, error) {
	blocks, err := anthropicContent(raw)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// anthropicTurn reads the API-neutral turn out of a request: the user's
// text blocks (Claude Code's <system-reminder> blocks included), the
// offered tools and the tool results, in conversation order.
func anthropicTurn(path string, req *anthropicRequest) (Turn, error) {
	t := Turn{API: "anthropic", Path: path}
	for _, tool := range req.Tools {
		if tool.Name != "" {
			t.Tools = append(t.Tools, tool.Name)
		}
	}
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		blocks, err := anthropicContent(m.Content)
		if err != nil {
			return t, err
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				t.UserText = append(t.UserText, b.Text)
			case "tool_result":
				text, err := anthropicText(b.Content)
				if err != nil {
					return t, err
				}
				t.ToolResults = append(t.ToolResults, text)
			}
		}
	}
	return t, nil
}

// anthropicID is a fresh id with the given prefix ("msg_", "toolu_").
// Tool-use ids are unique across sessions, as the real API's are: the
// adapter keeps its tool calls by id.
func anthropicID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// anthropicUsage is the usage of every reply: small, and with the cache
// fields that Claude Code adds up.
func anthropicUsage(input, output int) map[string]any {
	return map[string]any{
		"input_tokens":                input,
		"output_tokens":               output,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     0,
	}
}

// approxTokens is a rough token count of a request body (4 bytes a
// token), enough for Claude Code's context accounting.
func approxTokens(body []byte) int {
	return len(body)/4 + 1
}

// anthropicMessages answers POST /v1/messages: the scripted reply to the
// request's turn, as one JSON message, or as server-sent events when the
// request says "stream": true.
func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, req, ok := s.anthropicRead(w, r)
	if !ok {
		return
	}
	t, err := anthropicTurn(r.URL.Path, req)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "modelserver: unreadable message content: %v", err)
		return
	}
	m := newAnthropicReply(s.answer(t), req.Model, approxTokens(body))
	if !req.Stream {
		m.writeJSON(w)
		return
	}
	m.writeStream(w)
}

// anthropicReply is a reply in the Messages API's terms: the message's id
// and model, its one content block, its stop reason and its token counts.
type anthropicReply struct {
	reply  Reply
	id     string
	model  string
	block  map[string]any  // the reply's one content block
	args   json.RawMessage // a tool call's arguments ("{}" when it has none)
	stop   string
	input  int
	output int
}

// newAnthropicReply renders reply as a message from model
// ("claude-scripted" when the request names none) to a request of input
// tokens: a tool_use block that stops for the tool, or a text block that
// ends the turn.
func newAnthropicReply(reply Reply, model string, input int) *anthropicReply {
	if model == "" {
		model = "claude-scripted"
	}
	m := &anthropicReply{reply: reply, id: anthropicID("msg_"), model: model, stop: "end_turn", input: input}
	if reply.Call != nil {
		m.args = reply.Call.Args
		if len(m.args) == 0 {
			m.args = json.RawMessage("{}")
		}
		m.block = map[string]any{"type": "tool_use", "id": anthropicID("toolu_"), "name": reply.Call.Name, "input": m.args}
		m.stop = "tool_use"
	} else {
		m.block = map[string]any{"type": "text", "text": reply.Text}
	}
	m.output = 1 + len(reply.Text)/4 + len(m.args)/4
	return m
}

// writeJSON answers with the whole message as one JSON body.
func (m *anthropicReply) writeJSON(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":            m.id,
		"type":          "message",
		"role":          "assistant",
		"model":         m.model,
		"content":       []any{m.block},
		"stop_reason":   m.stop,
		"stop_sequence": nil,
		"usage":         anthropicUsage(m.input, m.output),
	})
}

// writeStream answers with the message as server-sent events: the
// message's start, its content block's events, and the message's delta
// (stop reason, usage) and stop.
func (m *anthropicReply) writeStream(w http.ResponseWriter) {
	startSSE(w)
	sse(w, "message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id":            m.id,
			"type":          "message",
			"role":          "assistant",
			"model":         m.model,
			"content":       []any{},
			"stop_reason":   nil,
			"stop_sequence": nil,
			"usage":         anthropicUsage(m.input, 1),
		},
	})
	m.streamBlock(w)
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": m.stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.output},
	})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// streamBlock writes the content block's start, empty, and its one delta:
// a tool call's arguments as partial JSON, or the whole text.
func (m *anthropicReply) streamBlock(w http.ResponseWriter) {
	if m.reply.Call != nil {
		sse(w, "content_block_start", map[string]any{
			"type":  "content_block_start",
			"index": 0,
			"content_block": map[string]any{
				"type": "tool_use", "id": m.block["id"], "name": m.reply.Call.Name, "input": map[string]any{},
			},
		})
		sse(w, "content_block_delta", map[string]any{
			"type":  "content_block_delta",
			"index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(m.args)},
		})
		return
	}
	sse(w, "content_block_start", map[string]any{
		"type":          "content_block_start",
		"index":         0,
		"content_block": map[string]any{"type": "text", "text": ""},
	})
	sse(w, "content_block_delta", map[string]any{
		"type":  "content_block_delta",
		"index": 0,
		"delta": map[string]any{"type": "text_delta", "text": m.reply.Text},
	})
}

// anthropicCountTokens answers Claude Code's token counting.
func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	body, _, ok := s.anthropicRead(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"input_tokens": approxTokens(body)})
}

// maxAnthropicBody bounds a request body (Claude Code's system prompt and
// tool list alone are some 100 KB).
const maxAnthropicBody = 32 << 20

// anthropicRead reads and decodes a request body, answering the request
// with an error when it cannot.
func (s *Server) anthropicRead(w http.ResponseWriter, r *http.Request) ([]byte, *anthropicRequest, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAnthropicBody))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "modelserver: reading the request: %v", err)
		return nil, nil, false
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.fail(w, r, http.StatusBadRequest, "modelserver: the request is not a Messages request: %v", err)
		return nil, nil, false
	}
	return body, &req, true
}
