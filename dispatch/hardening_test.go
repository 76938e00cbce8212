package dispatch_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// planProfile is a test profile for the fake agent's "modes" startup:
// read_only tasks must run in mode plan (selected by the relay when
// selectPlan), and session/new carries a marker in _meta. It has no rule
// for state_changing.
func planProfile(selectPlan bool) *hardening.Profile {
	r := hardening.Rule{
		Meta:        map[string]any{"test": map[string]any{"profile": "plan"}},
		AcceptModes: []acp.SessionModeId{"plan"},
		ModeText:    "[MODE] ",
		Summary:     "mode plan",
	}
	if selectPlan {
		r.SetMode = "plan"
	}
	return &hardening.Profile{Name: "test-plan", VerifiedOn: []string{"0.0.1"},
		Rules: map[model.Mode]hardening.Rule{model.ModeReadOnly: r}}
}

// wantUnsafe checks an agent_unsafe_mode outcome that never reached the
// prompt: not started, no prompt event at the agent.
func wantUnsafeBeforePrompt(t *testing.T, e *env, out model.Outcome, r *recorder, inMessage string) {
	t.Helper()
	wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
	if !strings.Contains(out.Message, inMessage) || !strings.Contains(out.Message, "before the prompt") {
		t.Fatalf("message %q lacks %q and 'before the prompt'", out.Message, inMessage)
	}
	if calls, _, _ := r.snapshot(); len(calls) != 1 || calls[0] != "finished" {
		t.Fatalf("reporter calls = %v, want only finished (never working)", calls)
	}
	if n := len(e.events(t, "prompt")); n != 0 {
		t.Fatalf("the agent got %d prompts", n)
	}
}

func TestProfileSelectsAndChecksTheMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, r := e.run(t, e.task("guarded", "mode", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.SessionMode != "plan" || out.Result.Text != "mode:plan" {
		t.Fatalf("session mode %q reply %q", out.Result.SessionMode, out.Result.Text)
	}
	news := e.events(t, "session_new")
	if len(news) != 1 || !strings.Contains(toJSON(t, news[0]["meta"]), `"profile":"plan"`) {
		t.Fatalf("session/new carried %v, want the profile's _meta", news)
	}
	r.mu.Lock()
	notes := append([]string(nil), r.notes...)
	r.mu.Unlock()
	if len(notes) != 1 || !strings.Contains(notes[0], `session mode "plan"`) ||
		!strings.Contains(notes[0], "hardening profile test-plan (verified on 0.0.1, running") ||
		!strings.Contains(notes[0], "not a verified version") {
		t.Fatalf("working note = %q", notes)
	}
}

func TestProfileRefusesAnUnacceptedModeBeforeThePrompt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		agent, inMessage string
	}{
		{"lazy", `the session is in mode "default" (accepted: "plan")`},
		{"stubborn", `session/set_mode "plan" failed`},
		{"modeless", `the agent does not offer session mode "plan"`},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, r := e.run(t, e.task(c.agent, "echo hi", model.ModeReadOnly))
			wantUnsafeBeforePrompt(t, e, out, r, c.inMessage)
		})
	}
}

// An agent that dies while its mode is being set crashed; it did not
// refuse the mode: agent_crashed with its last stderr line, not
// agent_unsafe_mode (a loaded machine once showed the latter).
func TestAgentDyingAtSetModeCrashed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("fragile", "echo hi", model.ModeReadOnly))
	if out.State != model.StateFailed || out.Code != model.CodeAgentCrashed || !strings.Contains(out.Message, "dying at set_mode") {
		t.Fatalf("outcome %s/%s %q, want failed/agent_crashed quoting the agent's stderr", out.State, out.Code, out.Message)
	}
	if n := len(e.events(t, "prompt")); n != 0 {
		t.Fatalf("the agent was prompted %d times", n)
	}
}

func TestProfileWithoutARuleForTheModeRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, r := e.run(t, e.task("guarded", "echo hi", model.ModeStateChanging))
	wantUnsafeBeforePrompt(t, e, out, r, "no rule for state_changing")
	if n := len(e.events(t, "session_new")); n != 0 {
		t.Fatalf("session/new was sent %d times for a mode the profile refuses", n)
	}
}

