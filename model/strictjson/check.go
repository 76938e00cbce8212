package strictjson

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
)

// MaxDepth is how deeply Check lets arrays and objects nest: the
// depth encoding/json itself refuses beyond.
const MaxDepth = 10000

// Error is a defect Check found in a JSON document.
type Error struct {
	// Path locates the defect: the value it is in, as
	// "artifacts[0].uri", or for a key the object holding it, as
	// "artifacts[0]"; "" is the top level. It is clipped.
	Path string
	// Offset is the byte offset in the document where it was found.
	Offset int
	// Reason says what is wrong, quoting at most a clipped excerpt.
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return "in " + e.Path + ": " + e.Reason
}

// Check checks data, one JSON value with optional whitespace around it
// as it arrived from outside the relay, for what encoding/json would accept
// and then silently change or choose among:
//
//   - bytes that are not valid UTF-8 (decoded as U+FFFD);
//   - a \u escape of half a surrogate pair without its other half, such as
//     "\ud800", "\udc00" or "\ud800\u0041" (a lone surrogate, decoded as
//     U+FFFD);
//   - an object with a key given twice (the last one wins), or with two keys
//     that differ only in case (encoding/json matches a field's name
//     case-insensitively, so either one could fill it). Keys are compared
//     as decoded: "t\u0061rget" is "target".
//
// Every string is checked, keys included, in every object and array at any
// depth. A document that is not JSON, or nests deeper than MaxDepth, is
// refused too, so Check is safe on any input; callers still decode with
// encoding/json, whose syntax errors are the better message.
//
// key, when not nil, is called with each object key (decoded) and may
// refuse it with an error, reported like the others. A defect is returned
// as a *Error.
func Check(data []byte, key func(k string) error) error {
	var at func([]jsonStep, string) error
	if key != nil {
		at = func(_ []jsonStep, k string) error { return key(k) }
	}
	return checkJSON(data, at)
}

// checkJSON is Check whose key hook is also told where the key's
// object stands (the path of containers from the top, as where renders).
func checkJSON(data []byte, key func(path []jsonStep, k string) error) error {
	s := &jsonScan{b: data, key: key}
	s.space()
	if err := s.value(); err != nil {
		return err
	}
	s.space()
	if s.i < len(s.b) {
		return s.fail("data after the JSON value")
	}
	return nil
}

// jsonScan is Check's recursive-descent reader.
type jsonScan struct {
	b     []byte
	i     int
	depth int
	path  []jsonStep // the containers the reader is in
	key   func(path []jsonStep, k string) error
}

// jsonStep is one container on the path: an array at index, or an object
// at key (index < 0).
type jsonStep struct {
	key   string
	index int
}

// jsonShow bounds a key quoted in a reason.
const jsonShow = 64

func (s *jsonScan) fail(reason string) error {
	return &Error{Path: s.where(), Offset: s.i, Reason: reason}
}

// where renders the path of the value the reader is in.
func (s *jsonScan) where() string {
	var b strings.Builder
	for _, st := range s.path {
		if st.index >= 0 {
			b.WriteString("[" + strconv.Itoa(st.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(model.Clip(st.key, jsonShow))
	}
	return model.Clip(b.String(), model.EchoBytes)
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScan) value() error {
	if s.i >= len(s.b) {
		return s.fail("the JSON document ends early")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		_, err := s.str(false)
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return s.fail("not valid JSON")
}

func (s *jsonScan) literal(word string) error {
	if string(s.b[s.i:min(len(s.b), s.i+len(word))]) != word {
		return s.fail("not valid JSON")
	}
	s.i += len(word)
	return nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) number() error {
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		return s.fail("not valid JSON (a malformed number)")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.fail("not valid JSON (a malformed number)")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.fail("not valid JSON (a malformed number)")
		}
	}
	return nil
}

func (s *jsonScan) enter() error {
	if s.depth++; s.depth > MaxDepth {
		return s.fail(fmt.Sprintf("nested more than %d deep", MaxDepth))
	}
	s.i++ // the opening bracket
	s.space()
	return nil
}

func (s *jsonScan) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	s.path = append(s.path, jsonStep{index: 0})
	for n := 0; ; n++ {
		s.path[len(s.path)-1].index = n
		s.space()
		if err := s.value(); err != nil {
			return err
		}
		s.space()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			s.path = s.path[:len(s.path)-1]
			s.depth--
			return nil
		}
		return s.fail("not valid JSON (expected , or ] in an array)")
	}
}

