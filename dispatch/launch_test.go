package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
)

// writeFile writes content at p, making its directories.
func writeFile(t *testing.T, p, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// interpreterTree lays out what a user has after `npm install -g
// @google/gemini-cli` under a Node that itself came as an npm package
// (node_modules/node/bin/node, as the `node` package installs it), and
// the interpreters by name: the files are real, only their contents are
// stand-ins.
type interpreterTree struct {
	node, bun, deno, python string // interpreters
	gemini                  string // the script of @google/gemini-cli
	pyScript                string // a Python adapter's script, in no npm package
}

func newInterpreterTree(t *testing.T) interpreterTree {
	t.Helper()
	dir := t.TempDir()
	nodePkg := filepath.Join(dir, "opt", "node22", "node_modules", "node")
	writeFile(t, filepath.Join(nodePkg, "package.json"), `{"name":"node","version":"22.12.0"}`, 0o644)
	tr := interpreterTree{
		node:   writeFile(t, filepath.Join(nodePkg, "bin", "node"), "#!/bin/sh\n", 0o755),
		bun:    writeFile(t, filepath.Join(dir, "bin", "bun"), "#!/bin/sh\n", 0o755),
		deno:   writeFile(t, filepath.Join(dir, "bin", "deno"), "#!/bin/sh\n", 0o755),
		python: writeFile(t, filepath.Join(dir, "bin", "python3.12"), "#!/bin/sh\n", 0o755),
	}
	pkg := filepath.Join(dir, "lib", "node_modules", "@google", "gemini-cli")
	writeFile(t, filepath.Join(pkg, "package.json"), `{"name":"@google/gemini-cli","version":"0.61.0"}`, 0o644)
	tr.gemini = writeFile(t, filepath.Join(pkg, "bundle", "gemini.js"), "// gemini\n", 0o644)
	tr.pyScript = writeFile(t, filepath.Join(dir, "venv", "bin", "hermes-acp.py"), "# hermes\n", 0o644)
	return tr
}

// An agent command that names an interpreter and a script is identified
// by the script's package, whatever options the interpreter takes before
// it; a script the relay cannot find, or that is relative (it would be
// looked up in each task's cwd), leaves the adapter unidentified on disk
// and says why. The interpreter itself is never taken for the adapter
// (today's `node` package).
func TestIdentifyCommandFindsTheScript(t *testing.T) {
	t.Parallel()
	tr := newInterpreterTree(t)
	if a := dispatch.IdentifyAdapter(tr.node); a.Package != "node" {
		t.Fatalf("the tree's node is not in a `node` package: %+v", a)
	}
	for _, c := range []struct {
		name     string
		argv     []string
		pkg      string // "": unidentified
		real     string
		whyEmpty string // part of Err when unidentified
	}{
		{"node and the script", []string{tr.node, tr.gemini, "--acp"}, "@google/gemini-cli", tr.gemini, ""},
		{"node with options", []string{tr.node, "--no-warnings", "--max-old-space-size=4096", "-r", "/opt/hook.js", tr.gemini, "--acp"}, "@google/gemini-cli", tr.gemini, ""},
		{"node, -- then the script", []string{tr.node, "--", tr.gemini, "--acp"}, "@google/gemini-cli", tr.gemini, ""},
		{"bun run", []string{tr.bun, "run", "--smol", tr.gemini, "--acp"}, "@google/gemini-cli", tr.gemini, ""},
		{"bun", []string{tr.bun, tr.gemini, "--acp"}, "@google/gemini-cli", tr.gemini, ""},
		{"deno run with flags", []string{tr.deno, "run", "-A", "--config", "/etc/deno.json", "--v8-flags=--max-old-space-size=4096", tr.gemini, "--acp"}, "@google/gemini-cli", tr.gemini, ""},
		{"python", []string{tr.python, "-u", "-X", "utf8", tr.pyScript, "acp"}, "", tr.pyScript, ""},
		{"a relative script", []string{tr.node, "bundle/gemini.js", "--acp"}, "", "", "not an absolute path"},
		{"inline code", []string{tr.node, "-e", "require('x')"}, "", "", "inline"},
		{"python -m", []string{tr.python, "-m", "hermes", "acp"}, "", "", "inline"},
		{"no script", []string{tr.node, "--no-warnings"}, "", "", "no script"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := dispatch.IdentifyCommand(c.argv[0], c.argv[1:])
			if a.Package != c.pkg || a.RealPath != c.real {
				t.Fatalf("%q: identified as %+v, want package %q at %s", c.argv, a, c.pkg, c.real)
			}
			if c.real != "" {
				if a.Interpreter != c.argv[0] || a.Fingerprint == "" || a.Err != "" {
					t.Errorf("%q: %+v, want the interpreter named and the script fingerprinted", c.argv, a)
				}
				if c.pkg != "" && (a.Version != "0.61.0" || a.Describe() != "@google/gemini-cli 0.61.0") {
					t.Errorf("%q: %+v, want @google/gemini-cli 0.61.0", c.argv, a)
				}
			}
			if c.whyEmpty != "" && !strings.Contains(a.Err, c.whyEmpty) {
				t.Errorf("%q: Err %q, want it to say %q", c.argv, a.Err, c.whyEmpty)
			}
		})
	}
	// A program that is no interpreter is the adapter, as before.
	if a := dispatch.IdentifyCommand(tr.gemini, []string{"--acp"}); a.Package != "@google/gemini-cli" || a.Interpreter != "" {
		t.Errorf("an executable adapter: %+v", a)
	}
}

