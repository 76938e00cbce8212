package strictjson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/strictjson"
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
	if err := strictjson.Decode([]byte(` {"target":"codex","artifacts":[{"uri":"file:///a","name":"n"}],"Untagged":3}`+"\n"), &ok); err != nil {
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
		err := strictjson.Decode([]byte(c.doc), &v)
		var je *strictjson.Error
		if !errors.As(err, &je) {
			t.Errorf("%q: err = %T %v, want a *strictjson.Error", c.doc, err, err)
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
	if err := strictjson.Decode([]byte(`{"b":[1,{"x":null}],"A":"s","a2":null}`), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]json.RawMessage{"b": json.RawMessage(`[1,{"x":null}]`), "A": json.RawMessage(`"s"`), "a2": json.RawMessage(`null`)}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("decoded %s", m)
	}
	for _, bad := range []string{`{"a":1,"A":2}`, `{"a":1,"a":1}`, `{"a":{"k":1,"K":2}}`, `{"a":"\udc00"}`, `{} {}`, `[]`, ``} {
		var m map[string]json.RawMessage
		if err := strictjson.Decode([]byte(bad), &m); err == nil {
			t.Errorf("%q accepted as %s", bad, m)
		}
	}
}

// levelDoc and levelItem share a name in two cases, one at each level:
// encoding/json matches a key to a field case-insensitively, so only a key
// check per level tells "Name" (an item's) from "name" (the document's).
type levelDoc struct {
	Name  string            `json:"name"`
	Item  levelItem         `json:"item"`
	Items []levelItem       `json:"items"`
	Extra map[string]string `json:"extra"`
}

type levelItem struct {
	Name string `json:"Name"`
	Size int    `json:"size"`
}

// A key is checked against the fields of the struct its own object decodes
// into: a name valid at another level is refused, not matched in another
// case to a field of this one; below a map any key is the map's.
func TestDecodeStrictKeysPerLevel(t *testing.T) {
	t.Parallel()
	var ok levelDoc
	doc := `{"name":"a","item":{"Name":"b","size":1},"items":[{"Name":"c"},{"size":2}],"extra":{"name":"d","any":"e"}}`
	if err := strictjson.Decode([]byte(doc), &ok); err != nil {
		t.Errorf("valid document: %v", err)
	} else if ok.Name != "a" || ok.Item.Name != "b" || len(ok.Items) != 2 || ok.Items[0].Name != "c" || ok.Extra["any"] != "e" {
		t.Errorf("decoded %+v", ok)
	}
	for _, c := range []struct{ doc, mention string }{
		{`{"Name":"x"}`, `"Name"`},                        // an item's name at the top
		{`{"item":{"name":"x"}}`, `"name"`},               // the top's name in an item
		{`{"items":[{"size":1},{"name":"x"}]}`, `"name"`}, // and in an array's item
		{`{"size":1}`, `"size"`},
		{`{"item":{"item":{}}}`, `"item"`},
	} {
		var v levelDoc
		err := strictjson.Decode([]byte(c.doc), &v)
		var je *strictjson.Error
		if !errors.As(err, &je) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: %v (decoded %+v); want a *strictjson.Error naming %s", c.doc, err, v, c.mention)
		}
	}
}
