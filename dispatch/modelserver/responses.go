package modelserver

// The OpenAI Responses API, as Codex (embedded in codex-acp) speaks it:
// POST /v1/responses with "stream": true, answered with the server-sent
// events Codex's parser reads (codex-rs/codex-api/src/sse/responses.rs):
//
//	response.created             {"response": {...}}
//	response.output_item.added   {"item": ResponseItem}
//	response.output_text.delta   {"delta": "..."}            (text only)
//	response.output_item.done    {"item": ResponseItem}      (what Codex acts on)
//	response.completed           {"response": {"id", "usage", "output"}}
//
// Codex needs response.completed (with "id") before the stream ends, or it
// treats the turn as broken and retries. A request with "stream" false or
// absent is answered with the Response object as one JSON body.
//
// The request read into a Turn:
//   - UserText: the input_text (or text) parts of every input message whose
//     role is "user", less the context Codex itself puts in user messages
//     (parts beginning "<environment_context>", "<user_instructions>",
//     "<turn_aborted>" or "# AGENTS.md instructions for"): an AGENTS.md
//     planted in the cwd is not user-authored and must not add script steps.
//   - Tools: the "name" of every entry of "tools"; an entry without a name
//     (local_shell, web_search) is listed by its "type".
//   - UserText also: the text of every agent_message item (Codex's
//     sub-agents get their task so).
//   - ToolResults: the output of every function_call_output,
//     custom_tool_call_output and local_shell_call_output item, in order; an
//     output that is a list of content parts is read as the join of their
//     texts.
//
// The rule for freeform tools: when the tool a script step calls is offered
// as {"type": "custom"} (Codex offers apply_patch so with some models), the
// call is rendered as a custom_tool_call whose "input" is the step's "input"
// argument when that is a string, else the step's whole JSON arguments. So
// [[tool apply_patch {"input": "*** Begin Patch\n..."}]] works whether
// apply_patch is a custom tool (input is the raw patch) or a function tool
// (arguments {"input": "..."}, as Codex's JSON apply_patch takes them). Every
// other tool is rendered as a function_call whose "arguments" is the step's
// JSON arguments as a string.
//
// The approval reviewer: a user config with approvals_reviewer =
// "auto_review" makes Codex send each approval request (escalated command,
// apply_patch) not to the ACP client but to a reviewer model: a request for
// model "codex-auto-review" whose text.format is a JSON schema with an
// "outcome" of "allow" or "deny". Its input quotes the whole transcript, and
// so the script, which must not be replayed there. Such a request is
// answered as a compliant reviewer would: outcome "allow" (recorded as a say
// step), the worst case, so that a test shows what the hostile setting does
// when the relay does not override it.
//
// Side requests: none. With a custom model provider (model_provider = "NAME",
// wire_api = "responses") codex-acp 0.16.0 sends nothing but POST
// /v1/responses (verified: no model list, no title or compaction request in
// a turn). POST /responses serves a base_url given without /v1.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
)

func init() {
	registrars = append(registrars, func(s *Server, mux *http.ServeMux) {
		mux.HandleFunc("POST /v1/responses", s.responses)
		mux.HandleFunc("POST /responses", s.responses)
	})
}

