package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
)

// Cursor and Hermes do not install where the relay is built: their
// profiles are run against the fake agent's stand-ins (cmd/testfakes/
// fakeagent, standins.go), which misbehave as the agents' docs say they
// do. cursorhermes_unhardened_test.go shows the misbehaviour itself.

// standInEnv is a dispatcher whose cursor and hermes are the stand-ins,
// under their real profiles (not identified on disk: guessed, then
// confirmed at initialize), with a HOME of their own. tweak changes the
// options further.
type standInEnv struct {
	*env
	agentHome string // the agents' HOME
	outside   string // a directory outside the cwd
}

func newStandInEnv(t *testing.T, tweak ...func(*dispatch.Options)) *standInEnv {
	t.Helper()
	se := &standInEnv{agentHome: t.TempDir(), outside: t.TempDir()}
	se.env = newEnv(t, append([]func(*dispatch.Options){func(o *dispatch.Options) {
		bin := dispatchtest.BuildFakeAgent(t)
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{
			{Name: "cursor", Command: []string{bin, "cursor"}, Enabled: true},
			{Name: "hermes", Command: []string{bin, "hermes"}, Enabled: true},
		}, nil, nil)
		o.Env = append(o.Env, "HOME="+se.agentHome)
	}}, tweak...)...)
	// The masks hide what is created in the cwd's parents after the
	// start: the agent's event log must exist before.
	if err := os.WriteFile(se.agentLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return se
}

// cursorScript writes inside and outside the cwd, runs a command and asks
// Cursor's own questions.
func (se *standInEnv) cursorScript() string {
	return strings.Join([]string{
		"write " + filepath.Join(se.cwd, "inside.txt") + " pwned",
		"write " + filepath.Join(se.outside, "outside.txt") + " pwned",
		"shell touch " + filepath.Join(se.cwd, "shell-ran"),
		"ask_question which file should I change?",
		"create_plan change everything",
	}, "\n")
}

// hermesScript writes, runs a command and code, and remembers.
func (se *standInEnv) hermesScript() string {
	return strings.Join([]string{
		"write_file " + filepath.Join(se.cwd, "inside.txt") + " pwned",
		"terminal touch " + filepath.Join(se.cwd, "terminal-ran"),
		"execute_code touch " + filepath.Join(se.cwd, "code-ran"),
		"memory the user's secret plan",
	}, "\n")
}

func pathExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// plant writes a file under dir.
func plant(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ownDirs lists what is left of the sessions' own directories.
func ownDirs(t *testing.T, home string) []string {
	t.Helper()
	var left []string
	for _, pat := range []string{"cursor_config_dir-*", "hermes_home-*"} {
		m, _ := filepath.Glob(filepath.Join(home, "profiles", pat))
		left = append(left, m...)
	}
	return left
}

// Under its profile a read_only Cursor session writes nothing and runs
// nothing: its config is the relay's (approvalMode allowlist, writes,
// commands, fetches and MCP denied), not the user's nor the project's
// (masked), its mode is plan (no write), its config refuses the command,
// and its own blocking requests are declined at once and counted as
// denials.
func TestCursorProfileHoldsReadOnly(t *testing.T) {
	t.Parallel()
	se := newStandInEnv(t)
	plant(t, se.agentHome, ".cursor/cli-config.json", `{"approvalMode":"unrestricted","permissions":{"allow":["Shell(*)","Write(**)"],"deny":[]}}`)
	plant(t, se.cwd, ".cursor/cli.json", `{"permissions":{"allow":["Shell(*)"]}}`)

	out, r := se.run(t, se.task("cursor", se.cursorScript(), model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	for _, f := range []string{filepath.Join(se.cwd, "inside.txt"), filepath.Join(se.outside, "outside.txt"), filepath.Join(se.cwd, "shell-ran")} {
		if pathExists(f) {
			t.Errorf("%s exists: the profile did not hold", f)
		}
	}
	if modes := se.events(t, "set_mode"); len(modes) != 1 || modes[0]["mode"] != "plan" || out.Result.SessionMode != "plan" {
		t.Errorf("set_mode %v, session mode %q: want plan", modes, out.Result.SessionMode)
	}
	news := se.events(t, "session_new")
	if len(news) != 1 {
		t.Fatalf("session/new %d times", len(news))
	}
	n := news[0]
	deny, _ := n["deny"].([]any)
	if dir, _ := n["config_dir"].(string); !strings.HasPrefix(dir, filepath.Join(se.home, "profiles")) || n["user_config"] != true ||
		n["approval"] != "allowlist" || !slices.Contains(deny, any("Write(**)")) || !slices.Contains(deny, any("Shell(*)")) ||
		!slices.Contains(deny, any("Mcp(*:*)")) || !slices.Contains(deny, any("WebFetch(*)")) {
		t.Errorf("Cursor's config: %v, want the relay's own (allowlist, Write, Shell, WebFetch, Mcp denied)", n)
	}
	if n["project_config"] != false {
		t.Errorf("the cwd's .cursor/cli.json was seen: %v (want it masked)", n)
	}
	// The write refused by the mode, the command by the relay's deny list,
	// without asking; Cursor's two requests declined and counted.
	for _, ev := range se.events(t, "standin") {
		res, _ := ev["result"].(string)
		if ev["ran"] != false || (ev["tool"] == "Write" && !strings.Contains(res, "blocked in mode plan")) ||
			(ev["tool"] == "Shell" && res != "refused: denied by permissions") {
			t.Errorf("tool call %v", ev)
		}
	}
	_, denials, _ := r.snapshot()
	var titles []string
	for _, d := range denials {
		titles = append(titles, d.ToolCallKind+":"+d.ToolCallTitle+":"+d.Outcome)
	}
	if len(denials) != 2 ||
		!slices.Contains(titles, "extension:agent request cursor/ask_question:declined") ||
		!slices.Contains(titles, "extension:agent request cursor/create_plan:declined") {
		t.Errorf("denials %q, want cursor/ask_question and cursor/create_plan declined", titles)
	}
	exts := se.events(t, "cursor_ext")
	if len(exts) != 2 {
		t.Fatalf("cursor/* requests answered %d times, want 2", len(exts))
	}
	for _, e := range exts {
		if e["code"] != float64(-32601) {
			t.Errorf("%v: want an error answer (method not found)", e)
		}
	}
	if left := ownDirs(t, se.home); len(left) != 0 {
		t.Errorf("the session's own config dir outlived it: %v", left)
	}
}

// Cursor's third-party adapter (it runs cursor-agent --force) is refused
// before session/new, whether identified on disk or only at initialize,
// and the message says why.
func TestCursorThirdPartyAdapterRefused(t *testing.T) {
	t.Parallel()
	fake := newEnv(t).bin
	for _, pkg := range []string{"@blowmage/cursor-agent-acp", ""} {
		t.Run("package="+pkg, func(t *testing.T) {
			t.Parallel()
			bin := installAdapter(t, fake, t.TempDir(), pkg, "0.7.1", "cursor-agent-acp", "cursor-agent-acp", "0.7.1")
			e := newEnv(t, func(o *dispatch.Options) {
				o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "cursor", Command: []string{bin}, Enabled: true}}, nil, nil)
			})
			out, _ := e.run(t, e.task("cursor", "echo hello", model.ModeReadOnly))
			wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
			for _, w := range []string{"cursor-agent-acp", "--force", "run Cursor's own `agent acp` instead"} {
				if !strings.Contains(out.Message, w) {
					t.Errorf("message %q lacks %q", out.Message, w)
				}
			}
			if n := len(e.events(t, "session_new")); n != 0 {
				t.Errorf("session/new sent %d times to a refused adapter", n)
			}
		})
	}
}

