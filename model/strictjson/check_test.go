package strictjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hai-relay/relay/model/strictjson"
)

// CheckJSON refuses, anywhere in a document, what encoding/json would
// accept and then silently replace (invalid UTF-8, lone surrogates) or
// choose among (a key twice, keys differing only in case), and accepts
// every other JSON document.
func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`{}`, ` [] `, `"x"`, `0`, `-1.5e+10`, `true`, `null`,
		`{"a":1,"b":[{"a":2},{"a":3}]}`,
		`{"emoji":"\ud83d\ude00","raw":"😀","nul":"\u0000","esc":"\"\\\/\b\f\n\r\t"}`,
		`{"a":{"a":{"a":1}}}`,        // the same key at different depths
		`[{"uri":"x"},{"uri":"y"}]`,  // the same key in sibling objects
		`{"é":1,"e":2}`,              // not a case pair
		"{\"x\":\"\\uD83D\\uDE00\"}", // upper-case hex
		`{"t":"\udbff\udfff"}`,       // the last pair
		`{"t":"\ud7ff\ue000\uffff"}`, // next to the surrogates
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		if err := strictjson.Check([]byte(ok), nil); err != nil {
			t.Errorf("CheckJSON(%s) = %v, want nil", ok, err)
		}
	}
	for _, tc := range []struct {
		doc, path, mention string
	}{
		{`{"a":"\ud800"}`, "a", `\ud800`},
		{`{"a":"\udc00"}`, "a", `\udc00`},
		{`{"a":"x\ud800\u0041"}`, "a", `\ud800`},
		{`{"a":"\ud800\ud800"}`, "a", `\ud800`},
		{`{"a":"\ud800"`, "a", `\ud800`},
		{`{"a":"\ud800\"}`, "a", `\ud800`},
		{`{"a":"\udfff\ud800"}`, "a", `\udfff`},
		{`{"\ud800":1}`, "", `\ud800`},
		{`{"a":[{"b":"\uDC00"}]}`, "a[0].b", `\udc00`},
		{"{\"a\":\"\xff\"}", "a", "UTF-8"},
		{"{\"a\":\"\xed\xa0\x80\"}", "a", "UTF-8"}, // a surrogate encoded in UTF-8
		{"{\"\xc3\x28\":1}", "", "UTF-8"},
		{`{"a":1,"a":2}`, "", `"a" is given twice`},
		{`{"a":1,"\u0061":2}`, "", `"a" is given twice`},
		{`{"to":"x","artifacts":[{"uri":"a"},{"uri":"b","uri":"c"}]}`, "artifacts[1]", `"uri" is given twice`},
		{`{"TARGET":"claude","target":"codex"}`, "", `"TARGET" and "target" differ only in case`},
		{`{"x":{"Uri":1,"uRI":2}}`, "x", "differ only in case"},
		{"{\"kind\":1,\"\u212aind\":2}", "", "differ only in case"},   // the Kelvin sign folds to k
		{"{\"state\":1,\"\u017ftate\":2}", "", "differ only in case"}, // so does the long s to s
		// Too deep; the long path is clipped.
		{`{"a":` + strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth) + `}`, "a[0][0][0]…", "nested"},
		{`{"a":1} x`, "", "after"},
		{`{"a":1,}`, "", "JSON"},
		{"{\"a\":\"x\ny\"}", "a", "control character"},
		{`{"a":01}`, "", "JSON"},
		{`{"a":"\x"}`, "a", "escape"},
		{``, "", "ends"},
	} {
		err := strictjson.Check([]byte(tc.doc), nil)
		var je *strictjson.Error
		if !errors.As(err, &je) {
			t.Errorf("CheckJSON(%q) = %v, want a *JSONError", tc.doc, err)
			continue
		}
		path := je.Path == tc.path ||
			strings.HasSuffix(tc.path, "…") && strings.HasPrefix(je.Path, strings.TrimSuffix(tc.path, "…")) && strings.HasSuffix(je.Path, "bytes cut]")
		if !path || !strings.Contains(je.Reason, tc.mention) {
			t.Errorf("CheckJSON(%q) = path %q, reason %q; want path %q mentioning %q", tc.doc, je.Path, je.Reason, tc.path, tc.mention)
		}
	}

	// The key hook sees every key, decoded, and may refuse one.
	var keys []string
	err := strictjson.Check([]byte(`{"a":[{"b\u0021":1}],"c":{}}`), func(k string) error {
		keys = append(keys, k)
		if k == "c" {
			return errors.New("no c")
		}
		return nil
	})
	if err == nil || err.Error() != "no c" || strings.Join(keys, ",") != "a,b!,c" {
		t.Errorf("key hook: keys %q, err %v", keys, err)
	}
}

// Whatever the input, CheckJSON does not panic, and what it accepts is one
// valid JSON document in valid UTF-8.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":"\ud800"}`, `{"a":1,"A":2}`, `[{"uri":"x","uri":"y"}]`, `"\ud83d\ude00"`, "\"\xff\"", `{"a":[1,2,{"b":null}]}`, `-0.5e-3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := strictjson.Check(data, nil)
		if err == nil {
			if !json.Valid(data) || !utf8.Valid(data) {
				t.Fatalf("accepted %q, which is not valid JSON in UTF-8", data)
			}
			return
		}
		var je *strictjson.Error
		if !errors.As(err, &je) || je.Reason == "" || je.Offset < 0 || je.Offset > len(data) {
			t.Fatalf("CheckJSON(%q) = %#v", data, err)
		}
	})
}
