package dispatch_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// installAdapter installs the fake agent as an npm package would an
// adapter: dir/node_modules/PKG/package.json says {name: PKG, version},
// its dist/index.js runs the fake agent reporting agentInfo name and
// agentVersion at initialize, and dir/node_modules/.bin/BIN links to it.
// With pkg "" there is no package at all: a bare script dir/bin/BIN.
func installAdapter(t *testing.T, fake, dir, pkg, version, bin, name, agentVersion string) string {
	t.Helper()
	script := "#!/bin/sh\nFAKEAGENT_NAME='" + name + "' FAKEAGENT_VERSION='" + agentVersion + "' exec '" + fake + "' \"$@\"\n"
	write := func(p, content string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	if pkg == "" {
		p := filepath.Join(dir, "bin", bin)
		write(p, script, 0o755)
		return p
	}
	root := filepath.Join(dir, "node_modules", filepath.FromSlash(pkg))
	write(filepath.Join(root, "package.json"), `{"name":"`+pkg+`","version":"`+version+`"}`, 0o644)
	write(filepath.Join(root, "dist", "index.js"), script, 0o755)
	link := filepath.Join(dir, "node_modules", ".bin", bin)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "dist", "index.js"), link); err != nil {
		t.Fatal(err)
	}
	return link
}

// adapterEnv is a dispatcher whose claude and codex are fake agents
// installed as adapters, under the real agents' profiles.
func adapterEnv(t *testing.T, claude, codex string) *env {
	t.Helper()
	return newEnv(t, func(o *dispatch.Options) {
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{
			{Name: "claude", Command: []string{claude}, Enabled: true},
			{Name: "codex", Command: []string{codex}, Enabled: true},
		}, nil, nil)
		o.Env = append(o.Env, "FAKEAGENT_ENVLOG=CODEX_CONFIG,INITIAL_AGENT_MODE",
			`CODEX_CONFIG={"model_provider":"mine","sandbox_mode":"danger-full-access"}`)
	})
}

