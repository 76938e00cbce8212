package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/strictjson"
)

// The bounds the facade enforces on its arguments.
const (
	// mcpMaxLimit is the largest limit a listing accepts.
	mcpMaxLimit = model.MaxPageSize
	// mcpMaxItems is the largest array a tool accepts when its parameter
	// names no smaller bound (mcpParam.maxItems): the daemon's bound on
	// the ids of one ack_messages.
	mcpMaxItems = model.MaxPageSize
)

// mcpKind is the type of one tool argument. One table drives both the
// advertised JSON schema and the handler's enforcement, so they cannot
// drift apart.
type mcpKind int

const (
	mcpString    mcpKind = iota // a JSON string; non-empty when required
	mcpBool                     // a JSON boolean
	mcpLimit                    // an integer from 1 to mcpMaxLimit
	mcpEnum                     // a JSON string from enum
	mcpStrings                  // an array of non-empty strings
	mcpArtifacts                // an array of {uri, media_type, name}
	mcpSeconds                  // an integer from 0 to mcpMaxWaitSeconds
)

// mcpMaxWaitSeconds is the longest wait_seconds: model.MaxTaskWait.
var mcpMaxWaitSeconds = int64(model.MaxTaskWait / time.Second)

// mcpParam is one argument of a tool.
type mcpParam struct {
	name     string
	kind     mcpKind
	required bool
	desc     string
	enum     []string
	def      any // the default, advertised in the schema (nil: none)
	// maxItems bounds an array argument (0: mcpMaxItems), as the daemon
	// does, so the schema a client checks against is the bound it meets.
	maxItems int
}

// most is the largest number of items the array argument takes.
func (p mcpParam) most() int {
	if p.maxItems > 0 {
		return p.maxItems
	}
	return mcpMaxItems
}

// mcpSchema returns the argument's JSON schema.
func (p mcpParam) mcpSchema() map[string]any {
	s := map[string]any{"description": p.desc}
	switch p.kind {
	case mcpString:
		s["type"] = "string"
		if p.required {
			s["minLength"] = 1
		}
	case mcpBool:
		s["type"] = "boolean"
	case mcpLimit:
		s["type"] = "integer"
		s["minimum"] = 1
		s["maximum"] = mcpMaxLimit
	case mcpSeconds:
		s["type"] = "integer"
		s["minimum"] = 0
		s["maximum"] = mcpMaxWaitSeconds
	case mcpEnum:
		s["type"] = "string"
		s["enum"] = p.enum
	case mcpStrings:
		s["type"] = "array"
		s["items"] = map[string]any{"type": "string", "minLength": 1}
		s["maxItems"] = p.most()
		if p.required {
			s["minItems"] = 1
		}
	case mcpArtifacts:
		s["type"] = "array"
		s["maxItems"] = p.most()
		s["items"] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"uri":        map[string]any{"type": "string", "minLength": 1, "description": "Where the content lives (file:///abs/path, https://…); the relay stores the reference, never the content."},
				"media_type": map[string]any{"type": "string", "description": "Its media type, e.g. text/markdown."},
				"name":       map[string]any{"type": "string", "description": "A short human-readable name."},
			},
			"required":             []string{"uri"},
			"additionalProperties": false,
		}
	}
	if p.def != nil {
		s["default"] = p.def
	}
	return s
}

// artifactKeys are the keys an artifact object may have.
var artifactKeys = []string{"uri", "media_type", "name"}

// mcpArgs are a tool call's validated arguments, converted to Go values
// (string, bool, int, time.Duration, []string, []model.Artifact). Absent and null
// arguments are missing from the map.
type mcpArgs map[string]any

func (a mcpArgs) str(name string) string {
	s, _ := a[name].(string)
	return s
}

func (a mcpArgs) boolOr(name string, def bool) bool {
	if b, ok := a[name].(bool); ok {
		return b
	}
	return def
}

func (a mcpArgs) intOr(name string, def int) int {
	if n, ok := a[name].(int); ok {
		return n
	}
	return def
}