// The registry shows (relay agents, list_agents) an interpreter-launched
// adapter as its package, under the profile of that package's generation,
// not refused as the interpreter's.
func TestRegistryIdentifiesAnInterpreterLaunch(t *testing.T) {
	t.Parallel()
	tr := newInterpreterTree(t)
	look := func(p string) (string, error) { return p, nil }
	r := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "gemini", Command: []string{tr.node, tr.gemini, "--acp"}, Enabled: true}}, look, nil)
	info, ok := r.Agent(context.Background(), "gemini")
	if !ok {
		t.Fatal("gemini unknown")
	}
	if info.Adapter.Package != "@google/gemini-cli" || info.Adapter.Version != "0.61.0" || info.Adapter.Path != tr.gemini {
		t.Errorf("adapter %+v, want @google/gemini-cli 0.61.0 at %s", info.Adapter, tr.gemini)
	}
	if info.Profile.Name != "gemini-cli 0.61+" || strings.Contains(info.Profile.Summary, "refused") {
		t.Errorf("profile %+v, want gemini-cli 0.61+", info.Profile)
	}
}

// A launcher that fetches a package at run time is refused, with the
// command that installs the package once; everything else passes.
func TestRefuseLauncher(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		argv    []string
		install string // "": not refused
	}{
		{[]string{"npx", "@google/gemini-cli", "--acp"}, "npm install -g @google/gemini-cli"},
		{[]string{"/usr/bin/npx", "-y", "@google/gemini-cli@0.61.0", "--acp"}, "npm install -g @google/gemini-cli@0.61.0"},
		{[]string{"npx", "--package", "@agentclientprotocol/claude-agent-acp", "claude-agent-acp"}, "npm install -g @agentclientprotocol/claude-agent-acp"},
		{[]string{"npx", "-p=@agentclientprotocol/codex-acp", "codex-acp"}, "npm install -g @agentclientprotocol/codex-acp"},
		{[]string{"npm", "exec", "--", "@google/gemini-cli", "--acp"}, "npm install -g @google/gemini-cli"},
		{[]string{"npm", "x", "opencode-ai", "acp"}, "npm install -g opencode-ai"},
		{[]string{"pnpm", "dlx", "@google/gemini-cli", "--acp"}, "pnpm add -g @google/gemini-cli"},
		{[]string{"pnpx", "@google/gemini-cli", "--acp"}, "pnpm add -g @google/gemini-cli"},
		{[]string{"yarn", "dlx", "@google/gemini-cli", "--acp"}, "npm install -g @google/gemini-cli"},
		{[]string{"bunx", "@google/gemini-cli", "--acp"}, "bun add -g @google/gemini-cli"},
		{[]string{"bun", "x", "@google/gemini-cli", "--acp"}, "bun add -g @google/gemini-cli"},
		{[]string{"deno", "run", "-A", "npm:@google/gemini-cli", "--acp"}, "npm install -g @google/gemini-cli"},
		{[]string{"uvx", "hermes-agent", "acp"}, "uv tool install hermes-agent"},
		{[]string{"uv", "tool", "run", "--from", "hermes-agent", "hermes", "acp"}, "uv tool install hermes-agent"},
		{[]string{"pipx", "run", "hermes-agent", "acp"}, "pipx install hermes-agent"},
		{[]string{"gemini", "--acp"}, ""},
		{[]string{"node", "/opt/gemini.js", "--acp"}, ""},
		{[]string{"npm", "run", "acp"}, ""},
		{[]string{"pnpm", "exec", "gemini"}, ""},
		{[]string{"bun", "run", "/opt/gemini.js"}, ""},
		{[]string{"deno", "run", "-A", "/opt/gemini.js"}, ""},
		{[]string{"uv", "run", "hermes"}, ""},
	} {
		why := dispatch.RefuseLauncher(c.argv)
		switch {
		case c.install == "" && why != "":
			t.Errorf("%q refused: %s", c.argv, why)
		case c.install != "" && !strings.Contains(why, "`"+c.install+"`"):
			t.Errorf("%q: %q, want it refused naming `%s`", c.argv, why, c.install)
		case c.install != "" && !strings.Contains(why, "at run time"):
			t.Errorf("%q: %q does not say why", c.argv, why)
		}
	}
}

// An interpreter command passes only when what it loads does not depend
// on the task's cwd: the script, and any module preloaded before it, by
// absolute path; python's -m (the cwd first on its module path) is
// refused. Launchers are refused as RefuseLauncher says.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		argv []string
		want string // "": accepted
	}{
		{[]string{"/usr/bin/node", "/opt/gemini.js", "--acp"}, ""},
		{[]string{"node", "--require", "/opt/hook.js", "/opt/gemini.js", "--acp"}, ""},
		{[]string{"node", "/opt/gemini.js", "-r", "x"}, ""}, // the script's own arguments
		{[]string{"node", "gemini.js", "--acp"}, "relative path"},
		{[]string{"node", "-r", "./hook.js", "/opt/gemini.js"}, "loads a module found through each task's cwd"},
		{[]string{"node", "--import=tsx", "/opt/gemini.js"}, "loads a module found through each task's cwd"},
		{[]string{"bun", "run", "acp"}, "relative path"},
		{[]string{"bun", "--preload", "hook", "run", "/opt/gemini.js"}, "loads a module"},
		{[]string{"deno", "run", "-A", "main.ts"}, "relative path"},
		{[]string{"python3", "-m", "hermes", "acp"}, "-m finds the module through each task's cwd"},
		{[]string{"python3", "-u", "/opt/hermes/acp.py"}, ""},
		{[]string{"npx", "@google/gemini-cli"}, "at run time"},
		{[]string{"gemini", "--acp"}, ""},
	} {
		got := dispatch.CheckCommand(c.argv)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%q: %q, want %q", c.argv, got, c.want)
		}
	}
}
