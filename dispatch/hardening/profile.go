package hardening

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
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
// (realagents_test.go); docs/agents/ explains each choice.
//
// A session whose mode (or pinned config option) is not accepted is never
// prompted: it is killed and the task ends failed/agent_unsafe_mode. A
// current_mode_update or config_option_update to an unaccepted value
// during the run stops it at once with the same code. A task mode the
// profile has no rule for is refused the same way.

// Profile is the hardening profile of one adapter generation: a package
// (and the names the adapter reports at initialize) and a version range.
// An agent has one profile per generation it supports (ProfilesFor); the
// relay picks the one for the adapter actually installed and running, and
// refuses an adapter no profile covers rather than apply another
// generation's rule (see Choose).
type Profile struct {
	// Name names the profile: the adapter and its generation
	// ("claude-agent-acp 0.101.x").
	Name string
	// Packages are the npm package names (package.json "name") and the
	// agentInfo names (at initialize) of the adapters the profile covers.
	// Empty: any adapter (test fakes).
	Packages []string
	// AnyName: the names the adapter reports are not documented (Cursor's
	// agent, a native binary without a package.json): the profile covers
	// an adapter of any name whose version is in Versions, but those
	// refusedAdapters names. Packages then only name the generation.
	AnyName bool
	// Versions is the range of adapter versions the profile covers.
	Versions VersionRange
	// VerifiedOn lists the adapter versions the profile was verified on in
	// CI (the pinned versions of interop/). Another version of the range
	// still runs under the profile; the run's note says "verified on X,
	// running Y: not a verified version".
	VerifiedOn []string
	// Install is how a user installs a version the profile covers, for
	// the message that refuses an uncovered one.
	Install string
	// Rules holds what the profile does per task mode.
	Rules map[model.Mode]Rule
	// Verify, when set, is how the agent is verified offline under the
	// profile (relay agents verify NAME; see package dispatch/verify).
	Verify *VerifySpec
}

// Covers reports whether the profile is for the adapter that calls itself
// name (a package name or an agentInfo name) at version.
func (p *Profile) Covers(name, version string) bool {
	if p.AnyName {
		_, refused := refusedAdapters[name]
		return !refused && p.Versions.Contains(version)
	}
	if len(p.Packages) == 0 {
		return true
	}
	return slices.Contains(p.Packages, name) && p.Versions.Contains(version)
}

// generation names the adapter generation the profile covers.
func (p *Profile) generation() string {
	if len(p.Packages) == 0 {
		return p.Name
	}
	return p.Packages[0] + " " + p.Versions.String()
}