// The profile is chosen for the adapter generation actually installed and
// running; a generation no profile covers, or an adapter that is not what
// its package says, is refused before session/new, with a message that
// names the package, its version and the fix.
func TestAdapterGenerations(t *testing.T) {
	t.Parallel()
	fake := newEnv(t).bin
	for _, c := range []struct {
		name                   string
		agent                  string
		pkg, version, reported string // reported: name@version at initialize
		mode                   model.Mode
		unsafe                 []string // the refusal's message; nil: it runs
		note                   string   // the working note, when it runs
		setMode                string   // the mode the relay selects ("": the session starts in it)
	}{
		{name: "claude 0.101", agent: "claude", pkg: "@agentclientprotocol/claude-agent-acp", version: "0.101.0",
			reported: "@agentclientprotocol/claude-agent-acp@0.101.0", mode: model.ModeReadOnly, // starts in default
			note: "hardening profile claude-agent-acp 0.101.x (verified on 0.101.0, running @agentclientprotocol/claude-agent-acp 0.101.0)"},
		{name: "claude 0.23", agent: "claude", pkg: "@zed-industries/claude-agent-acp", version: "0.23.1",
			reported: "@zed-industries/claude-agent-acp@0.23.1", mode: model.ModeReadOnly, setMode: "dontAsk",
			note: "hardening profile claude-agent-acp 0.23.x (verified on 0.23.1, running @zed-industries/claude-agent-acp 0.23.1)"},
		{name: "claude 0.101.4, unverified in the range", agent: "claude", pkg: "@agentclientprotocol/claude-agent-acp", version: "0.101.4",
			reported: "@agentclientprotocol/claude-agent-acp@0.101.4", mode: model.ModeReadOnly,
			note: "running @agentclientprotocol/claude-agent-acp 0.101.4: not a verified version"},
		{name: "claude 0.49, no rule", agent: "claude", pkg: "@agentclientprotocol/claude-agent-acp", version: "0.49.0",
			reported: "@agentclientprotocol/claude-agent-acp@0.49.0", mode: model.ModeReadOnly,
			unsafe: []string{"the adapter is @agentclientprotocol/claude-agent-acp 0.49.0", "no hardening profile of claude covers it",
				"npm install -g @agentclientprotocol/claude-agent-acp@0.101` (Node 22)", "npm install -g @zed-industries/claude-agent-acp@0.23.1` (Node 20)",
				"The cause is the adapter, not your settings"}},
		{name: "the oldest claude adapter", agent: "claude", pkg: "@zed-industries/claude-code-acp", version: "0.16.2",
			reported: "@zed-industries/claude-code-acp@0.16.2", mode: model.ModeReadOnly,
			unsafe: []string{"@zed-industries/claude-code-acp 0.16.2", "superseded by @agentclientprotocol/claude-agent-acp"}},
		{name: "an impostor package", agent: "claude", pkg: "@agentclientprotocol/claude-agent-acp", version: "0.101.0",
			reported: "@zed-industries/claude-agent-acp@0.23.1", mode: model.ModeReadOnly,
			unsafe: []string{"the installed package is @agentclientprotocol/claude-agent-acp 0.101.0", "but the adapter reports @zed-industries/claude-agent-acp 0.23.1"}},
		{name: "claude 0.23 not on disk, same launch", agent: "claude", reported: "@zed-industries/claude-agent-acp@0.23.1",
			mode: model.ModeReadOnly, setMode: "dontAsk", note: "hardening profile claude-agent-acp 0.23.x"},
		{name: "codex 0.16 not on disk, another launch", agent: "codex", reported: "codex-acp@0.16.0", mode: model.ModeReadOnly,
			unsafe: []string{"the adapter reports codex-acp 0.16.0 (profile codex-acp 0.16.x)", "could not be identified before it started",
				"set [agents.codex] command to the adapter's own installed executable"}},
		{name: "codex 2.x", agent: "codex", pkg: "@agentclientprotocol/codex-acp", version: "2.6.0",
			reported: "@agentclientprotocol/codex-acp@2.6.0", mode: model.ModeReadOnly, setMode: "read-only",
			note: "hardening profile codex-acp 2.x (verified on 2.6.0, running @agentclientprotocol/codex-acp 2.6.0)"},
		{name: "codex 3", agent: "codex", pkg: "@agentclientprotocol/codex-acp", version: "3.0.0",
			reported: "@agentclientprotocol/codex-acp@3.0.0", mode: model.ModeReadOnly,
			unsafe: []string{"the adapter is @agentclientprotocol/codex-acp 3.0.0", "codex-acp 2.x (verified on 2.6.0)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			name, version, _ := strings.Cut(c.reported, "@")
			if strings.HasPrefix(c.reported, "@") {
				n, v, _ := strings.Cut(c.reported[1:], "@")
				name, version = "@"+n, v
			}
			bin := installAdapter(t, fake, dir, c.pkg, c.version, c.agent+"-adapter", name, version)
			e := adapterEnv(t, bin, bin)
			out, r := e.run(t, e.task(c.agent, "echo hello", c.mode))
			if c.unsafe != nil {
				wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
				for _, w := range c.unsafe {
					if !strings.Contains(out.Message, w) {
						t.Errorf("message %q lacks %q", out.Message, w)
					}
				}
				if n := len(e.events(t, "session_new")); n != 0 {
					t.Errorf("session/new sent %d times to a refused adapter", n)
				}
				// The hint the task carries agrees with its message: the
				// adapter is the cause, so it never sends the user to
				// their settings.
				hint := spec.TaskHint(model.Task{ID: "T-1", State: out.State, Code: out.Code, Target: c.agent, Message: out.Message})
				if strings.Contains(hint, "own settings") || !strings.Contains(hint, "relay agents verify "+c.agent) {
					t.Errorf("message %q, hint %q: the hint contradicts the message", out.Message, hint)
				}
				return
			}
			wantOutcome(t, out, model.StateCompleted, "")
			r.mu.Lock()
			note := strings.Join(r.notes, "")
			r.mu.Unlock()
			if !strings.Contains(note, c.note) {
				t.Errorf("working note %q lacks %q", note, c.note)
			}
			modes := e.events(t, "set_mode")
			if (c.setMode == "" && len(modes) != 0) || (c.setMode != "" && (len(modes) != 1 || modes[0]["mode"] != c.setMode)) {
				t.Errorf("set_mode %v, want %q (the fake starts in default)", modes, c.setMode)
			}
		})
	}
}

