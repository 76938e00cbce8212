package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// update rewrites docs/config.md from the key table:
// go test ./cmd/relay/config -run Reference -update
var update = flag.Bool("update", false, "rewrite docs/config.md from the parser's key table")

// referenceTables is the order of the tables in docs/config.md; every
// table of the key table must be in it.
var referenceTables = []string{"authority", "agents.*", "limits", "storage", "retention", "daemon"}

// docs/config.md, the configuration reference, is the parser's own key
// table (leaves) rendered: every key the parser takes, what it takes and
// a valid line for it. The file is generated, never written by hand, so
// it cannot drift from what the relay accepts; and every line of it
// parses.
func TestConfigReferenceGolden(t *testing.T) {
	got := renderReference()
	path := filepath.Join("..", "..", "..", "docs", "config.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Errorf("docs/config.md is not the key table rendered (%v): run go test ./cmd/relay/config -run Reference -update and review the diff", err)
	}
	// Every table's block is a config the parser takes.
	for _, block := range strings.Split(string(got), "```toml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if _, err := ParseConfig([]byte(block), "docs/config.md"); err != nil {
			t.Errorf("a block of docs/config.md does not parse: %v\n%s", err, block)
		}
	}
}

// renderReference renders the key table as docs/config.md.
func renderReference() []byte {
	byTable := map[string][]string{}
	for k := range leaves {
		i := strings.LastIndexByte(k, '.')
		byTable[k[:i]] = append(byTable[k[:i]], k)
	}
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from the parser's key table (cmd/relay/config/parse.go,
leaves) by TestConfigReferenceGolden: do not edit; change the table and
run go test ./cmd/relay/config -run Reference -update. -->

The relay reads an optional ` + "`config.toml`" + ` in its home. Every table and
every key is optional; a key left out takes its default. A syntax error,
an unknown key, or a value of the wrong type or out of range is an error
(` + "`invalid_config`" + `). It names the file, the line and the key, and says
what to write. Keys are case-sensitive. Agent names match
` + "`[a-z0-9][a-z0-9_-]{0,63}`" + `; ` + "`relay`" + ` is reserved.

Each block below is a valid config on its own: every key of one table,
with what it takes above it.
`)
	for _, table := range referenceTables {
		keys := byTable[table]
		delete(byTable, table)
		slices.Sort(keys)
		header := table
		if table == "agents.*" {
			header = "agents.claude"
		}
		fmt.Fprintf(&b, "\n## [%s]\n\n", strings.TrimSuffix(table, ".*"))
		if table == "retention" {
			b.WriteString("Applied when the daemon starts, hourly, and by `relay prune`.\n\n")
		}
		if table == "agents.*" {
			b.WriteString("One table per agent, `[agents.NAME]`. For the six core agents\n" +
				"(claude, codex, cursor, gemini, hermes, opencode) every key overrides a\n" +
				"default; a custom agent needs at least `command`.\n\n")
		}
		fmt.Fprintf(&b, "```toml\n[%s]\n", header)
		for i, k := range keys {
			if i > 0 {
				b.WriteString("\n")
			}
			for _, line := range wrap(leaves[k].want, 74) {
				b.WriteString("# " + line + "\n")
			}
			example := leaves[k].example
			if k == "agents.*.command" { // per agent: claude's default
				example = "command = " + tomlArray(defaultCommands["claude"])
			}
			b.WriteString(example + "\n")
		}
		b.WriteString("```\n")
	}
	if len(byTable) > 0 {
		panic(fmt.Sprintf("tables missing from referenceTables: %v", byTable))
	}
	return b.Bytes()
}

// wrap breaks s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
