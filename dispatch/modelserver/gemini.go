package modelserver

// The Gemini API (generativelanguage v1beta) as gemini-cli speaks it when
// GOOGLE_GEMINI_BASE_URL points here:
//
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse   the turns
//	POST /v1beta/models/{model}:generateContent                 side checks
//	POST /v1beta/models/{model}:countTokens                     token counts
//	POST /v1beta/models/{model}:embedContent (and batch)        embeddings
//	GET  /v1beta/models[/{model}]                               model info
//
// The model segment holds a colon, so the routes take the rest of the path
// and split it on the last colon. A request that asks for JSON
// (generationConfig.responseMimeType "application/json", a responseSchema
// or a responseJsonSchema) is answered with a JSON value built from its
// schema, never with a tool call: the CLI's next-speaker, loop-detection
// and routing checks parse it.

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"
)

func init() {
	registrars = append(registrars, registerGemini)
}

func registerGemini(s *Server, mux *http.ServeMux) {
	mux.HandleFunc("POST /v1beta/models/{rest...}", s.geminiModels)
	mux.HandleFunc("GET /v1beta/models/{rest...}", s.geminiModelInfo)
	mux.HandleFunc("GET /v1beta/models", s.geminiModelList)
}

// geminiRequest is the part of a GenerateContentRequest the server reads.
type geminiRequest struct {
	Contents          []geminiContent  `json:"contents"`
	SystemInstruction *geminiContent   `json:"systemInstruction"`
	Tools             []geminiTool     `json:"tools"`
	GenerationConfig  geminiGenConfig  `json:"generationConfig"`
	Requests          []map[string]any `json:"requests"` // batchEmbedContents
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text             *string             `json:"text,omitempty"`
	Thought          bool                `json:"thought,omitempty"`
	FunctionCall     *geminiFunctionCall `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		ID       string          `json:"id,omitempty"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
}

type geminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiTool struct {
	FunctionDeclarations []struct {
		Name string `json:"name"`
	} `json:"functionDeclarations"`
}

type geminiGenConfig struct {
	ResponseMimeType   string          `json:"responseMimeType"`
	ResponseSchema     json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
}

// wantsJSON reports whether the request asks for a JSON answer.
func (g geminiGenConfig) wantsJSON() bool {
	return strings.HasPrefix(g.ResponseMimeType, "application/json") ||
		len(g.ResponseSchema) > 0 || len(g.ResponseJSONSchema) > 0
}

// schema is the JSON schema the request asks the answer to follow, if any.
func (g geminiGenConfig) schema() json.RawMessage {
	if len(g.ResponseJSONSchema) > 0 {
		return g.ResponseJSONSchema
	}
	return g.ResponseSchema
}

// geminiModels serves POST /v1beta/models/{model}:{method}.
func (s *Server) geminiModels(w http.ResponseWriter, r *http.Request) {
	rest := r.PathValue("rest")
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		s.fail(w, r, http.StatusNotFound, "no method in %q (want {model}:{method})", rest)
		return
	}
	model, method := rest[:i], rest[i+1:]
	var req geminiRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the body is not a Gemini request: %v", err)
		return
	}
	switch method {
	case "streamGenerateContent", "generateContent":
		s.geminiGenerate(w, r, model, method == "streamGenerateContent", &req)
	case "countTokens":
		geminiWriteJSON(w, map[string]any{"totalTokens": geminiTokenEstimate(&req)})
	case "embedContent":
		geminiWriteJSON(w, map[string]any{"embedding": map[string]any{"values": geminiEmbedding()}})
	case "batchEmbedContents":
		embs := make([]any, len(req.Requests))
		for i := range embs {
			embs[i] = map[string]any{"values": geminiEmbedding()}
		}
		geminiWriteJSON(w, map[string]any{"embeddings": embs})
	default:
		s.fail(w, r, http.StatusNotFound, "the scripted Gemini API does not serve the method %q", method)
	}
}