// Rule is what a profile does for one task mode.
type Rule struct {
	// Meta is sent as session/new's _meta.
	Meta map[string]any
	// Env is added to the agent's environment (after the daemon's own,
	// so it wins).
	Env []string
	// EnvJSON names variables that hold a JSON object, with keys the
	// relay sets in it: the object the daemon's environment holds (if
	// any) with these keys merged over it, recursively, so that what the
	// user configured there stays and what the profile pins wins.
	EnvJSON map[string]map[string]any
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
	// every directory above it, the cwd's symlinks resolved.
	RefuseIfExists []string
	// Masks hide paths from the agent, in a mount namespace of its own,
	// race-free (mask.go): directories where code or rules the agent
	// would load could be planted at any moment, the check before the
	// start notwithstanding.
	Masks []Mask
	// Preapprove, when set, returns session/new's _meta with the tools of
	// the MCP servers the relay passes (from config, for state_changing
	// tasks) pre-approved: they are the guarded way to change state, and
	// would otherwise ask and be denied like any other write.
	Preapprove func(meta map[string]any, servers []string) map[string]any
	// Unset, when set, returns the variables to remove from the agent's
	// environment and why (an inherited value that would break or weaken
	// the session).
	Unset func() (names []string, why string)
	// OwnDir, when set, is a directory of the session's own, made fresh
	// before the agent starts and removed when the session ends, holding
	// only the files the relay writes there, and the variable that points
	// the agent at it (Cursor's CURSOR_CONFIG_DIR, Hermes' HERMES_HOME).
	OwnDir *OwnDir
	// Home lists what the agent needs of its user's home to run at all
	// (its login, the config it reads at start), as paths relative to the
	// home, files or directories. Every agent runs with a home of its own
	// (HOME, and XDG_DATA_HOME, XDG_STATE_HOME and XDG_CACHE_HOME in it),
	// made fresh for the task and removed when it ends: the only place
	// but its scratch where it can write. These paths are copied into it
	// first (each at most 64 MiB; what is missing is
	// skipped), so that nothing the agent writes there reaches the user's
	// files, and no shell startup file of the user's runs. Its config
	// directory (XDG_CONFIG_HOME) stays the user's, read-only.
	Home []string
	// HomeVars points variables into the agent's home (CODEX_HOME →
	// ".codex"), each relative to it: a path of Home under it is copied
	// from the variable's value in the daemon's environment when set.
	HomeVars map[string]string
	// OwnSandbox says the agent runs a bubblewrap sandbox of its own for
	// its tools (Codex): the relay's sandbox then leaves its Landlock step
	// out (Landlock forbids the mounts bubblewrap makes), and writes and
	// signals are held by the relay's namespaces alone.
	OwnSandbox bool
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

// Precheck returns why the rule cannot hold for a session in cwd, or "".
func (r *Rule) Precheck(cwd string) string {
	for _, pat := range r.RefuseIfExists {
		var globs []string
		if rel, ok := strings.CutPrefix(pat, "{cwd}/"); ok {
			dirs, err := cwdAndAbove(cwd)
			if err != nil {
				return fmt.Sprintf("the cwd %s cannot be checked: %v", cwd, err)
			}
			for _, dir := range dirs {
				globs = append(globs, filepath.Join(dir, rel))
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

// WithNonce returns the rule with nonceMark replaced by nonce.
func (r Rule) WithNonce(nonce string) Rule {
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

// OptionPin is a select config option held at one value.
type OptionPin struct {
	ID    acp.SessionConfigId
	Value acp.SessionConfigValueId
}

// NoProfileSummary is what relay agents and the acpDenial verdict say of an
// agent without a profile.
const NoProfileSummary = "no verified hardening profile: every permission request is still denied, but agent-side allow rules (the agent's own settings) are not controlled and no session mode is chosen"

// profiles are the verified profiles, by agent name: one per adapter
// generation, the current generation first.
var profiles = map[string][]*Profile{
	"claude":   {claudeACP, claudeZed},
	"codex":    {codexACP, codexZed},
	"gemini":   {geminiProfile},
	"opencode": {opencodeProfile},
	"cursor":   {cursorProfile},
	"hermes":   {hermesProfile},
}

// ProfilesFor returns the hardening profiles of an agent (none for an
// agent without a verified profile).
func ProfilesFor(agent string) []*Profile { return slices.Clone(profiles[agent]) }

// Choice is which of an agent's profiles applies to an adapter.
type Choice struct {
	// Profile is the one that applies; nil: none.
	Profile *Profile
	// Refused says why none applies although the agent has profiles: it
	// names the adapter, its version and the fix. "" otherwise.
	Refused string
}

// Pick returns the profile an adapter's session launches under, before
// the adapter reports itself: the one covering pkg at version, as found
// on disk, or, for an adapter not identified there (pkg "": a wrapper
// script, a binary without a package.json), the current generation's
// (a profile covering any adapter first), a guess initialize must confirm.
func Pick(agent string, ps []*Profile, pkg, version string) (c Choice, guessed bool) {
	switch {
	case len(ps) == 0:
		return Choice{}, false
	case pkg != "":
		return Choose(agent, ps, pkg, version), false
	}
	if c := Choose(agent, ps, "", ""); c.Profile != nil {
		return c, true
	}
	return Choice{Profile: ps[0]}, true
}

// choose picks the profile of ps that covers the adapter calling itself
// name (a package name or an agentInfo name) at version. An agent with
// profiles whose adapter none covers is refused, never run under another
// generation's rule.
func Choose(agent string, ps []*Profile, name, version string) Choice {
	if len(ps) == 0 {
		return Choice{}
	}
	for _, p := range ps {
		if p.Covers(name, version) {
			return Choice{Profile: p}
		}
	}
	what := strings.TrimSpace(name + " " + version)
	if name == "" {
		what = "an adapter that names no package"
	}
	var gens, fixes []string
	for _, p := range ps {
		gens = append(gens, fmt.Sprintf("%s (verified on %s)", p.generation(), strings.Join(p.VerifiedOn, ", ")))
		if p.Install != "" {
			fixes = append(fixes, p.Install)
		}
	}
	msg := fmt.Sprintf("the adapter is %s, and no hardening profile of %s covers it (the profiles cover %s)",
		what, agent, strings.Join(gens, "; "))
	if r, ok := supersededPackages[name]; ok {
		msg += "; " + name + " is superseded by " + r
	}
	if why, ok := refusedAdapters[name]; ok {
		msg += "; " + name + " is refused: " + why
	}
	if len(fixes) > 0 {
		msg += "; install a covered adapter: " + strings.Join(fixes, ", or ")
	}
	return Choice{Refused: msg}
}

// generations lists the adapter generations ps cover.
func generations(ps []*Profile) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.generation())
	}
	return out
}

// DescribeChoice is the profile that applies to the installed adapter as
// relay agents and list_agents show it.
func DescribeChoice(ps []*Profile, c Choice, installed string) model.AgentProfile {
	out := c.Profile.describe()
	if len(ps) > 0 {
		out.Generations = generations(ps)
	}
	switch {
	case c.Profile != nil:
		out.VerifiedInCI = slices.Contains(c.Profile.VerifiedOn, installed)
	case c.Refused != "":
		out.Summary = "refused (agent_unsafe_mode): " + c.Refused
	}
	return out
}

// describe is the profile as relay agents and list_agents show it; p may
// be nil.
func (p *Profile) describe() model.AgentProfile {
	if p == nil {
		return model.AgentProfile{Summary: NoProfileSummary}
	}
	out := model.AgentProfile{Name: p.Name, VerifiedOn: slices.Clone(p.VerifiedOn), Modes: map[model.Mode]string{}}
	if len(p.Packages) > 0 {
		out.Covers = p.generation()
	}
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

// VersionNote says which adapter runs under the profile.
func (p *Profile) VersionNote(info *acp.Implementation) string {
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

// SameLaunch reports whether rules a and b launch an agent the same way
// (environment, arguments, files, removed variables), so that a session
// launched under one may run under the other.
func SameLaunch(a, b *Rule) bool {
	if a == nil || b == nil {
		return a == b
	}
	fn := func(f func() ([]string, string)) uintptr {
		if f == nil {
			return 0
		}
		return reflect.ValueOf(f).Pointer()
	}
	return slices.Equal(a.Env, b.Env) && slices.Equal(a.Args, b.Args) && maps.Equal(a.Files, b.Files) &&
		reflect.DeepEqual(a.Masks, b.Masks) && slices.Equal(a.Home, b.Home) &&
		reflect.DeepEqual(a.EnvJSON, b.EnvJSON) && fn(a.Unset) == fn(b.Unset) && maps.Equal(a.HomeVars, b.HomeVars) &&
		a.OwnDir == b.OwnDir
}

// MergeJSONEnv returns the JSON object base ("" is {}) with every layer's
// keys merged over it in order, recursively (an object merges into an
// object; anything else replaces). A base that is not a JSON object is an
// error.
func MergeJSONEnv(base string, layers ...map[string]any) (string, error) {
	obj := map[string]any{}
	if strings.TrimSpace(base) != "" {
		if err := json.Unmarshal([]byte(base), &obj); err != nil || obj == nil {
			return "", fmt.Errorf("not a JSON object: %v", err)
		}
	}
	for _, l := range layers {
		mergeInto(obj, l)
	}
	b, err := json.Marshal(obj)
	return string(b), err
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeInto(dv, sv)
				continue
			}
			cp := map[string]any{}
			mergeInto(cp, sv)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}