// responsesRequest is the part of a Responses API request the server reads.
type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  json.RawMessage   `json:"input"`
	Tools  []json.RawMessage `json:"tools"`
	Text   struct {
		Format struct {
			Type   string `json:"type"`
			Schema struct {
				Properties struct {
					Outcome struct {
						Enum []string `json:"enum"`
					} `json:"outcome"`
				} `json:"properties"`
			} `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// responsesReviewerVerdict is the reviewer's answer: allow.
const responsesReviewerVerdict = `{"outcome":"allow","risk_level":"low","user_authorization":"high","rationale":"scripted reviewer: the user asked for it"}`

// isReviewer tells an approval reviewer's request.
func (r *responsesRequest) isReviewer() bool {
	if r.Text.Format.Type != "json_schema" {
		return false
	}
	for _, v := range r.Text.Format.Schema.Properties.Outcome.Enum {
		if v == "allow" {
			return true
		}
	}
	return false
}

// responsesItem is one input item, of any type.
type responsesItem struct {
	Type    string            `json:"type"`
	Role    string            `json:"role"`
	Content json.RawMessage   `json:"content"`
	Output  json.RawMessage   `json:"output"`
	Tools   []json.RawMessage `json:"tools"` // additional_tools
}

type responsesTool struct {
	Type  string            `json:"type"`
	Name  string            `json:"name"`
	Tools []json.RawMessage `json:"tools"` // a namespace's tools
}

// offered is how a request offers one tool: freeform (custom) or not, and
// the namespace it is in ("" at the top level).
type offered struct {
	custom    bool
	namespace string
}

var responsesSeq atomic.Int64

// responses answers POST /v1/responses (and /responses): the scripted
// reply to the request's turn (an approval reviewer's request is answered
// "allow"), as one Response object or, when the request says "stream":
// true, as the server-sent events Codex reads.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, req, ok := s.responsesRead(w, r)
	if !ok {
		return
	}
	turn, custom, err := responsesTurn(r.URL.Path, req)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	if req.isReviewer() {
		turn = Turn{API: turn.API, Path: turn.Path, UserText: []string{"[[say " + responsesReviewerVerdict + "]]"}}
	}
	out := newResponsesReply(s.answer(turn), custom, req.Model, len(body))
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out.response("completed", []any{out.item}, true))
		return
	}
	out.writeStream(w)
}

// responsesRead reads and decodes a request body, answering the request
// with an error when it cannot.
func (s *Server) responsesRead(w http.ResponseWriter, r *http.Request) ([]byte, responsesRequest, bool) {
	var req responsesRequest
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "reading the request: %v", err)
		return nil, req, false
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the request is not a Responses API request: %v", err)
		return nil, req, false
	}
	return body, req, true
}

// responsesReply is a reply in the Responses API's terms: the response's
// id and model, its one output item and its usage.
type responsesReply struct {
	reply Reply
	id    string
	model string
	item  map[string]any // the one output item (responsesOutputItem)
	usage map[string]any
}

// newResponsesReply renders reply, the server's next response, as a
// response from model ("scripted" when the request names none) to a
// request body of bodyLen bytes; custom is how the request offers each
// tool.
func newResponsesReply(reply Reply, custom map[string]offered, model string, bodyLen int) *responsesReply {
	n := responsesSeq.Add(1)
	if model == "" {
		model = "scripted"
	}
	return &responsesReply{
		reply: reply,
		id:    fmt.Sprintf("resp_scripted_%d", n),
		model: model,
		item:  responsesOutputItem(reply, custom, n),
		usage: map[string]any{
			"input_tokens":          bodyLen / 4,
			"input_tokens_details":  map[string]any{"cached_tokens": 0},
			"output_tokens":         len(reply.Text)/4 + 1,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          bodyLen/4 + len(reply.Text)/4 + 1,
		},
	}
}

// response is the Response object in the given status with the given
// output, with the usage or without.
func (o *responsesReply) response(status string, output []any, withUsage bool) map[string]any {
	m := map[string]any{
		"id":         o.id,
		"object":     "response",
		"created_at": 0,
		"status":     status,
		"model":      o.model,
		"output":     output,
	}
	if withUsage {
		m["usage"] = o.usage
	}
	return m
}

// responsesEvents writes the server-sent events of one stream, numbering
// them in order.
type responsesEvents struct {
	w   http.ResponseWriter
	seq int
}

// ev writes one event of the given kind, its "type" and "sequence_number"
// added to fields.
func (e *responsesEvents) ev(kind string, fields map[string]any) {
	fields["type"] = kind
	fields["sequence_number"] = e.seq
	e.seq++
	sse(e.w, kind, fields)
}

// writeStream answers with the response as server-sent events: created and
// in progress, the output item's events, the item done and the response
// completed.
func (o *responsesReply) writeStream(w http.ResponseWriter) {
	startSSE(w)
	e := &responsesEvents{w: w}
	e.ev("response.created", map[string]any{"response": o.response("in_progress", []any{}, false)})
	e.ev("response.in_progress", map[string]any{"response": o.response("in_progress", []any{}, false)})
	switch o.item["type"] {
	case "message":
		o.streamMessage(e)
	case "function_call", "custom_tool_call":
		o.streamCall(e)
	}
	e.ev("response.output_item.done", map[string]any{"output_index": 0, "item": o.item})
	e.ev("response.completed", map[string]any{"response": o.response("completed", []any{o.item}, true)})
}

// streamMessage writes a message item's events: the item and its one
// output_text part added, the text as one delta, the text and the part
// done.
func (o *responsesReply) streamMessage(e *responsesEvents) {
	itemID, _ := o.item["id"].(string)
	text := o.reply.Text
	added := map[string]any{"id": itemID, "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}
	e.ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
	part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
	e.ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
	e.ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": text})
	e.ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": text})
	part = map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	e.ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
}

// streamCall writes a function_call or custom_tool_call item's events: the
// item added with its payload (the arguments or the freeform input) empty,
// then the payload as one delta, and done.
func (o *responsesReply) streamCall(e *responsesEvents) {
	itemID, _ := o.item["id"].(string)
	field, delta, done := "arguments", "response.function_call_arguments.delta", "response.function_call_arguments.done"
	if o.item["type"] == "custom_tool_call" {
		field, delta, done = "input", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"
	}
	added := maps.Clone(o.item)
	added[field] = ""
	added["status"] = "in_progress"
	e.ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
	e.ev(delta, map[string]any{"item_id": itemID, "output_index": 0, "delta": o.item[field]})
	e.ev(done, map[string]any{"item_id": itemID, "output_index": 0, field: o.item[field]})
}

// readTools adds the offered tools of list (a request's "tools", or an
// additional_tools item's) to t and custom, a namespace's own tools each
// under their name.
func readTools(t *Turn, custom map[string]offered, list []json.RawMessage, namespace string) error {
	for _, raw := range list {
		var tool responsesTool
		if err := json.Unmarshal(raw, &tool); err != nil {
			return fmt.Errorf("a tool is not an object: %v", err)
		}
		if tool.Type == "namespace" {
			if err := readTools(t, custom, tool.Tools, tool.Name); err != nil {
				return err
			}
			continue
		}
		name := tool.Name
		if name == "" {
			name = tool.Type
		}
		if name == "" {
			continue
		}
		t.Tools = append(t.Tools, name)
		custom[name] = offered{custom: tool.Type == "custom", namespace: namespace}
	}
	return nil
}

// responsesTurn reads a request into a Turn. custom holds how each tool is
// offered: freeform (type "custom") or not, and in which namespace. Codex
// offers tools in the request's "tools" and, in code mode, in an input
// item of type additional_tools; a namespace's tools are listed by their
// own names.
func responsesTurn(path string, req responsesRequest) (Turn, map[string]offered, error) {
	t := Turn{API: "responses", Path: path}
	custom := map[string]offered{}
	if err := readTools(&t, custom, req.Tools, ""); err != nil {
		return t, nil, err
	}

	if len(req.Input) == 0 {
		return t, custom, nil
	}
	// The input is a string (one user message) or a list of items.
	var text string
	if err := json.Unmarshal(req.Input, &text); err == nil {
		t.UserText = append(t.UserText, text)
		return t, custom, nil
	}
	var items []responsesItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return t, nil, fmt.Errorf("the input is neither a string nor a list of items: %v", err)
	}
	for _, it := range items {
		switch it.Type {
		case "message", "":
			if it.Role == "user" {
				if s := responsesUserText(it.Content); s != "" {
					t.UserText = append(t.UserText, s)
				}
			}
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output":
			t.ToolResults = append(t.ToolResults, responsesText(it.Output))
		case "agent_message":
			// Codex's multi-agent mailbox: a sub-agent's task arrives so,
			// its text in an "encrypted_content" part (plain text with a
			// custom provider). Read as user text, so that a script can
			// give a sub-agent a script of its own.
			if s := agentMessageText(it.Content); s != "" {
				t.UserText = append(t.UserText, s)
			}
		case "additional_tools":
			if err := readTools(&t, custom, it.Tools, ""); err != nil {
				return t, nil, err
			}
		}
	}
	return t, custom, nil
}

// agentMessageText reads an agent_message's text and encrypted_content
// parts as one string.
func agentMessageText(raw json.RawMessage) string {
	var parts []struct {
		Text      string `json:"text"`
		Encrypted string `json:"encrypted_content"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		for _, t := range []string{p.Text, p.Encrypted} {
			if t != "" {
				texts = append(texts, t)
			}
		}
	}
	return strings.Join(texts, "\n")
}