func (s *jsonScan) object() error {
	if err := s.enter(); err != nil {
		return err
	}
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	seen := map[string]string{} // folded key → the key as given
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("not valid JSON (expected a key in an object)")
		}
		k, err := s.str(true)
		if err != nil {
			return err
		}
		// The key's own defects are reported at the object holding it.
		f := jsonFold(k)
		if prev, dup := seen[f]; dup {
			if prev == k {
				return s.fail(fmt.Sprintf("key %q is given twice", model.Clip(k, jsonShow)))
			}
			return s.fail(fmt.Sprintf("keys %q and %q differ only in case", model.Clip(prev, jsonShow), model.Clip(k, jsonShow)))
		}
		seen[f] = k
		if s.key != nil {
			if err := s.key(s.path, k); err != nil {
				return s.fail(err.Error())
			}
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("not valid JSON (expected : after a key)")
		}
		s.i++
		s.space()
		s.path = append(s.path, jsonStep{key: k, index: -1})
		if err := s.value(); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			s.depth--
			return nil
		}
		return s.fail("not valid JSON (expected , or } in an object)")
	}
}

// str reads a string at s.i (its opening quote), refusing invalid UTF-8,
// raw control characters, bad escapes and lone surrogates. With decode it
// returns the string's value.
func (s *jsonScan) str(decode bool) (string, error) {
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !decode {
				return "", nil
			}
			if !escaped {
				return string(s.b[start+1 : s.i-1]), nil
			}
			var v string
			if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
				return "", s.fail("not valid JSON (a malformed string)") // cannot happen: checked above
			}
			return v, nil
		case c == '\\':
			escaped = true
			if err := s.escape(); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", s.fail("a raw control character in a string (escape it, as \\u00XX)")
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				return "", s.fail("a string is not valid UTF-8")
			}
			s.i += n
		}
	}
	return "", s.fail("the JSON document ends inside a string")
}

// escape reads one escape at s.i (its backslash). A \u escape of a high
// surrogate must be followed at once by one of a low surrogate; a low
// surrogate alone is refused.
func (s *jsonScan) escape() error {
	if s.i+1 >= len(s.b) {
		return s.fail("the JSON document ends inside a string")
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
	default:
		return s.fail("not valid JSON (an unknown escape in a string)")
	}
	r, ok := jsonHex4(s.b, s.i+2)
	if !ok {
		return s.fail("not valid JSON (a malformed \\u escape)")
	}
	switch {
	case r >= 0xD800 && r < 0xDC00:
		if lo, ok := jsonHex4(s.b, s.i+8); ok && s.b[s.i+6] == '\\' && s.b[s.i+7] == 'u' && lo >= 0xDC00 && lo < 0xE000 {
			s.i += 12
			return nil
		}
		return s.fail(fmt.Sprintf("a lone surrogate \\u%04x in a string (a high surrogate must be followed by a low one)", r))
	case r >= 0xDC00 && r < 0xE000:
		return s.fail(fmt.Sprintf("a lone surrogate \\u%04x in a string (a low surrogate must follow a high one)", r))
	}
	s.i += 6
	return nil
}

// jsonHex4 decodes the four hex digits at b[i:i+4].
func jsonHex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// jsonFold folds a key the way encoding/json matches names: each rune to
// the smallest of its case-folding orbit (so "K", "k" and the Kelvin sign
// fold alike), which makes two keys equal exactly when bytes.EqualFold
// says so.
func jsonFold(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}