func (a mcpArgs) duration(name string) time.Duration {
	d, _ := a[name].(time.Duration)
	return d
}

func (a mcpArgs) strings(name string) []string {
	s, _ := a[name].([]string)
	return s
}

func (a mcpArgs) artifacts(name string) []model.Artifact {
	s, _ := a[name].([]model.Artifact)
	return s
}

// identityArgs are argument names a model might use to pick its own
// identity; refusing them gets a pointed hint.
var identityArgs = []string{"from", "sender", "caller", "as", "agent", "identity", "from_agent", "source", "submitter", "user"}

// argError is an invalid_args error naming what is wrong.
func argError(t mcpTool, format string, args ...any) *model.Error {
	return model.Errorf(model.CodeInvalidArgs, "%s: %s", t.name, fmt.Sprintf(format, args...)).
		WithHint(t.argsHint())
}

// parseArgs validates a call's raw arguments against t's parameters:
// the arguments must be one JSON object without duplicate keys, with no
// key outside the parameters, every required parameter present and every
// value of its declared type and bounds. Nothing is dropped or coerced.
func parseArgs(t mcpTool, req mcp.CallToolRequest) (mcpArgs, error) {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		b, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return nil, argError(t, "arguments are not JSON: %v", err)
		}
		raw = b
	}
	keys, vals, err := decodeObject(raw)
	if err != nil {
		return nil, argError(t, "%v", err)
	}
	for _, k := range keys {
		if !slices.ContainsFunc(t.params, func(p mcpParam) bool { return p.name == k }) {
			err := argError(t, "unknown argument %q", model.Clip(k, 64))
			if slices.Contains(identityArgs, strings.ToLower(k)) {
				err.Hint = fmt.Sprintf("no tool takes a sender or caller: this facade's identity is fixed at launch (%q); remove %q", t.agent, k)
			}
			return nil, err
		}
	}
	out := mcpArgs{}
	for _, p := range t.params {
		v, ok := vals[p.name]
		if ok && bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			ok = false // null is "not given"
		}
		if !ok {
			if p.required {
				return nil, argError(t, "missing required argument %q", p.name)
			}
			continue
		}
		got, err := p.mcpConvert(v)
		if err != nil {
			return nil, argError(t, "%v", err)
		}
		out[p.name] = got
	}
	return out, nil
}

// mcpConvert checks one present, non-null value and converts it.
func (p mcpParam) mcpConvert(raw json.RawMessage) (any, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, fmt.Errorf("argument %q: %v", p.name, err)
	}
	switch p.kind {
	case mcpString:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("argument %q must be a string, got %s", p.name, jsonType(v))
		}
		if p.required && s == "" {
			return nil, fmt.Errorf("argument %q must not be empty", p.name)
		}
		return s, nil
	case mcpBool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("argument %q must be a boolean (true or false), got %s", p.name, jsonType(v))
		}
		return b, nil
	case mcpLimit:
		n, err := p.integer(v, 1, mcpMaxLimit, fmt.Sprintf("an integer from 1 to %d", mcpMaxLimit))
		return int(n), err
	case mcpSeconds:
		n, err := p.integer(v, 0, mcpMaxWaitSeconds, fmt.Sprintf("an integer number of seconds from 0 to %d", mcpMaxWaitSeconds))
		return time.Duration(n) * time.Second, err
	case mcpEnum:
		s, ok := v.(string)
		if !ok || !slices.Contains(p.enum, s) {
			return nil, fmt.Errorf("argument %q must be one of %s, got %s", p.name, strings.Join(p.enum, ", "), show(v))
		}
		return s, nil
	case mcpStrings:
		return p.strings(v)
	case mcpArtifacts:
		return p.artifacts(v)
	}
	return nil, fmt.Errorf("argument %q has no type", p.name) // unreachable
}

