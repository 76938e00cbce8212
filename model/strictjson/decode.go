package strictjson

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
)

// Decode is the relay's one strict reading of a JSON object that came
// from outside it: a socket API request body, an MCP tool's arguments, the
// authority adapter's answer. It decodes data into v, a pointer to a struct
// or to a map with string keys, and refuses, as a *Error saying what
// and where:
//
//   - anything but exactly one JSON object, with optional whitespace
//     around it: empty data, another JSON value, data after the object;
//   - whatever Check refuses (invalid UTF-8, a lone surrogate, a key
//     given twice or two keys differing only in case, at any depth);
//   - for a struct, a key that is not, spelled exactly, the JSON name of
//     a field of the struct its own object decodes into (encoding/json
//     would match it case-insensitively, so a name of another level, in
//     another case, could fill a field of this one); below a map field,
//     any key is the map's; a value of the wrong type.
//
// A map takes any key (its caller checks them, as the MCP server checks
// its tools' parameters, or ignores those it does not know, as the
// authority adapter's client does); its values are still read strictly, so
// map[string]json.RawMessage reads the top level only and leaves the
// values to the caller. Size is bounded by the caller, which reads at most
// its own limit before calling (the socket API's MaxBody, the MCP line
// bound, spec.AuthorityMaxResponse). The error never quotes more than a
// clipped excerpt of data.
func Decode(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return &Error{Reason: "empty; a JSON object is expected"}
	}
	if trimmed[0] != '{' {
		return &Error{Reason: "not a JSON object"}
	}
	// encoding/json would replace invalid UTF-8 with U+FFFD: refuse it,
	// so that nothing is stored other than as it was sent.
	if !utf8.Valid(data) {
		return &Error{Reason: "not valid UTF-8"}
	}
	// Nor may it replace a lone surrogate, keep the last of a key given
	// twice, or fill a field from a key that matches its name only in
	// case. A document that is not JSON at all gets the decoder's message,
	// the better one.
	if err := checkJSON(data, exactKeys(v)); err != nil && json.Valid(data) {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return strictDecodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Offset: int(dec.InputOffset()), Reason: "data after the JSON object"}
	}
	return nil
}

// strictKeyLevels caches keyLevelOf's answers by type.
var strictKeyLevels sync.Map // reflect.Type → *keyLevel

// keyLevel is the keys one object may hold when decoded into a struct:
// each field's JSON name, spelled exactly, with the level of its value
// (nil: any key below it, as in a map, an interface or raw JSON).
type keyLevel struct {
	fields map[string]*keyLevel
}

// exactKeys returns Decode's key check for decoding into v: for a
// struct, a key must be the JSON name of a field of the struct its object
// decodes into (v's type at the top, an artifact inside artifacts),
// spelled exactly; a name of another level is refused too, as encoding/json
// would match it case-insensitively to a field of this one. For anything
// else, nil: any key.
func exactKeys(v any) func(path []jsonStep, k string) error {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	top, ok := strictKeyLevels.Load(t)
	if !ok {
		top, _ = strictKeyLevels.LoadOrStore(t, keyLevelOf(t, map[reflect.Type]*keyLevel{}))
	}
	root := top.(*keyLevel)
	return func(path []jsonStep, k string) error {
		lv := root
		for _, st := range path {
			if st.index >= 0 {
				continue // an array's items share its level
			}
			if lv = lv.fields[st.key]; lv == nil {
				return nil
			}
		}
		if _, ok := lv.fields[k]; !ok {
			return fmt.Errorf("unknown field %q (keys match a field's name exactly; unknown arguments are refused)", model.Clip(k, jsonShow))
		}
		return nil
	}
}

// keyLevelOf returns the level of a value of type t: its fields' names
// when it is a struct (through pointers, slices and arrays), else nil.
// seen holds the levels being built, for a type that nests itself.
func keyLevelOf(t reflect.Type, seen map[reflect.Type]*keyLevel) *keyLevel {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	if lv, ok := seen[t]; ok {
		return lv
	}
	lv := &keyLevel{fields: map[string]*keyLevel{}}
	seen[t] = lv
	addFields(t, lv, seen)
	return lv
}

// addFields adds the JSON names of struct t's fields to lv, those of an
// embedded struct without a name of its own included.
func addFields(t reflect.Type, lv *keyLevel, seen map[reflect.Type]*keyLevel) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
			continue
		case f.Anonymous && name == "":
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(et, lv, seen)
				continue
			}
			if !f.IsExported() {
				continue
			}
		case name == "":
			name = f.Name
		}
		lv.fields[name] = keyLevelOf(f.Type, seen)
	}
}

// strictDecodeError turns an encoding/json error into a *Error naming
// the field or the offset, without echoing the input.
func strictDecodeError(err error) *Error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(the object)"
		}
		return &Error{Offset: int(typeErr.Offset), Reason: fmt.Sprintf("field %q must be %s, not a JSON %s",
			model.Clip(field, jsonShow), jsonTypeName(typeErr.Type), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &Error{Offset: int(syntaxErr.Offset), Reason: fmt.Sprintf("not valid JSON (offset %d): %s",
			syntaxErr.Offset, model.Clip(strings.TrimPrefix(syntaxErr.Error(), "json: "), 160))}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{Reason: "it ends inside its JSON object"}
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return &Error{Reason: model.Clip(msg, 160) + " (unknown arguments are refused)"}
	}
	return &Error{Reason: "could not be decoded: " + model.Clip(msg, 160)}
}

// jsonTypeName names a Go type the way a JSON caller thinks of it.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	}
	return fmt.Sprintf("an object (%s)", t)
}
