package socketapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// The strict request decoders of the socket API. Each reads at most max
// bytes (more is payload_too_large), requires exactly one JSON object with
// no unknown field and nothing after it, that model.CheckJSON accepts and
// whose keys are its fields' names exactly, and reports any other defect as
// invalid_args naming the field. They check form only: whether a value is
// acceptable (a known agent, a long enough body) is the service's business.
// They are exported so fuzz tests can target them.

// DecodeSendRequest decodes the body of POST /v1/messages.
func DecodeSendRequest(r io.Reader, max int64) (model.SendRequest, error) {
	var v model.SendRequest
	err := apiDecodeStrict(r, max, &v)
	return v, err
}

// DecodeSubmitRequest decodes the body of POST /v1/tasks.
func DecodeSubmitRequest(r io.Reader, max int64) (model.SubmitRequest, error) {
	var v model.SubmitRequest
	err := apiDecodeStrict(r, max, &v)
	return v, err
}

// DecodeAckRequest decodes the body of POST /v1/inbox/ack,
// {"message_ids": [...]}, and returns the ids.
func DecodeAckRequest(r io.Reader, max int64) ([]string, error) {
	var v AckRequest
	if err := apiDecodeStrict(r, max, &v); err != nil {
		return nil, err
	}
	return v.MessageIDs, nil
}

// DecodeConn decodes the body of POST /v1/connections.
func DecodeConn(r io.Reader, max int64) (model.Conn, error) {
	var v model.Conn
	err := apiDecodeStrict(r, max, &v)
	return v, err
}

// DecodeEmpty checks the body of a POST route that takes no arguments: it
// must be empty or the empty object {}.
func DecodeEmpty(r io.Reader, max int64) error {
	data, err := apiReadBounded(r, max)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var v struct{}
	return apiDecodeBytes(data, &v)
}

// apiReadBounded reads all of r, refusing more than max bytes.
func apiReadBounded(r io.Reader, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxBody
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(data)) > max {
		return nil, model.Errorf(model.CodePayloadTooLarge, "the request body exceeds %d bytes", max).
			WithHint(spec.Hint(model.CodePayloadTooLarge))
	}
	if err != nil {
		return nil, &model.Error{Code: model.CodeInvalidArgs, Message: "the request body could not be read",
			Hint: spec.Hint(model.CodeInvalidArgs), Err: err}
	}
	return data, nil
}

func apiDecodeStrict(r io.Reader, max int64, v any) error {
	data, err := apiReadBounded(r, max)
	if err != nil {
		return err
	}
	return apiDecodeBytes(data, v)
}

// apiDecodeBytes decodes exactly one JSON object into v, refusing unknown
// fields, wrong types and trailing data.
func apiDecodeBytes(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return apiInvalid("the request body is empty; expected a JSON object")
	}
	if trimmed[0] != '{' {
		return apiInvalid("the request body is not a JSON object")
	}
	// encoding/json would replace invalid UTF-8 with U+FFFD: refuse it
	// instead, so nothing is stored other than as it was sent.
	if !utf8.Valid(data) {
		return apiInvalid("the request body is not valid UTF-8")
	}
	// Nor may it replace a lone surrogate, keep the last of a key given
	// twice, or fill a field from a key that matches its name only in
	// case. A body that is not JSON at all gets the decoder's message.
	if err := model.CheckJSON(data, apiExactKeys(v)); err != nil && json.Valid(data) {
		return apiInvalid("the request body is refused: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiJSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apiInvalid("the request body has data after its JSON object")
	}
	return nil
}

// apiKeyNames caches apiExactKeys' sets of names by type.
var apiKeyNames sync.Map // reflect.Type → map[string]bool

// apiExactKeys returns a key check for decoding into v: a key must be the
// JSON name of a field of v's type or of a type nested in it (an artifact),
// spelled exactly. encoding/json matches names case-insensitively; the
// socket API does not. A key at the wrong level is left to the decoder's
// unknown-field check.
func apiExactKeys(v any) func(string) error {
	t := reflect.TypeOf(v)
	names, ok := apiKeyNames.Load(t)
	if !ok {
		m := map[string]bool{}
		apiFieldNames(t, m)
		names, _ = apiKeyNames.LoadOrStore(t, m)
	}
	known := names.(map[string]bool)
	return func(k string) error {
		if !known[k] {
			return fmt.Errorf("unknown field %q (keys match a field's name exactly; unknown arguments are refused)", apiClip(k, 64))
		}
		return nil
	}
}

// apiFieldNames adds the JSON names of t's fields, and of the structs in
// them, to names.
func apiFieldNames(t reflect.Type, names map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case f.Anonymous && name == "":
			apiFieldNames(f.Type, names)
			continue
		case name == "":
			name = f.Name
		}
		names[name] = true
		apiFieldNames(f.Type, names)
	}
}

// apiJSONError turns an encoding/json error into invalid_args naming the
// field or the offset, without echoing the input.
func apiJSONError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		return apiInvalid("field %q must be %s, not a JSON %s", apiClip(field, 64), apiTypeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return apiInvalid("the request body is not valid JSON (offset %d): %s", syntaxErr.Offset, strings.TrimPrefix(syntaxErr.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return apiInvalid("the request body ends inside its JSON object")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return apiInvalid("%s (unknown arguments are refused)", apiClip(msg, 160))
	}
	return apiInvalid("the request body could not be decoded: %s", apiClip(msg, 160))
}

// apiClip cuts s to at most n bytes, on a rune boundary, marking the cut,
// so that an error never echoes a large input back.
func apiClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// apiTypeName names a Go type the way a JSON caller thinks of it.
func apiTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string", strings.HasSuffix(goType, ".State"), strings.HasSuffix(goType, ".Mode"),
		strings.HasSuffix(goType, ".Code"):
		return "a string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	}
	return fmt.Sprintf("an object (%s)", goType)
}
