package dispatch

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/model"
)

// Session modes are not trusted by their names (Claude's plan mode runs
// edits without asking), and an agent's own settings can pre-approve tools
// so that no permission request ever reaches the relay. A hardening profile
// is what the relay does about that for one adapter, as data: what
// session/new carries, what the agent's environment gets, which session
// mode or config option the relay selects, and which values it accepts,
// per task mode. Each profile was verified against the real adapter, on the
// versions it names, by the real-agent tests of cmd/relay
// (realagents_test.go); docs/agents.md explains each choice.
//
// A session whose mode (or pinned config option) is not accepted is never
// prompted: it is killed and the task ends failed/agent_unsafe_mode. A
// current_mode_update or config_option_update to an unaccepted value
// during the run stops it at once with the same code. A task mode the
// profile has no rule for is refused the same way.

// Profile is one adapter's hardening profile.
type Profile struct {
	// Name names the profile (the adapter it was written for).
	Name string
	// VerifiedOn lists the adapter versions (agentInfo.version at
	// initialize) the profile was verified on. Another version still runs
	// under the profile; the run's note says "verified on X, running Y".
	VerifiedOn []string
	// Rules holds what the profile does per task mode.
	Rules map[model.Mode]Rule
	// Verify, when set, is how the agent is verified offline under the
	// profile (relay agents verify NAME; see verify.go).
	Verify *VerifySpec
}

// Rule is what a profile does for one task mode.
type Rule struct {
	// Meta is sent as session/new's _meta.
	Meta map[string]any
	// Env is added to the agent's environment (after the daemon's own,
	// so it wins).
	Env []string
	// SetMode is the session mode selected with session/set_mode after
	// session/new ("" selects none).
	SetMode acp.SessionModeId
	// AcceptModes, when not empty, are the session modes the session may
	// be in, from before the prompt to the end of the run. An agent that
	// reports no session mode then fails the check.
	AcceptModes []acp.SessionModeId
	// Options are config options set with session/set_config_option after
	// session/new; each must read back with its value before the prompt
	// and keep it to the end of the run.
	Options []OptionPin
	// Args are appended to the agent's argv. "{dir}" in an argument is
	// replaced by the directory the relay wrote Files to.
	Args []string
	// Files are written by the relay (name → content, 0600) to a private
	// directory of its own before the agent starts: policy files the
	// agent is pointed at through Args.
	Files map[string]string
	// RefuseIfExists lists globs whose match means the profile cannot
	// hold (a system policy that overrides the relay's, code the agent
	// would run from the task's cwd): the session is refused before
	// session/new. "~" and $VARS are expanded from the daemon's
	// environment (a pattern naming an unset variable is skipped); a
	// pattern starting with "{cwd}/" is tried in the task's cwd and in
	// every directory above it.
	RefuseIfExists []string
	// Preapprove, when set, returns session/new's _meta with the tools of
	// the MCP servers the relay passes (from config, for state_changing
	// tasks) pre-approved: they are the guarded way to change state, and
	// would otherwise ask and be denied like any other write.
	Preapprove func(meta map[string]any, servers []string) map[string]any
	// Unset, when set, returns the variables to remove from the agent's
	// environment and why (an inherited value that would break or weaken
	// the session).
	Unset func() (names []string, why string)
	// ModeText, when set, is the prefix of agent message chunks by which
	// the agent reports a mode change instead of current_mode_update
	// (Gemini CLI: "[MODE_UPDATE] plan"). Such chunks update the mode and
	// are not kept in the result.
	ModeText string
	// Summary says in a few words what the rule does (relay agents, the
	// acpDenial verdict, docs).
	Summary string
}

// nonceMark in a rule's Env, Args or Options values is replaced by a
// random name made for each session (an agent name a planted config
// cannot know in advance).
const nonceMark = "{nonce}"

// precheck returns why the rule cannot hold for a session in cwd, or "".
func (r *Rule) precheck(cwd string) string {
	for _, pat := range r.RefuseIfExists {
		var globs []string
		if rel, ok := strings.CutPrefix(pat, "{cwd}/"); ok {
			for dir := filepath.Clean(cwd); ; dir = filepath.Dir(dir) {
				globs = append(globs, filepath.Join(dir, rel))
				if dir == filepath.Dir(dir) {
					break
				}
			}
		} else if g, ok := expandPath(pat); ok {
			globs = append(globs, g)
		}
		for _, g := range globs {
			if m, _ := filepath.Glob(g); len(m) > 0 {
				return fmt.Sprintf("%s exists and would override the profile's own policy", m[0])
			}
		}
	}
	return ""
}

// expandPath expands a leading "~" and $VARS; ok is false when a variable
// is unset.
func expandPath(p string) (string, bool) {
	ok := true
	p = os.Expand(p, func(v string) string {
		val, set := os.LookupEnv(v)
		if !set || val == "" {
			ok = false
		}
		return val
	})
	if rest, found := strings.CutPrefix(p, "~/"); found {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		p = filepath.Join(home, rest)
	}
	return p, ok
}

// withNonce returns the rule with nonceMark replaced by nonce.
func (r Rule) withNonce(nonce string) Rule {
	if nonce == "" {
		return r
	}
	sub := func(ss []string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = strings.ReplaceAll(s, nonceMark, nonce)
		}
		return out
	}
	r.Env, r.Args = sub(r.Env), sub(r.Args)
	pins := make([]OptionPin, len(r.Options))
	for i, p := range r.Options {
		pins[i] = OptionPin{ID: p.ID, Value: acp.SessionConfigValueId(strings.ReplaceAll(string(p.Value), nonceMark, nonce))}
	}
	r.Options = pins
	return r
}