func (s *Server) geminiGenerate(w http.ResponseWriter, r *http.Request, model string, stream bool, req *geminiRequest) {
	t := geminiTurn(r.URL.Path, req)
	var reply Reply
	if req.GenerationConfig.wantsJSON() {
		b, err := json.Marshal(jsonForSchema(req.GenerationConfig.schema(), "", 0))
		if err != nil {
			panic(err)
		}
		reply = Reply{Text: string(b)}
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{Turn: t, Reply: reply, At: time.Now()})
		s.mu.Unlock()
	} else {
		reply = s.answer(t)
	}
	var part map[string]any
	if reply.Call != nil {
		args := reply.Call.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		part = map[string]any{"functionCall": map[string]any{"name": reply.Call.Name, "args": args}}
	} else {
		part = map[string]any{"text": reply.Text}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]any{
			"promptTokenCount":     geminiTokenEstimate(req),
			"candidatesTokenCount": 1 + len(reply.Text)/4,
			"totalTokenCount":      geminiTokenEstimate(req) + 1 + len(reply.Text)/4,
		},
		"modelVersion": model,
		"responseId":   "scripted",
	}
	if !stream {
		geminiWriteJSON(w, resp)
		return
	}
	// alt=sse is what the CLI asks for; without it the API streams a JSON
	// array, which the server also writes for completeness.
	if r.URL.Query().Get("alt") != "sse" {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal([]any{resp})
		_, _ = w.Write(b)
		return
	}
	startSSE(w)
	sse(w, "", resp)
}

// geminiTurn reads a Turn out of a request: user texts are the text parts
// of user contents that carry no function response; tool results are the
// function responses, in order.
func geminiTurn(path string, req *geminiRequest) Turn {
	t := Turn{API: "gemini", Path: path}
	for _, tool := range req.Tools {
		for _, fd := range tool.FunctionDeclarations {
			t.Tools = append(t.Tools, fd.Name)
		}
	}
	for _, c := range req.Contents {
		if c.Role != "" && c.Role != "user" {
			continue
		}
		var texts []string
		hasResponse := false
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				hasResponse = true
				t.ToolResults = append(t.ToolResults, geminiResultText(p.FunctionResponse.Response))
			case p.Text != nil && !p.Thought:
				texts = append(texts, *p.Text)
			}
		}
		if !hasResponse {
			t.UserText = append(t.UserText, texts...)
		}
	}
	return t
}

