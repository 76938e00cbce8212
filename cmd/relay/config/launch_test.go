package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/model"
)

// An agent command that fetches its adapter at run time (npx, pnpm dlx,
// bunx, yarn dlx, uvx …) is a config error at the key, whose message
// names the command that installs the adapter once and whose hint shows
// the command to write instead; so is an interpreter whose script is a
// relative path (it would be looked up in each task's cwd). An
// interpreter with the script's absolute path is accepted, as is the
// same rule for a Config built in code (Validate).
func TestParseConfigRefusesRunTimeLaunchers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		command string
		want    []string // in the message; nil: accepted
	}{
		{`["npx", "@google/gemini-cli", "--acp"]`, []string{"agents.gemini.command", "npx fetches @google/gemini-cli at run time", "`npm install -g @google/gemini-cli`"}},
		{`["pnpm", "dlx", "@google/gemini-cli@0.61.0", "--acp"]`, []string{"pnpm dlx fetches", "`pnpm add -g @google/gemini-cli@0.61.0`"}},
		{`["bunx", "@google/gemini-cli", "--acp"]`, []string{"bunx fetches", "`bun add -g @google/gemini-cli`"}},
		{`["yarn", "dlx", "@google/gemini-cli", "--acp"]`, []string{"yarn dlx fetches", "`npm install -g @google/gemini-cli`"}},
		{`["node", "node_modules/@google/gemini-cli/bundle/gemini.js", "--acp"]`, []string{"relative path", "each task's cwd"}},
		{`["/opt/node22/bin/node", "/opt/lib/node_modules/@google/gemini-cli/bundle/gemini.js", "--acp"]`, nil},
		{`["gemini", "--acp"]`, nil},
	} {
		_, err := config.ParseConfig([]byte("[agents.gemini]\ncommand = "+c.command+"\n"), "config.toml")
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.command, err)
			}
			continue
		}
		var e *model.Error
		if !errors.As(err, &e) || e.Code != model.CodeInvalidConfig {
			t.Errorf("%s: %v, want invalid_config", c.command, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("%s: message %q lacks %q", c.command, e.Message, w)
			}
		}
		if !strings.Contains(e.Hint, `command = ["gemini", "--acp"]`) {
			t.Errorf("%s: hint %q, want the command to write", c.command, e.Hint)
		}
	}
	cfg := config.DefaultConfig()
	a, _ := cfg.Agent("claude")
	a.Command = []string{"npx", "@agentclientprotocol/claude-agent-acp"}
	cfg.Agents["claude"] = a
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "npm install -g @agentclientprotocol/claude-agent-acp") {
		t.Errorf("Validate of an npx command: %v", err)
	}
}