// integer checks that v is an integer from lo to hi; what names the
// range in the error. Any JSON number that is an integer, exactly, is
// taken (1.0, 1e0), nothing else.
func (p mcpParam) integer(v any, lo, hi int64, what string) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("argument %q must be %s, got %s", p.name, what, jsonType(v))
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok || !r.IsInt() || r.Num().Cmp(big.NewInt(lo)) < 0 || r.Num().Cmp(big.NewInt(hi)) > 0 {
		return 0, fmt.Errorf("argument %q must be %s, got %s", p.name, what, model.Clip(n.String(), 32))
	}
	return r.Num().Int64(), nil
}

// strings checks an array of non-empty strings, within the param's bound.
func (p mcpParam) strings(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("argument %q must be an array of strings, got %s", p.name, jsonType(v))
	}
	if p.required && len(arr) == 0 {
		return nil, fmt.Errorf("argument %q must not be empty", p.name)
	}
	if len(arr) > p.most() {
		return nil, fmt.Errorf("argument %q has %d items, at most %d are allowed", p.name, len(arr), p.most())
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d] must be a string, got %s", p.name, i, jsonType(e))
		}
		if s == "" {
			return nil, fmt.Errorf("%s[%d] must not be empty", p.name, i)
		}
		out = append(out, s)
	}
	return out, nil
}

// artifacts checks an array of artifact objects, within the param's bound.
func (p mcpParam) artifacts(v any) ([]model.Artifact, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("argument %q must be an array of {uri, media_type, name} objects, got %s", p.name, jsonType(v))
	}
	if len(arr) > p.most() {
		return nil, fmt.Errorf("argument %q has %d items, at most %d are allowed", p.name, len(arr), p.most())
	}
	out := make([]model.Artifact, 0, len(arr))
	for i, e := range arr {
		a, err := mcpArtifact(e)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]%v", p.name, i, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// mcpArtifact checks one artifact object. Its errors start with the key
// path below the array element (".uri …" or " …").
func mcpArtifact(v any) (model.Artifact, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return model.Artifact{}, fmt.Errorf(" must be an object {uri, media_type, name}, got %s", jsonType(v))
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(artifactKeys, k) {
			return model.Artifact{}, fmt.Errorf(" has unknown key %q (allowed: uri, media_type, name; artifacts are references, never content)", model.Clip(k, 64))
		}
	}
	var a model.Artifact
	for _, k := range artifactKeys {
		e, present := obj[k]
		if !present || e == nil {
			if k == "uri" {
				return model.Artifact{}, errors.New(".uri is required")
			}
			continue
		}
		s, ok := e.(string)
		if !ok {
			return model.Artifact{}, fmt.Errorf(".%s must be a string, got %s", k, jsonType(e))
		}
		switch k {
		case "uri":
			if s == "" {
				return model.Artifact{}, errors.New(".uri must not be empty")
			}
			a.URI = s
		case "media_type":
			a.MediaType = s
		case "name":
			a.Name = s
		}
	}
	return a, nil
}

// decodeObject decodes the top level of a call's arguments: a JSON
// object (or null/absent, meaning no arguments), read with
// strictjson.Decode, the relay's one strict reading: valid UTF-8, no lone
// surrogate, no key twice or differing from another only in case, at any
// depth, nothing after the object. It returns the keys, sorted, and each
// raw value; the parameters are checked against the tool's table.
func decodeObject(raw []byte) ([]string, map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, map[string]json.RawMessage{}, nil
	}
	var vals map[string]json.RawMessage
	if err := strictjson.Decode(raw, &vals); err != nil {
		return nil, nil, fmt.Errorf("arguments are refused: %v", err)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, vals, nil
}

// decodeValue decodes one argument value, keeping numbers exact.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// jsonType names a decoded value's JSON type for error messages.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + model.Clip(v.String(), 32)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// show shows a rejected value briefly: a string quoted, else its type.
func show(v any) string {
	if s, ok := v.(string); ok {
		if r := []rune(s); len(r) > 64 {
			s = string(r[:64]) + "…"
		}
		return fmt.Sprintf("%q", s)
	}
	return jsonType(v)
}
