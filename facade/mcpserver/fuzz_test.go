package mcpserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
)

// fuzzMaxErrorMessage bounds an error message, whatever the input.
const fuzzMaxErrorMessage = 512

// FuzzMCPArgs fuzzes the MCP facade's argument decoding (parseArgs)
// for every tool, with the raw arguments exactly as a client sent them.
// The plain `go test` runs the seeds (and testdata/fuzz/FuzzMCPArgs/);
// `just fuzz` runs it for a minute. It checks:
//   - no panic;
//   - a refusal is invalid_args with a message and a hint, and a message
//     of at most fuzzMaxErrorMessage bytes plus the tool's own hint text;
//   - accepted arguments are valid UTF-8 JSON (or nothing), every key is
//     a parameter of the tool, every required one is present, and every
//     value has its declared Go type and bounds;
//   - the accepted values re-encode to arguments that parse to the same
//     values.
func FuzzMCPArgs(f *testing.F) {
	tools := mcpTools(Options{Agent: "claude", Cwd: "/"})
	seeds := []string{
		``, `null`, `{}`, `[]`, `"x"`, `7`,
		`{"to":"codex","body":"hi"}`,
		`{"to":"codex","body":"hi","context_id":"C-1","reply_to":"MSG-1","artifacts":[{"uri":"file:///r/README.md","media_type":"text/markdown","name":"R"}]}`,
		`{"unread_only":false,"limit":1000}`,
		`{"limit":1001}`, `{"limit":0}`, `{"limit":-1}`, `{"limit":1.5}`, `{"limit":1e309}`, `{"limit":"5"}`,
		`{"limit":99999999999999999999999999999}`, `{"limit":1.0}`, `{"limit":1E1}`,
		`{"message_ids":["MSG-1"]}`, `{"message_ids":[]}`, `{"message_ids":[""]}`, `{"message_ids":[1]}`,
		`{"target":"claude","prompt":"echo","mission_id":"M-1","lease_id":"S-1","mode":"state_changing","reference_task_ids":["T-1"],"idempotency_key":"k","cwd":"/tmp"}`,
		`{"target":"claude","prompt":"x","mode":"yolo"}`,
		`{"task_id":"T-1"}`, `{"task_id":"T-\u0001\n"}`, `{"state":"working","limit":3}`, `{"state":"nope"}`,
		`{"to":"codex","body":"hi","from":"gemini"}`, `{"to":"codex","to":"gemini","body":"x"}`,
		`{"to":"codex","body":"x","artifacts":[{"uri":""}]}`, `{"artifacts":[{"uri":"a","uri":"b"}],"to":"c","body":"x"}`,
		`{"to":"codex","body":"x","artifacts":[{"uri":"data:,x","content":"x"}]}`,
		`{"to":"codex","body":"x","artifacts":[null]}`,
		`{"to":null,"body":"x"}`,
		"{\"to\":\"codex\",\"body\":\"\xff\"}",
		"{\"to\":\"codex\",\"body\":\"a\x00b\"}",
		`{"to":"codex","body":"\ud800"}`,
		`{"to":"codex'; DROP TABLE tasks; --","body":"1 OR 1=1"}`,
		`{"to":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"body":"x"}`,
		`{"` + strings.Repeat("k", 3000) + `":1}`,
		`{"to":"codex","body":"hi"} {}`,
		`{"to":"codex","body":"hi"`,
	}
	for i := range tools {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tool := tools[int(which)%len(tools)]
		var req mcp.CallToolRequest
		req.Params.Name = tool.name
		req.Params.RawArguments = raw
		args, err := parseArgs(tool, req)
		if err != nil {
			e, ok := err.(*model.Error)
			if !ok || e.Code != model.CodeInvalidArgs || e.Message == "" || e.Hint == "" {
				t.Fatalf("%s(%q): error %#v, want invalid_args with message and hint", tool.name, raw, err)
			}
			if len(e.Message) > fuzzMaxErrorMessage {
				t.Fatalf("%s: error message of %d bytes echoes the input: %.200q…", tool.name, len(e.Message), e.Message)
			}
			return
		}
		if tr := bytes.TrimSpace(raw); len(tr) > 0 && (!utf8.Valid(raw) || !json.Valid(raw)) {
			t.Fatalf("%s: accepted arguments that are not valid UTF-8 JSON: %q", tool.name, raw)
		}
		checkMCPArgs(t, tool, args)
		// Re-encode and parse again: the same values.
		enc, err := json.Marshal(map[string]any(args))
		if err != nil {
			t.Fatalf("%s: accepted values do not re-encode: %v", tool.name, err)
		}
		req.Params.RawArguments = enc
		back, err := parseArgs(tool, req)
		if err != nil {
			t.Fatalf("%s: re-encoded arguments %s refused: %v", tool.name, enc, err)
		}
		if !reflect.DeepEqual(back, args) {
			t.Fatalf("%s: round trip changed the values\n in: %#v\nout: %#v", tool.name, args, back)
		}
	})
}

// checkMCPArgs checks accepted arguments against the tool's parameters.
func checkMCPArgs(t *testing.T, tool mcpTool, args mcpArgs) {
	t.Helper()
	for k := range args {
		if !slices.ContainsFunc(tool.params, func(p mcpParam) bool { return p.name == k }) {
			t.Fatalf("%s: accepted unknown argument %q", tool.name, k)
		}
	}
	for _, p := range tool.params {
		v, ok := args[p.name]
		if !ok {
			if p.required {
				t.Fatalf("%s: required argument %q missing from accepted arguments", tool.name, p.name)
			}
			continue
		}
		switch p.kind {
		case mcpString:
			s, ok := v.(string)
			if !ok || (p.required && s == "") {
				t.Fatalf("%s: %s = %#v", tool.name, p.name, v)
			}
		case mcpBool:
			if _, ok := v.(bool); !ok {
				t.Fatalf("%s: %s = %#v", tool.name, p.name, v)
			}
		case mcpLimit:
			n, ok := v.(int)
			if !ok || n < 1 || n > mcpMaxLimit {
				t.Fatalf("%s: %s = %#v", tool.name, p.name, v)
			}
		case mcpEnum:
			s, ok := v.(string)
			if !ok || !slices.Contains(p.enum, s) {
				t.Fatalf("%s: %s = %#v", tool.name, p.name, v)
			}
		case mcpStrings:
			ss, ok := v.([]string)
			if !ok || len(ss) > mcpMaxItems || (p.required && len(ss) == 0) || slices.Contains(ss, "") {
				t.Fatalf("%s: %s = %#v", tool.name, p.name, v)
			}
		case mcpArtifacts:
			as, ok := v.([]model.Artifact)
			if !ok || len(as) > mcpMaxItems {
				t.Fatalf("%s: %s = %#v", tool.name, p.name, v)
			}
			for _, a := range as {
				if a.URI == "" {
					t.Fatalf("%s: artifact without uri accepted: %#v", tool.name, as)
				}
			}
		}
	}
}
