package model_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// strictDoc is a struct DecodeStrict reads into: a field, a nested struct
// in a slice, a field named by its Go name.
type strictDoc struct {
	Target    string           `json:"target"`
	Artifacts []model.Artifact `json:"artifacts,omitempty"`
	Untagged  int
	Skipped   string `json:"-"`
}

// DecodeStrict reads a struct one way only: exact keys at every level, no
// duplicate or case twin, no unknown key, nothing but one object.
func TestDecodeStrictStruct(t *testing.T) {
	t.Parallel()
	var ok strictDoc
	if err := model.DecodeStrict([]byte(` {"target":"codex","artifacts":[{"uri":"file:///a","name":"n"}],"Untagged":3}`+"\n"), &ok); err != nil {
		t.Fatalf("valid document: %v", err)
	}
	if ok.Target != "codex" || len(ok.Artifacts) != 1 || ok.Artifacts[0].URI != "file:///a" || ok.Untagged != 3 {
		t.Errorf("decoded %+v", ok)
	}
	for _, c := range []struct{ doc, mention string }{
		{`{"TARGET":"claude","target":"codex"}`, `"TARGET"`},
		{`{"target":"codex","Target":"claude"}`, "differ only in case"},
		{`{"target":"a","target":"b"}`, `"target" is given twice`},
		{`{"t\u0061rget":"a","target":"b"}`, `"target" is given twice`},
		{`{"Target":"codex"}`, `"Target"`},
		{"{\"targe\u212a\":\"codex\"}", "unknown field"},
		{`{"untagged":3}`, `"untagged"`},
		{`{"Skipped":"x"}`, `"Skipped"`},
		{`{"bogus":1}`, `"bogus"`},
		{`{"artifacts":[{"uri":"u","size":3}]}`, `"size"`},
		{`{"artifacts":[{"URI":"u"}]}`, `"URI"`},
		{`{"uri":"u"}`, `"uri"`}, // a known name at the wrong level
		{`{"target":5}`, `"target" must be a string, not a JSON number`},
		{`{"artifacts":"x"}`, `"artifacts" must be an array`},
		{`{"target":"\ud800"}`, `\ud800`},
		{"{\"target\":\"\xff\"}", "UTF-8"},
		{``, "empty"},
		{" \n", "empty"},
		{`null`, "not a JSON object"},
		{`["codex"]`, "not a JSON object"},
		{`{"target":"codex"} {}`, "after"},
		{`{"target":"codex"}x`, "after"},
		{`{"target":`, "ends inside"},
		{`{"target" "codex"}`, "not valid JSON"},
	} {
		var v strictDoc
		err := model.DecodeStrict([]byte(c.doc), &v)
		var je *model.JSONError
		if !errors.As(err, &je) {
			t.Errorf("%q: err = %T %v, want a *model.JSONError", c.doc, err, err)
			continue
		}
		if !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%q: %q does not mention %q", c.doc, err, c.mention)
		}
	}
}

// Into a map, any key is taken, but read as strictly; the values stay raw.
func TestDecodeStrictMap(t *testing.T) {
	t.Parallel()
	var m map[string]json.RawMessage
	if err := model.DecodeStrict([]byte(`{"b":[1,{"x":null}],"A":"s","a2":null}`), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]json.RawMessage{"b": json.RawMessage(`[1,{"x":null}]`), "A": json.RawMessage(`"s"`), "a2": json.RawMessage(`null`)}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("decoded %s", m)
	}
	for _, bad := range []string{`{"a":1,"A":2}`, `{"a":1,"a":1}`, `{"a":{"k":1,"K":2}}`, `{"a":"\udc00"}`, `{} {}`, `[]`, ``} {
		var m map[string]json.RawMessage
		if err := model.DecodeStrict([]byte(bad), &m); err == nil {
			t.Errorf("%q accepted as %s", bad, m)
		}
	}
}