// geminiResultText is the text of a function response: its output or
// error string (gemini-cli sends {"output": ...} or {"error": ...}), else
// the response's JSON.
func geminiResultText(raw json.RawMessage) string {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err == nil {
		var parts []string
		for _, k := range []string{"output", "error", "content", "result"} {
			if v, ok := obj[k].(string); ok {
				if k == "error" {
					v = "error: " + v
				}
				parts = append(parts, v)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return string(raw)
}

// jsonForSchema builds a small value that satisfies a JSON schema (or a
// Gemini Schema, whose type names are upper case): every required property
// (or every property, if none is marked required) with a plausible value.
// "next_speaker" is "user", so the CLI's next-speaker check ends the turn;
// confidences are 0, so no loop is ever detected; other numbers are their
// minimum or 1 (the router's complexity_score must be 1..100).
func jsonForSchema(raw json.RawMessage, name string, depth int) any {
	var sch map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &sch) != nil || depth > 8 {
		if depth == 0 {
			return map[string]any{"reasoning": "scripted", "next_speaker": "user"}
		}
		return "scripted"
	}
	typ := schemaType(sch)
	if enum, ok := sch["enum"].([]any); ok && len(enum) > 0 {
		return jsonForEnum(enum, name)
	}
	if name == "next_speaker" {
		return "user"
	}
	if typ == "" {
		if alt, ok := schemaAlternative(sch); ok {
			return jsonForSchema(alt, name, depth+1)
		}
		if _, ok := sch["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		return jsonForObject(sch, depth)
	case "array":
		return []any{}
	case "number", "integer":
		return jsonForNumber(sch, name)
	case "boolean":
		// The edit fixer's "noChangesRequired" stops it from rewriting an
		// edit with a made-up search string.
		return name == "noChangesRequired"
	case "null":
		return nil
	default:
		return jsonForString(name)
	}
}

// schemaType is a schema's type, lower case: its "type", or the first of a
// list of types; "" when it has none.
func schemaType(sch map[string]any) string {
	typ, _ := sch["type"].(string)
	if ts, ok := sch["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	return strings.ToLower(typ)
}

// jsonForEnum picks a value of an enum: "user" for next_speaker when the
// enum has it, else the first value.
func jsonForEnum(enum []any, name string) any {
	if name == "next_speaker" {
		for _, e := range enum {
			if e == "user" {
				return e
			}
		}
	}
	return enum[0]
}

// schemaAlternative is the first schema of an untyped schema's anyOf,
// oneOf or allOf (in that order of preference), if it has one.
func schemaAlternative(sch map[string]any) (json.RawMessage, bool) {
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := sch[k].([]any); ok && len(alts) > 0 {
			b, _ := json.Marshal(alts[0])
			return b, true
		}
	}
	return nil, false
}

// jsonForObject builds an object with a value for every required property
// (in the order listed), or for every property (sorted) when none is
// marked required.
func jsonForObject(sch map[string]any, depth int) any {
	props, _ := sch["properties"].(map[string]any)
	var keys []string
	if req, ok := sch["required"].([]any); ok && len(req) > 0 {
		for _, k := range req {
			if ks, ok := k.(string); ok {
				keys = append(keys, ks)
			}
		}
	} else {
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	obj := map[string]any{}
	for _, k := range keys {
		b, _ := json.Marshal(props[k])
		obj[k] = jsonForSchema(b, k, depth+1)
	}
	return obj
}

// jsonForNumber is a number's minimum when it has one, else 0 for a
// confidence (so no loop is detected) and 1 for any other.
func jsonForNumber(sch map[string]any, name string) any {
	if lo, ok := sch["minimum"].(float64); ok {
		return lo
	}
	if strings.Contains(name, "confidence") {
		return 0
	}
	return 1
}

// jsonForString is a string's value. Free text (reasoning, explanations)
// is "scripted"; any other string is empty, so that no correction the CLI
// asks for (edit fixes, escaping) replaces what the script wrote.
func jsonForString(name string) any {
	for _, k := range []string{"reason", "explanation", "analysis", "summary"} {
		if strings.Contains(name, k) {
			return "scripted"
		}
	}
	return ""
}

// geminiTokenEstimate is a rough token count of a request: a token per four
// bytes of its contents.
func geminiTokenEstimate(req *geminiRequest) int {
	b, _ := json.Marshal(req.Contents)
	return 1 + len(b)/4
}

func geminiEmbedding() []float64 {
	v := make([]float64, 8)
	v[0] = 1
	return v
}

func geminiModel(name string) map[string]any {
	return map[string]any{
		"name":                       "models/" + name,
		"displayName":                name,
		"inputTokenLimit":            1048576,
		"outputTokenLimit":           65536,
		"supportedGenerationMethods": []string{"generateContent", "countTokens"},
	}
}

func (s *Server) geminiModelInfo(w http.ResponseWriter, r *http.Request) {
	geminiWriteJSON(w, geminiModel(r.PathValue("rest")))
}

func (s *Server) geminiModelList(w http.ResponseWriter, r *http.Request) {
	geminiWriteJSON(w, map[string]any{"models": []any{geminiModel("gemini-2.5-pro"), geminiModel("gemini-2.5-flash")}})
}

// geminiWriteJSON answers with a JSON body.
func geminiWriteJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
