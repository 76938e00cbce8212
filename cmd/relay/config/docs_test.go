package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hai-relay/relay/cmd/relay/config"
)

// tomlSnippet is one ```toml block of a page: the lines between its fences,
// unindented, and the line its fence opens on.
type tomlSnippet struct {
	line  int
	lines []string
}

// tomlSnippets extracts a Markdown page's ```toml blocks in order. The
// pages write client configs (Codex's config.toml, JSON) as ```text, so
// every ```toml block is the relay's config.toml.
func tomlSnippets(t *testing.T, page string) []tomlSnippet {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []tomlSnippet
	var cur *tomlSnippet
	indent := ""
	for i, l := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && trimmed == "```toml":
			indent = l[:len(l)-len(strings.TrimLeft(l, " "))]
			cur = &tomlSnippet{line: i + 1}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, strings.TrimPrefix(l, indent))
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a ```toml block is not closed", page, cur.line)
	}
	return out
}

// mergeMarker is how a snippet says where it goes when the reader's
// config.toml may already hold its tables: "# … set these keys in your
// [agents.claude] table …". A reader then sets each of its keys in the
// table of that name (replacing the key's line where the table has it,
// adding the table where there is none); any other snippet is appended as
// it is.
var (
	mergeMarker = regexp.MustCompile(`^#.*set these keys in your \[`)
	tableHeader = regexp.MustCompile(`^\[([A-Za-z0-9_.-]+)\]`)
	keyLine     = regexp.MustCompile(`^([A-Za-z0-9_-]+)\s*=`)
)

// tomlDoc is a config.toml built up by a reader following a page: its
// sections in order, each a table's header and lines (the first, with no
// header, is what comes before any table).
type tomlDoc struct {
	sections []tomlSection
}

type tomlSection struct {
	table string
	lines []string
}

// add adds a snippet as a reader would: appended as written, or, where
// it says so, each of its tables' keys into the table of that name.
func (d *tomlDoc) add(s tomlSnippet) {
	if len(d.sections) == 0 {
		d.sections = []tomlSection{{}}
	}
	merge := len(s.lines) > 0 && mergeMarker.MatchString(s.lines[0])
	at := len(d.sections) - 1
	for _, l := range s.lines {
		m := tableHeader.FindStringSubmatch(l)
		if m == nil {
			sec := &d.sections[at]
			if k := keyLine.FindStringSubmatch(l); merge && k != nil {
				sec.lines = slices.DeleteFunc(sec.lines, func(old string) bool {
					ok := keyLine.FindStringSubmatch(old)
					return ok != nil && ok[1] == k[1]
				})
			}
			sec.lines = append(sec.lines, l)
			continue
		}
		at = -1
		if merge {
			for i, sec := range d.sections {
				if sec.table == m[1] {
					at = i
				}
			}
		}
		if at < 0 {
			d.sections = append(d.sections, tomlSection{table: m[1]})
			at = len(d.sections) - 1
		}
	}
}

func (d *tomlDoc) String() string {
	var b strings.Builder
	for _, sec := range d.sections {
		if sec.table != "" {
			fmt.Fprintf(&b, "[%s]\n", sec.table)
		}
		b.WriteString(strings.Join(sec.lines, "\n") + "\n\n")
	}
	return b.String()
}

// Every config snippet of the README, docs/*.md and docs/agents/*.md
// works when a reader follows the page literally: each is added, in page
// order, to the config.toml the page's earlier snippets made (appended as
// written, or merged into the tables it names where it says so), and the
// file after each step is read by the real config parser. A snippet that repeats a
// table the page already had, without saying where its keys go, breaks
// the file (TOML: "Key 'agents.claude' has already been defined").
func TestDocsConfigSnippetsParse(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("..", "..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	agentPages, err := filepath.Glob(filepath.Join("..", "..", "..", "docs", "agents", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, agentPages...)
	pages = append([]string{filepath.Join("..", "..", "..", "README.md")}, pages...)
	total := 0
	for _, page := range pages {
		doc := &tomlDoc{}
		snippets := tomlSnippets(t, page)
		total += len(snippets)
		for _, s := range snippets {
			doc.add(s)
			if _, err := config.ParseConfig([]byte(doc.String()), filepath.Base(page)); err != nil {
				t.Errorf("%s:%d: config.toml after this snippet, added as the page says, does not parse: %v\n"+
					"(a snippet with a table the page had before says where its keys go: "+
					"\"# … set these keys in your [TABLE] table …\")\n%s", page, s.line, err, doc)
				break
			}
		}
	}
	if total < 5 {
		t.Fatalf("found %d config snippets in %v; the extraction is broken", total, pages)
	}
}
