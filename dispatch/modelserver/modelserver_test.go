package modelserver

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	steps, err := Parse(`Do this. [[tool TodoWrite {"todos":[{"content":"a]]b","status":"pending"}]}]] then
[[say all done]] and [[tool Bash {"command":"touch /x"}]] [[tool Glob]]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Tool: "TodoWrite", Args: []byte(`{"todos":[{"content":"a]]b","status":"pending"}]}`)},
		{Say: "all done"},
		{Tool: "Bash", Args: []byte(`{"command":"touch /x"}`)},
		{Tool: "Glob", Args: []byte(`{}`)},
	}
	if len(steps) != len(want) {
		t.Fatalf("steps = %+v", steps)
	}
	for i := range want {
		if steps[i].Tool != want[i].Tool || steps[i].Say != want[i].Say || string(steps[i].Args) != string(want[i].Args) {
			t.Errorf("step %d = %+v (%s), want %+v (%s)", i, steps[i], steps[i].Args, want[i], want[i].Args)
		}
	}
	for _, bad := range []string{`[[tool Write ["x"]]]`, `[[tool Write {"a":1}]`, `[[tool Write {"a":]]`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted a malformed step", bad)
		}
	}
}

func TestDecide(t *testing.T) {
	script := ToolStep("Write", map[string]string{"file_path": "/x"}) + " [[say finished]]"
	r := Decide(Turn{UserText: []string{script}, Tools: []string{"Write"}})
	if r.Call == nil || r.Call.Name != "Write" || string(r.Call.Args) != `{"file_path":"/x"}` {
		t.Fatalf("first turn = %+v", r)
	}
	r = Decide(Turn{UserText: []string{script}, Tools: []string{"Write"}, ToolResults: []string{"denied\n by the user"}})
	if r.Call != nil || r.Text != "finished\n[result 1] denied by the user" {
		t.Fatalf("after the result = %+v", r)
	}
	// No tools offered (a title request): text, never a call.
	if r := Decide(Turn{UserText: []string{script}}); r.Call != nil || !strings.HasPrefix(r.Text, "finished") {
		t.Fatalf("toolless turn = %+v", r)
	}
}
