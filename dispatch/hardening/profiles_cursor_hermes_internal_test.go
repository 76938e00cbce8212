package hardening

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Only model.provider, model.default (or model.name) and model.base_url
// are read from a Hermes config, in the block forms Hermes' own docs
// write; any other form of the model section is an error, not a guess.
func TestParseHermesModel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, text string
		want       hermesModel
		err        string
	}{
		{name: "block", text: "model:\n  default: gpt-4.1\n  provider: custom\n  base_url: http://h:1/v1\n  api_key: sk\nterminal:\n  backend: local\n",
			want: hermesModel{Provider: "custom", Default: "gpt-4.1", BaseURL: "http://h:1/v1"}},
		{name: "quoted, comments, nested", text: "# top\nmodel:\n  # which\n  provider: 'nous'   # mine\n  default: \"a # b\"\n  extra:\n    provider: nested\n",
			want: hermesModel{Provider: "nous", Default: "a # b"}},
		{name: "name when no default", text: "model:\n    name: m1\n    provider: p\n", want: hermesModel{Provider: "p", Default: "m1"}},
		{name: "default wins over name", text: "model:\n  default: d\n  name: n\n", want: hermesModel{Default: "d"}},
		{name: "a string", text: "model: anthropic/claude-opus-4\n", want: hermesModel{Default: "anthropic/claude-opus-4"}},
		{name: "none", text: "approvals:\n  mode: off\n"},
		{name: "model under another key", text: "aux:\n  model:\n    default: x\n"},
		{name: "flow", text: "model: {default: x}\n", err: "YAML form the relay does not read"},
		{name: "alias", text: "model:\n  default: *m\n", err: "YAML form the relay does not read"},
		{name: "block scalar", text: "model:\n  base_url: |\n    http://x\n", err: "YAML form the relay does not read"},
		{name: "not key value", text: "model:\n  - a\n", err: "not a key: value line"},
	} {
		got, err := parseHermesModel(c.text)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// The config.yaml a Hermes session gets carries the user's model settings
// ($HERMES_HOME before ~/.hermes) and approvals manual, and nothing else;
// a verification's model replaces the user's.
func TestHermesFiles(t *testing.T) {
	t.Parallel()
	home, hh := t.TempDir(), t.TempDir()
	write := func(dir, text string) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".hermes"), "model:\n  provider: from-home\nmcp_servers:\n  x:\n    command: evil\n")
	write(hh, "model:\n  provider: from-hermes-home\n  default: \"quote\\\" and\\nnewline\"\nskills:\n  external_dirs: [/x]\n")
	for _, c := range []struct {
		name string
		env  []string
		want []string
	}{
		{"home", []string{"HOME=" + home}, []string{`provider: "from-home"`}},
		{"HERMES_HOME first", []string{"HOME=" + home, "HERMES_HOME=" + hh}, []string{`provider: "from-hermes-home"`, `default: "quote\" and\nnewline"`}},
		{"no config", []string{"HOME=" + t.TempDir()}, nil},
		{"verification", []string{"HOME=" + home, hermesVerifyURLVar + "=http://127.0.0.1:9/v1"},
			[]string{`provider: "custom"`, `base_url: "http://127.0.0.1:9/v1"`}},
	} {
		files, err := hermesFiles(c.env)
		if err != nil || len(files) != 1 {
			t.Fatalf("%s: %v %v", c.name, files, err)
		}
		cfg := files["config.yaml"]
		for _, w := range append(c.want, "approvals:\n  mode: manual\n") {
			if !strings.Contains(cfg, w) {
				t.Errorf("%s: config.yaml lacks %q:\n%s", c.name, w, cfg)
			}
		}
		for _, never := range []string{"mcp_servers", "skills", "evil", "from-home\"\n  default"} {
			if strings.Contains(cfg, never) {
				t.Errorf("%s: config.yaml carries %q:\n%s", c.name, never, cfg)
			}
		}
		if c.want == nil && strings.Contains(cfg, "model:") {
			t.Errorf("%s: a model section from nowhere:\n%s", c.name, cfg)
		}
		// What the relay writes parses back to what it carried over.
		m, err := parseHermesModel(cfg)
		if err != nil {
			t.Errorf("%s: the relay's own config does not parse: %v", c.name, err)
		}
		if c.name == "HERMES_HOME first" && m.Default != "quote\" and\nnewline" {
			t.Errorf("round trip: %+v", m)
		}
	}
}

// Cursor's profile covers any name at a date version, never the
// third-party adapter, and never an npm-style version.
func TestCursorProfileCovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, version string
		want          bool
	}{
		{"cursor-agent", "2026.10.22-27dcf5f", true},
		{"Cursor Agent", "2025.08.25-896bbe1", true},
		{"cursor-agent", "", false},
		{"some-npm-adapter", "0.7.1", false},
		{"cursor-agent-acp", "2026.10.22", false},
		{"@blowmage/cursor-agent-acp", "2026.10.22", false},
	} {
		if got := cursorProfile.Covers(c.name, c.version); got != c.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.name, c.version, got, c.want)
		}
	}
	msg := Choose("cursor", profiles["cursor"], "@blowmage/cursor-agent-acp", "0.7.1").Refused
	if !strings.Contains(msg, "--force") || !strings.Contains(msg, "`agent acp`") {
		t.Errorf("refusal %q does not say why", msg)
	}
}

// The cli-config.json the relay writes is what Cursor's docs call for, and
// the offline check says so.
func TestCursorConfigCheck(t *testing.T) {
	t.Parallel()
	if c := cursorConfigCheck(); !c.Passed {
		t.Errorf("%+v", c)
	}
}