func TestProfileConfigOptionIsSetAndVerified(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("optioned", "mode", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.Text != "mode:plan" {
		t.Fatalf("reply %q, want mode:plan", out.Result.Text)
	}
	sets := e.events(t, "set_config_option")
	if len(sets) != 1 || sets[0]["id"] != "mode" || sets[0]["value"] != "plan" {
		t.Fatalf("set_config_option calls = %v", sets)
	}
}

// A switch to an unaccepted mode during the run stops the agent at once
// (not after a cancel grace) with agent_unsafe_mode.
func TestProfileStopsASwitchDuringTheRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ agent, prompt, inMessage string }{
		{"guarded", "switch-mode bypassPermissions", `mode "bypassPermissions"`},
		{"optioned", "switch-option build", `config option "mode" is "build"`},
		{"guarded", "text-mode yolo", `mode "yolo"`},
	} {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, r := e.run(t, e.task(c.agent, c.prompt, model.ModeReadOnly))
			wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
			if !strings.Contains(out.Message, c.inMessage) || !strings.Contains(out.Message, "during the run") {
				t.Fatalf("message %q lacks %q", out.Message, c.inMessage)
			}
			if calls, _, _ := r.snapshot(); len(calls) != 2 || calls[0] != "started" {
				t.Fatalf("reporter calls = %v", calls)
			}
			if n := len(e.events(t, "cancel")); n != 0 {
				t.Fatalf("the relay sent session/cancel (%d) instead of killing at once", n)
			}
		})
	}
}

// Agents without a profile get no mode chosen by its name, and the note
// says that their allow rules are not controlled.
func TestNoProfileChoosesNoMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, r := e.run(t, e.task("modes", "mode", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.Text != "mode:default" || len(e.events(t, "set_mode")) != 0 {
		t.Fatalf("reply %q, set_mode %v: a mode was chosen for an agent without a profile", out.Result.Text, e.events(t, "set_mode"))
	}
	r.mu.Lock()
	note := strings.Join(r.notes, "")
	r.mu.Unlock()
	if !strings.Contains(note, "not controlled") {
		t.Fatalf("working note %q does not say allow rules are not controlled", note)
	}
	info, _ := e.reg.Agent(t.Context(), "modes")
	if info.Profile.Name != "" || !strings.Contains(info.Profile.Summary, "not controlled") {
		t.Fatalf("registry profile = %+v", info.Profile)
	}
	// claude's own profiles: one per adapter generation, the current one
	// applying to an adapter not identified on disk until it reports.
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "claude", Command: []string{e.bin}, Enabled: true}}, nil, nil)
	info, _ = reg.Agent(t.Context(), "claude")
	if info.Profile.Name != "claude-agent-acp 0.101.x" || len(info.Profile.VerifiedOn) == 0 ||
		!slices.Equal(info.Profile.Generations, []string{"@agentclientprotocol/claude-agent-acp 0.101.x", "@zed-industries/claude-agent-acp 0.23.x"}) {
		t.Fatalf("claude's profile = %+v", info.Profile)
	}
}