// argv returns the agent's argv under the rule, writing its Files to dir.
func (r *Rule) argv(base []string, dir func() (string, error)) ([]string, error) {
	if len(r.Args) == 0 {
		return base, nil
	}
	d := ""
	if len(r.Files) > 0 {
		var err error
		if d, err = dir(); err != nil {
			return nil, err
		}
		for name, content := range r.Files {
			if err := writePrivate(filepath.Join(d, name), content); err != nil {
				return nil, err
			}
		}
	}
	out := slices.Clone(base)
	for _, a := range r.Args {
		out = append(out, strings.ReplaceAll(a, "{dir}", d))
	}
	return out, nil
}

// writePrivate writes a file 0600 unless it already holds content.
func writePrivate(path, content string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == content {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// OptionPin is a select config option held at one value.
type OptionPin struct {
	ID    acp.SessionConfigId
	Value acp.SessionConfigValueId
}

// noProfileSummary is what relay agents and the acpDenial verdict say of an
// agent without a profile.
const noProfileSummary = "no verified hardening profile: every permission request is still denied, but agent-side allow rules (the agent's own settings) are not controlled and no session mode is chosen"

// profiles are the verified profiles, by agent name.
var profiles = map[string]*Profile{
	"claude":   claudeProfile,
	"codex":    codexProfile,
	"gemini":   geminiProfile,
	"opencode": opencodeProfile,
}

// ProfileFor returns the hardening profile of an agent, or nil.
func ProfileFor(agent string) *Profile { return profiles[agent] }

// describe is the profile as relay agents and list_agents show it; p may
// be nil.
func (p *Profile) describe() model.AgentProfile {
	if p == nil {
		return model.AgentProfile{Summary: noProfileSummary}
	}
	out := model.AgentProfile{Name: p.Name, VerifiedOn: slices.Clone(p.VerifiedOn), Modes: map[model.Mode]string{}}
	var parts []string
	for _, m := range model.AllModes() {
		r, ok := p.Rules[m]
		if !ok {
			out.Modes[m] = "refused (agent_unsafe_mode)"
			continue
		}
		out.Modes[m] = r.Summary
		parts = append(parts, string(m)+": "+r.Summary)
	}
	out.Summary = fmt.Sprintf("hardening profile %s, verified on %s; %s", p.Name,
		strings.Join(p.VerifiedOn, ", "), strings.Join(parts, "; "))
	return out
}

// versionNote says which adapter runs under the profile.
func (p *Profile) versionNote(info *acp.Implementation) string {
	running := "an adapter that did not report its version"
	if info != nil && info.Version != "" {
		running = strings.TrimSpace(info.Name + " " + info.Version)
	}
	verified := strings.Join(p.VerifiedOn, ", ")
	if info != nil && slices.Contains(p.VerifiedOn, info.Version) {
		return fmt.Sprintf("hardening profile %s (verified on %s, running %s)", p.Name, verified, running)
	}
	return fmt.Sprintf("hardening profile %s (verified on %s, running %s: not a verified version)", p.Name, verified, running)
}

// modeOptionID is the config option by which agents that have one report
// their mode as well.
const modeOptionID acp.SessionConfigId = "mode"

// modeState is what the relay knows of a session's mode and config
// options, from session/new, its own set calls and the agent's updates.
type modeState struct {
	mode      acp.SessionModeId
	hasMode   bool
	available []acp.SessionModeId // offered at session/new
	options   map[acp.SessionConfigId]acp.SessionConfigValueId
}

func (m modeState) clone() modeState {
	m.options = maps.Clone(m.options)
	m.available = slices.Clone(m.available)
	return m
}

func (m *modeState) setOptions(opts []acp.SessionConfigOption) {
	for _, o := range opts {
		if o.Select != nil {
			if m.options == nil {
				m.options = map[acp.SessionConfigId]acp.SessionConfigValueId{}
			}
			m.options[o.Select.Id] = o.Select.CurrentValue
		}
	}
}

// unsafe returns why the session's state is not one the rule accepts, or
// "" when it is.
func (r *Rule) unsafe(m modeState) string {
	if len(r.AcceptModes) > 0 {
		if !m.hasMode {
			return fmt.Sprintf("the agent reports no session mode (accepted: %s)", quoteModes(r.AcceptModes))
		}
		if !slices.Contains(r.AcceptModes, m.mode) {
			return fmt.Sprintf("the session is in mode %q (accepted: %s)", m.mode, quoteModes(r.AcceptModes))
		}
		// An agent that also reports its mode as the config option "mode"
		// (claude-agent-acp) is held to the same values there.
		if v, ok := m.options[modeOptionID]; ok && !slices.Contains(r.AcceptModes, acp.SessionModeId(v)) {
			return fmt.Sprintf("the session's mode option is %q (accepted: %s)", v, quoteModes(r.AcceptModes))
		}
	}
	for _, pin := range r.Options {
		v, ok := m.options[pin.ID]
		switch {
		case !ok:
			return fmt.Sprintf("the agent reports no config option %q (required: %q)", pin.ID, pin.Value)
		case v != pin.Value:
			return fmt.Sprintf("config option %q is %q (required: %q)", pin.ID, v, pin.Value)
		}
	}
	return ""
}

func quoteModes(ms []acp.SessionModeId) string {
	q := make([]string, len(ms))
	for i, m := range ms {
		q[i] = fmt.Sprintf("%q", m)
	}
	return strings.Join(q, ", ")
}