// The 0.101 generation's session/new takes bypass away and offers read
// tools only; codex 2.x gets its pins through CODEX_CONFIG, merged over the
// daemon's own value, and starts in read-only.
func TestAdapterGenerationLaunch(t *testing.T) {
	t.Parallel()
	fake := newEnv(t).bin
	dir := t.TempDir()
	claude := installAdapter(t, fake, dir, "@agentclientprotocol/claude-agent-acp", "0.101.0", "claude-agent-acp",
		"@agentclientprotocol/claude-agent-acp", "0.101.0")
	codex := installAdapter(t, fake, dir, "@agentclientprotocol/codex-acp", "2.6.0", "codex-acp", "@agentclientprotocol/codex-acp", "2.6.0")
	e := adapterEnv(t, claude, codex)

	out, _ := e.run(t, e.task("claude", "echo hi", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	news := e.events(t, "session_new")
	if len(news) != 1 {
		t.Fatalf("session/new %d times", len(news))
	}
	b, _ := json.Marshal(news[0]["meta"])
	var meta struct {
		ClaudeCode struct {
			Options struct {
				SettingSources []string `json:"settingSources"`
				Tools          []string `json:"tools"`
				Bypass         *bool    `json:"allowDangerouslySkipPermissions"`
				Disallowed     []string `json:"disallowedTools"`
			} `json:"options"`
		} `json:"claudeCode"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	o := meta.ClaudeCode.Options
	if o.SettingSources == nil || len(o.SettingSources) != 0 || !slices.Equal(o.Tools, []string{"Read", "Glob", "Grep"}) ||
		o.Bypass == nil || *o.Bypass || !slices.Contains(o.Disallowed, "SendMessage") || !slices.Contains(o.Disallowed, "ListAgents") {
		t.Errorf("claude 0.101 session/new options %s", b)
	}

	out, _ = e.run(t, e.task("codex", "echo hi", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	var started map[string]any
	for _, ev := range e.events(t, "start") {
		if env, _ := ev["env"].(map[string]any); env["INITIAL_AGENT_MODE"] != nil {
			started = env
		}
	}
	if started == nil || started["INITIAL_AGENT_MODE"] != "read-only" {
		t.Fatalf("codex 2.x started with %v", started)
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(started["CODEX_CONFIG"].(string)), &cfg); err != nil {
		t.Fatal(err)
	}
	features, _ := cfg["features"].(map[string]any)
	if cfg["sandbox_mode"] != "read-only" || cfg["approval_policy"] != "on-request" || cfg["approvals_reviewer"] != "user" ||
		features["shell_snapshot"] != false || cfg["model_provider"] != "mine" {
		t.Errorf("CODEX_CONFIG %v: the profile's pins over the daemon's own value", cfg)
	}
}

// An adapter launched the way its users launch it, an interpreter and the
// script (`node …/gemini.js --acp`), runs under the profile of the
// script's package, even when the interpreter itself comes as an npm
// package (node_modules/node/bin/node), which used to be taken for the
// adapter and refused. The interpreter here is Python behind a wrapper
// in such a package (the fake agent is not a Node program); the script
// execs the fake agent as the adapter.
func TestAdapterLaunchedByAnInterpreter(t *testing.T) {
	t.Parallel()
	fake := newEnv(t).bin
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	nodePkg := filepath.Join(dir, "opt", "node_modules", "node")
	writeFile(t, filepath.Join(nodePkg, "package.json"), `{"name":"node","version":"22.12.0"}`, 0o644)
	interp := writeFile(t, filepath.Join(nodePkg, "bin", "python3"), "#!/bin/sh\nexec '"+python+"' \"$@\"\n", 0o755)
	for _, c := range []struct{ pkg, version, note string }{
		{"@agentclientprotocol/claude-agent-acp", "0.101.0", "hardening profile claude-agent-acp 0.101.x (verified on 0.101.0, running @agentclientprotocol/claude-agent-acp 0.101.0)"},
		{"@zed-industries/claude-agent-acp", "0.23.1", "hardening profile claude-agent-acp 0.23.x (verified on 0.23.1, running @zed-industries/claude-agent-acp 0.23.1)"},
	} {
		root := filepath.Join(dir, "lib", "node_modules", filepath.FromSlash(c.pkg))
		writeFile(t, filepath.Join(root, "package.json"), `{"name":"`+c.pkg+`","version":"`+c.version+`"}`, 0o644)
		script := writeFile(t, filepath.Join(root, "dist", "index.py"), "import os, sys\n"+
			"os.environ['FAKEAGENT_NAME'] = '"+c.pkg+"'\nos.environ['FAKEAGENT_VERSION'] = '"+c.version+"'\n"+
			"os.execv('"+fake+"', ['"+fake+"'] + sys.argv[1:])\n", 0o644)
		e := newEnv(t, func(o *dispatch.Options) {
			o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "claude", Command: []string{interp, "-u", script}, Enabled: true}}, nil, nil)
		})
		out, r := e.run(t, e.task("claude", "echo hello", model.ModeReadOnly))
		wantOutcome(t, out, model.StateCompleted, "")
		r.mu.Lock()
		note := strings.Join(r.notes, "")
		r.mu.Unlock()
		if !strings.Contains(note, c.note) {
			t.Errorf("%s: working note %q lacks %q", c.pkg, note, c.note)
		}
	}
}