// A failed run quotes the agent's last meaningful stderr line, sanitized
// (no terminal escapes, no stack frames).
func TestFailureQuotesTheAgentsStderr(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("fake", "stderr-crash", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeAgentCrashed)
	const want = "the agent's stderr ended with: "
	i := strings.Index(out.Message, want)
	if i < 0 {
		t.Fatalf("message %q does not quote the agent's stderr", out.Message)
	}
	tail := out.Message[i+len(want):]
	if !strings.HasSuffix(tail, "Error: the model endpoint refused the key") || strings.Contains(tail, "\x1b") || strings.Contains(tail, "fake.js") {
		t.Fatalf("stderr tail %q: want the error line, sanitized, without the stack frame", tail)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A rule's Files are written 0600 to the dispatcher's own directory and
// its Args point the agent at them; a RefuseIfExists match refuses the
// session before session/new.
func TestProfileFilesArgsAndRefusal(t *testing.T) {
	t.Parallel()
	sysPolicy := filepath.Join(t.TempDir(), "system.toml")
	if err := os.WriteFile(sysPolicy, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	withFiles := planProfile(true)
	r := withFiles.Rules[model.ModeReadOnly]
	r.Args = []string{"--policy", "{dir}/p.toml"}
	r.Files = map[string]string{"p.toml": "deny = true\n"}
	withFiles.Rules = map[model.Mode]hardening.Rule{model.ModeReadOnly: r}
	overridden := planProfile(true)
	r2 := overridden.Rules[model.ModeReadOnly]
	r2.RefuseIfExists = []string{filepath.Join(filepath.Dir(sysPolicy), "*.toml")}
	overridden.Rules = map[model.Mode]hardening.Rule{model.ModeReadOnly: r2}

	bin := dispatchtest.BuildFakeAgent(t)
	e := newEnv(t, func(o *dispatch.Options) {
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{
			{Name: "files", Command: []string{bin, "modes"}, Enabled: true, Profiles: []*hardening.Profile{withFiles}},
			{Name: "overridden", Command: []string{bin, "modes"}, Enabled: true, Profiles: []*hardening.Profile{overridden}},
		}, nil, nil)
	})
	out, _ := e.run(t, e.task("files", "mode", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	policy := filepath.Join(e.home, "profiles", "p.toml")
	starts := e.events(t, "start")
	if len(starts) != 1 || toJSON(t, starts[0]["args"]) != toJSON(t, []string{"modes", "--policy", policy}) {
		t.Fatalf("agent args = %v, want [modes --policy %s]", starts, policy)
	}
	if fi, err := os.Stat(policy); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("policy file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(policy); string(b) != "deny = true\n" {
		t.Fatalf("policy file holds %q", b)
	}

	prompts := len(e.events(t, "prompt"))
	out, _ = e.run(t, e.task("overridden", "echo hi", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
	if !strings.Contains(out.Message, sysPolicy+" exists and would override the profile's own policy") {
		t.Fatalf("message %q", out.Message)
	}
	if n := len(e.events(t, "prompt")); n != prompts {
		t.Fatalf("the overridden agent was prompted")
	}
}

// An agent whose only no aborts the turn (codex-acp's "abort" option)
// ends it cancelled after a denial: agent_refused, not agent_crashed.
func TestCancelledAfterADenialIsARefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("fake", "perm-abort", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeAgentRefused)
	if !strings.Contains(out.Message, "after the relay denied 1 permission request(s)") {
		t.Fatalf("message %q", out.Message)
	}
}

// Every profile's inline JSON configuration is valid JSON, and OpenCode's
// permissions list "*" first.
func TestProfilesInlineConfigIsValid(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"claude", "codex", "gemini", "opencode"} {
		ps := hardening.ProfilesFor(name)
		if len(ps) == 0 {
			t.Fatalf("no profile for %s", name)
		}
		for _, p := range ps {
			for mode, r := range p.Rules {
				for _, kv := range r.Env {
					k, v, _ := strings.Cut(kv, "=")
					if strings.HasPrefix(v, "{") && !json.Valid([]byte(v)) {
						t.Errorf("%s %s: %s is not valid JSON", name, mode, k)
					}
					if k == "OPENCODE_CONFIG_CONTENT" && !strings.HasPrefix(v, `{"permission":{"*":"deny"`) {
						t.Errorf("opencode's permissions must start with \"*\": %.60s", v)
					}
				}
				if r.Summary == "" || len(r.AcceptModes)+len(r.Options) == 0 {
					t.Errorf("%s %s: a verified rule must name the modes it accepts and say what it does", name, mode)
				}
			}
		}
	}
}

// The configured MCP servers reach the agent in session/new for
// state_changing tasks only.
func TestMCPServersOnlyForStateChanging(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mode model.Mode
		want string
	}{
		{model.ModeReadOnly, `null`},
		{model.ModeStateChanging, `["hai=hai-mcp serve"]`},
	} {
		e := newEnv(t)
		out, _ := e.run(t, e.task("served", "echo hi", c.mode))
		wantOutcome(t, out, model.StateCompleted, "")
		news := e.events(t, "session_new")
		if len(news) != 1 || toJSON(t, news[0]["servers"]) != c.want {
			t.Errorf("%s: session/new servers = %v, want %s", c.mode, news, c.want)
		}
	}
}

// A hostile agent's tool-call ids, titles and option ids are kept clipped:
// one task's record stays small however large they are.
func TestToolCallFieldsAreClipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, r := e.run(t, e.task("fake", "big-tool 1048576", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if len(out.Result.ToolCalls) != 1 {
		t.Fatalf("tool calls = %d", len(out.Result.ToolCalls))
	}
	tc := out.Result.ToolCalls[0]
	if len(tc.ID) > 600 || len(tc.Title) > 600 || !strings.Contains(tc.Title, "bytes cut]") {
		t.Fatalf("kept tool call: id %d bytes, title %d bytes (%.40q…)", len(tc.ID), len(tc.Title), tc.Title)
	}
	_, denials, _ := r.snapshot()
	if len(denials) != 1 || len(denials[0].ToolCallTitle) > 600 || len(denials[0].OptionID) > 600 || denials[0].ToolCallKind != "edit" {
		t.Fatalf("denials = %d, first title %d bytes, option id %d bytes", len(denials), len(denials[0].ToolCallTitle), len(denials[0].OptionID))
	}
}