// Under its profile a read_only Hermes session writes nothing, runs no
// command or code and remembers nothing in the user's Hermes home: it
// gets a HERMES_HOME of its own holding only the model settings the relay
// carries over and approvals manual, execute_code asks, configured MCP
// servers are skipped, and its mode is plan.
func TestHermesProfileHoldsReadOnly(t *testing.T) {
	t.Parallel()
	se := newStandInEnv(t)
	plant(t, se.agentHome, ".hermes/config.yaml", `# mine
model:
  provider: openrouter
  default: "anthropic/claude-sonnet-4" # the one I pay for
  base_url: 'https://openrouter.ai/api/v1'
  api_key: sk-secret
approvals:
  mode: off
mcp_servers:
  evil:
    command: /bin/evil
memory:
  memory_enabled: true
`)
	out, _ := se.run(t, se.task("hermes", se.hermesScript(), model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	for _, f := range []string{"inside.txt", "terminal-ran", "code-ran"} {
		if pathExists(filepath.Join(se.cwd, f)) {
			t.Errorf("%s exists: the profile did not hold", f)
		}
	}
	if pathExists(filepath.Join(se.agentHome, ".hermes", "memories")) {
		t.Errorf("Hermes wrote memories into the user's home")
	}
	if modes := se.events(t, "set_mode"); len(modes) != 1 || modes[0]["mode"] != "plan" || out.Result.SessionMode != "plan" {
		t.Errorf("set_mode %v, session mode %q: want plan", modes, out.Result.SessionMode)
	}
	news := se.events(t, "session_new")
	if len(news) != 1 {
		t.Fatalf("session/new %d times", len(news))
	}
	n := news[0]
	if h, _ := n["hermes_home"].(string); !strings.HasPrefix(h, filepath.Join(se.home, "profiles")) ||
		n["approvals"] != "manual" || n["exec_ask"] != "1" || n["skip_mcp"] != "1" {
		t.Errorf("Hermes' setup: %v, want its own HERMES_HOME, approvals manual, HERMES_EXEC_ASK=1, configured MCP skipped", n)
	}
	want := `# Written by HAI-Relay for one session: the model settings of your Hermes config, and nothing else.
model:
  provider: "openrouter"
  default: "anthropic/claude-sonnet-4"
  base_url: "https://openrouter.ai/api/v1"
approvals:
  mode: manual
`
	if got, _ := n["config_text"].(string); got != want {
		t.Errorf("the config.yaml the relay wrote:\n%s\nwant only the model settings and approvals manual:\n%s", got, want)
	}
	if left := ownDirs(t, se.home); len(left) != 0 {
		t.Errorf("the session's own HERMES_HOME outlived it: %v", left)
	}
}

// A Hermes config whose model section the relay cannot read for sure is
// not guessed at: the session fails to start, saying where and why.
func TestHermesUnreadableModelConfig(t *testing.T) {
	t.Parallel()
	se := newStandInEnv(t)
	plant(t, se.agentHome, ".hermes/config.yaml", "model: {default: x, provider: y}\n")
	err := se.d.Dispatch(context.Background(), se.task("hermes", "echo hi", model.ModeReadOnly), newRecorder())
	if model.ErrorCode(err) != model.CodeDispatchFailed || !strings.Contains(err.Error(), "config.yaml: model: a YAML form the relay does not read") {
		t.Errorf("dispatch: %v, want dispatch_failed naming the config and why", err)
	}
	if n := len(se.events(t, "start")); n != 0 {
		t.Errorf("the agent was started %d times", n)
	}
}

// Hermes' installer puts it in ~/.hermes/hermes-agent, and .hermes is
// masked in the cwd and every directory above it: the installation alone
// is given back, so Hermes still starts when the cwd is under its home;
// the project's plugins stay hidden, and the variable that would load
// them never reaches Hermes.
func TestHermesInstalledUnderAMaskedHome(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cwd := filepath.Join(dir, "src", "proj")
	bin := filepath.Join(dir, ".hermes", "hermes-agent", "venv", "bin", "hermes")
	plant(t, dir, ".hermes/hermes-agent/venv/bin/hermes", "#!/bin/sh\nexec "+dispatchtest.BuildFakeAgent(t)+" hermes \"$@\"\n")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	plant(t, dir, ".hermes/plugins/evil.py", "raise SystemExit")
	plant(t, cwd, ".hermes/plugins/evil.py", "raise SystemExit")
	e := newEnv(t, func(o *dispatch.Options) {
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "hermes", Command: []string{bin}, Enabled: true}}, nil, nil)
		o.Env = append(o.Env, "HOME="+dir, "HERMES_ENABLE_PROJECT_PLUGINS=1", "FAKEAGENT_ENVLOG=HERMES_ENABLE_PROJECT_PLUGINS,HERMES_EXEC_ASK")
	})
	if err := os.WriteFile(e.agentLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	task := e.task("hermes", "read "+filepath.Join(cwd, ".hermes", "plugins", "evil.py"), model.ModeReadOnly)
	task.Cwd = cwd
	out, _ := e.run(t, task)
	wantOutcome(t, out, model.StateCompleted, "")
	if strings.Contains(out.Result.Text, "SystemExit") {
		t.Errorf("the cwd's .hermes was seen: %q", out.Result.Text)
	}
	if n := e.events(t, "session_new"); len(n) != 1 || n[0]["project_plugins"] != false {
		t.Errorf("session_new %v: want no project plugins", n)
	}
	if st := e.events(t, "start"); len(st) != 1 || toJSON(t, st[0]["env"]) != `{"HERMES_EXEC_ASK":"1"}` {
		t.Errorf("Hermes started with %v, want HERMES_EXEC_ASK=1 and no HERMES_ENABLE_PROJECT_PLUGINS", st)
	}
}

// The daemon tests' cursor and hermes (dispatchtest.FakeAdapter: the
// plain fake agent behind a bare script reporting the name and version a
// real one would) run under their profiles: guessed before the start,
// confirmed at initialize.
func TestCursorHermesTestAdapters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) {
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{
			{Name: "cursor", Command: []string{dispatchtest.FakeAdapter(t, "cursor")}, Enabled: true},
			{Name: "hermes", Command: []string{dispatchtest.FakeAdapter(t, "hermes")}, Enabled: true},
		}, nil, nil)
		o.Env = append(o.Env, "HOME="+t.TempDir())
	})
	if err := os.WriteFile(e.agentLog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for agent, note := range map[string]string{
		"cursor": "hardening profile cursor-agent 2025+ (verified on no release (scripted stand-in only), running cursor-agent 2026.10.22-27dcf5f",
		"hermes": "hardening profile hermes-agent 0.x (verified on no release (scripted stand-in only), running hermes-agent 0.21.3",
	} {
		out, r := e.run(t, e.task(agent, "echo hello", model.ModeReadOnly))
		wantOutcome(t, out, model.StateCompleted, "")
		r.mu.Lock()
		notes := strings.Join(r.notes, "")
		r.mu.Unlock()
		if !strings.Contains(notes, note) || out.Result.SessionMode != "plan" {
			t.Errorf("%s: note %q, mode %q; want %q and plan", agent, notes, out.Result.SessionMode, note)
		}
		out, _ = e.run(t, e.task(agent, "echo hello", model.ModeStateChanging))
		wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
	}
}
