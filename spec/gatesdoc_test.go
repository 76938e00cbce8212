package spec_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// gateMarkers enclose a gate list in the docs, generated from spec.Gates.
var gateMarkers = regexp.MustCompile(`(?s)(<!-- gates:[^>]*-->\n).*?(<!-- /gates -->)`)

// Every list of the gates in the README and docs/ is the gate table
// rendered (between <!-- gates --> markers; -update rewrites them), and no
// page lists the gates anywhere else: a paragraph naming three gates or
// more, or "five gates", is a copy that would drift.
func TestDocsGateLists(t *testing.T) {
	pages := []string{filepath.Join("..", "README.md")}
	for _, pat := range []string{"*.md", "*/*.md"} {
		more, _ := filepath.Glob(filepath.Join("..", "docs", pat))
		pages = append(pages, more...)
	}
	want := spec.GatesMarkdown()
	lists := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if *update {
			text = gateMarkers.ReplaceAllString(text, "${1}"+strings.ReplaceAll(want, "$", "$$")+"${2}")
			if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range gateMarkers.FindAllStringSubmatchIndex(text, -1) {
			lists++
			if got := text[m[3]:m[4]]; got != want {
				t.Errorf("%s: the gate list is not the table's (go test ./spec -run TestDocsGateLists -update):\n%s", page, got)
			}
		}
		outside := gateMarkers.ReplaceAllString(text, "")
		for _, para := range strings.Split(outside, "\n\n") {
			named := 0
			for _, g := range model.AllGates() {
				if strings.Contains(para, "`"+string(g)+"`") {
					named++
				}
			}
			if named >= 3 || strings.Contains(strings.ToLower(para), "five gates") {
				t.Errorf("%s lists the gates outside the generated list; link to it instead:\n%s", page, para)
			}
		}
	}
	if lists < 2 {
		t.Errorf("found %d generated gate lists, want README.md's and docs/authority.md's", lists)
	}
}