// responsesContextPrefixes begin the parts of user messages that Codex
// writes itself.
var responsesContextPrefixes = []string{"<environment_context>", "<user_instructions>", "<turn_aborted>", "# AGENTS.md instructions for"}

// responsesUserText reads a user message's content less Codex's own context.
func responsesUserText(raw json.RawMessage) string {
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return responsesText(raw)
	}
	var texts []string
	for _, p := range parts {
		ctx := false
		for _, pre := range responsesContextPrefixes {
			if strings.HasPrefix(strings.TrimSpace(p.Text), pre) {
				ctx = true
				break
			}
		}
		if !ctx && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// responsesText reads content that is a string or a list of parts (input_text,
// output_text, text) as one string.
func responsesText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err == nil {
		var texts []string
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	// An output object ({"content": ..., "success": ...}) or anything else:
	// quote it whole.
	var obj struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err == nil && len(obj.Content) > 0 {
		return responsesText(obj.Content)
	}
	return string(raw)
}

// responsesOutputItem renders a reply as one output item.
func responsesOutputItem(reply Reply, custom map[string]offered, n int64) map[string]any {
	if c := reply.Call; c != nil {
		callID := fmt.Sprintf("%s_%d", c.ID, n)
		how := custom[c.Name]
		item := func(m map[string]any) map[string]any {
			if how.namespace != "" {
				m["namespace"] = how.namespace
			}
			return m
		}
		if how.custom {
			input := string(c.Args)
			var args map[string]json.RawMessage
			if err := json.Unmarshal(c.Args, &args); err == nil {
				var s string
				if raw, ok := args["input"]; ok && json.Unmarshal(raw, &s) == nil {
					input = s
				}
			}
			return item(map[string]any{
				"id":      fmt.Sprintf("ctc_scripted_%d", n),
				"type":    "custom_tool_call",
				"status":  "completed",
				"call_id": callID,
				"name":    c.Name,
				"input":   input,
			})
		}
		args := string(c.Args)
		if args == "" {
			args = "{}"
		}
		return item(map[string]any{
			"id":        fmt.Sprintf("fc_scripted_%d", n),
			"type":      "function_call",
			"status":    "completed",
			"call_id":   callID,
			"name":      c.Name,
			"arguments": args,
		})
	}
	return map[string]any{
		"id":     fmt.Sprintf("msg_scripted_%d", n),
		"type":   "message",
		"role":   "assistant",
		"status": "completed",
		"content": []any{map[string]any{
			"type":        "output_text",
			"text":        reply.Text,
			"annotations": []any{},
		}},
	}
}
