package modelserver

import (
	"encoding/json"
	"net/http"
	"testing"
)

type geminiTestResponse struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				FunctionCall *struct {
					Name string         `json:"name"`
					Args map[string]any `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount int `json:"promptTokenCount"`
	} `json:"usageMetadata"`
}

// readGeminiSSE reads every data event of an alt=sse stream: nameless
// events, each a response.
func readGeminiSSE(t *testing.T, resp *http.Response) []geminiTestResponse {
	t.Helper()
	checkContentType(t, resp, "text/event-stream")
	var out []geminiTestResponse
	for _, e := range readSSE(t, resp) {
		if e.Event != "" {
			t.Fatalf("an event named %q", e.Event)
		}
		var r geminiTestResponse
		if err := json.Unmarshal([]byte(e.Raw), &r); err != nil {
			t.Fatalf("event %q: %v", e.Raw, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("no events")
	}
	return out
}

func readGeminiJSON(t *testing.T, resp *http.Response) geminiTestResponse {
	t.Helper()
	var r geminiTestResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

var geminiTools = []any{map[string]any{"functionDeclarations": []any{
	map[string]any{"name": "write_file", "parametersJsonSchema": map[string]any{"type": "object"}},
	map[string]any{"name": "run_shell_command"},
}}}

func userText(s string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{map[string]any{"text": s}}}
}

const geminiStream = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

func TestGeminiStreamText(t *testing.T) {
	s := start(t)
	evs := readGeminiSSE(t, post(t, s, geminiStream, map[string]any{
		"contents":          []any{userText("hello [[say hi there]]")},
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "[[tool nope {}]] system text is not the user's"}}},
		"tools":             geminiTools,
	}))
	last := evs[len(evs)-1]
	if last.Candidates[0].FinishReason != "STOP" {
		t.Errorf("finishReason %q", last.Candidates[0].FinishReason)
	}
	p := last.Candidates[0].Content.Parts[0]
	if p.Text == nil || *p.Text != "hi there" || p.FunctionCall != nil {
		t.Errorf("parts %+v, want the text %q", last.Candidates[0].Content.Parts, "hi there")
	}
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Turn.API != "gemini" || len(reqs[0].Turn.Tools) != 2 || len(reqs[0].Turn.UserText) != 1 {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestGeminiStreamToolCallThenResult(t *testing.T) {
	s := start(t)
	prompt := userText(`[[tool write_file {"file_path":"/tmp/x","content":"y"}]] [[say finished]]`)
	evs := readGeminiSSE(t, post(t, s, geminiStream, map[string]any{
		"contents": []any{prompt},
		"tools":    geminiTools,
	}))
	fc := evs[len(evs)-1].Candidates[0].Content.Parts[0].FunctionCall
	if fc == nil || fc.Name != "write_file" || fc.Args["file_path"] != "/tmp/x" || fc.Args["content"] != "y" {
		t.Fatalf("function call %+v", fc)
	}
	if evs[len(evs)-1].Candidates[0].Content.Role != "model" {
		t.Errorf("role %q", evs[len(evs)-1].Candidates[0].Content.Role)
	}

	// The CLI sends the call back as a model content and the result as a
	// user content holding a functionResponse.
	evs = readGeminiSSE(t, post(t, s, geminiStream, map[string]any{
		"contents": []any{
			prompt,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "write_file", "args": map[string]any{"file_path": "/tmp/x"}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
				"id": "write_file-1", "name": "write_file",
				"response": map[string]any{"error": "Tool execution denied by policy."},
			}}}},
		},
		"tools": geminiTools,
	}))
	p := evs[len(evs)-1].Candidates[0].Content.Parts[0]
	if p.FunctionCall != nil || p.Text == nil {
		t.Fatalf("parts %+v, want text", evs[len(evs)-1].Candidates[0].Content.Parts)
	}
	if want := "finished\n[result 1] error: Tool execution denied by policy."; *p.Text != want {
		t.Errorf("text %q, want %q", *p.Text, want)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || len(reqs[1].Turn.ToolResults) != 1 || len(reqs[1].Turn.UserText) != 1 {
		t.Errorf("second turn %+v", reqs[1].Turn)
	}
}

func TestGeminiNonStreaming(t *testing.T) {
	s := start(t)
	r := readGeminiJSON(t, post(t, s, "/v1beta/models/gemini-2.5-flash:generateContent", map[string]any{
		"contents": []any{userText(`[[tool run_shell_command {"command":"true"}]]`)},
		"tools":    geminiTools,
	}))
	if fc := r.Candidates[0].Content.Parts[0].FunctionCall; fc == nil || fc.Name != "run_shell_command" {
		t.Fatalf("parts %+v", r.Candidates[0].Content.Parts)
	}
	r = readGeminiJSON(t, post(t, s, "/v1beta/models/gemini-2.5-flash:generateContent", map[string]any{
		"contents": []any{userText("a title please")},
	}))
	if p := r.Candidates[0].Content.Parts[0]; p.Text == nil || *p.Text != "done" {
		t.Fatalf("parts %+v", r.Candidates[0].Content.Parts)
	}
}

// A request asking for JSON gets JSON matching its schema, never a call,
// even when the conversation holds a pending tool step.
func TestGeminiJSONSideRequests(t *testing.T) {
	s := start(t)
	nextSpeaker := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"reasoning":    map[string]any{"type": "string"},
			"next_speaker": map[string]any{"type": "string", "enum": []any{"model", "user"}},
		},
		"required": []any{"reasoning", "next_speaker"},
	}
	r := readGeminiJSON(t, post(t, s, "/v1beta/models/gemini-2.5-flash:generateContent", map[string]any{
		"contents": []any{userText(`[[tool write_file {"file_path":"/tmp/x"}]]`), userText("who speaks next?")},
		"tools":    geminiTools,
		"generationConfig": map[string]any{
			"responseMimeType":   "application/json",
			"responseJsonSchema": nextSpeaker,
		},
	}))
	p := r.Candidates[0].Content.Parts[0]
	if p.Text == nil || p.FunctionCall != nil {
		t.Fatalf("parts %+v, want JSON text", r.Candidates[0].Content.Parts)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(*p.Text), &got); err != nil {
		t.Fatalf("%q: %v", *p.Text, err)
	}
	if got["next_speaker"] != "user" || got["reasoning"] == nil {
		t.Errorf("next speaker answer %v", got)
	}

	// Gemini Schema (upper-case types) in responseSchema, no mime type.
	r = readGeminiJSON(t, post(t, s, "/v1beta/models/gemini-2.5-flash:generateContent", map[string]any{
		"contents": []any{userText("loop?")},
		"generationConfig": map[string]any{"responseSchema": map[string]any{
			"type": "OBJECT",
			"properties": map[string]any{
				"unproductive_state_confidence": map[string]any{"type": "NUMBER"},
				"unproductive_state_analysis":   map[string]any{"type": "STRING"},
				"flags":                         map[string]any{"type": "ARRAY", "items": map[string]any{"type": "STRING"}},
			},
		}},
	}))
	if err := json.Unmarshal([]byte(*r.Candidates[0].Content.Parts[0].Text), &got); err != nil {
		t.Fatal(err)
	}
	if got["unproductive_state_confidence"] != float64(0) || got["unproductive_state_analysis"] != "scripted" {
		t.Errorf("loop check answer %v", got)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d requests recorded, want 2", n)
	}
}

func TestGeminiCountTokensAndModels(t *testing.T) {
	s := start(t)
	var ct struct {
		TotalTokens int `json:"totalTokens"`
	}
	resp := post(t, s, "/v1beta/models/gemini-2.5-pro:countTokens", map[string]any{"contents": []any{userText("count me")}})
	if err := json.NewDecoder(resp.Body).Decode(&ct); err != nil || ct.TotalTokens <= 0 {
		t.Errorf("countTokens: %+v %v", ct, err)
	}
	for _, p := range []string{"/v1beta/models", "/v1beta/models/gemini-2.5-pro"} {
		resp, err := http.Get(s.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", p, resp.Status)
		}
	}
	resp = post(t, s, "/v1beta/models/gemini-2.5-pro:frobnicate", "{}", anyStatus)
	if resp.StatusCode != http.StatusNotFound || len(s.Errors()) != 1 {
		t.Errorf("unknown method: %s, errors %q", resp.Status, s.Errors())
	}
}
