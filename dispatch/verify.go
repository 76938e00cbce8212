package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hai-relay/relay/model"
)

// What a hardening verification (package dispatch/verify) needs of
// dispatch: the profile's side of it (VerifySpec: the agent's tools and how
// its launch is pointed at the scripted model), and three hooks on the
// Dispatcher. PlanVerify says which profile a verification runs under,
// RunVerifySession runs one of its sessions through the very path a task
// takes (the agent's hardening profile, the deny-all client), and
// RecordVerification keeps the report as the agent's hardening signal.

// ToolVocab is an agent's file and shell tools and their argument names,
// from which its attempts' scripts are written.
type ToolVocab struct {
	// Write, Read, Edit and Shell name the tools. Read, when set, is
	// called on the file before Edit (Claude Code edits only a file it
	// has read).
	Write, Read, Edit, Shell string
	// Path, Old and New name the file path and edit arguments (content is
	// "content" everywhere).
	Path, Old, New string
	// ShellArg names the shell tool's command argument ("command" when
	// empty).
	ShellArg string
	// EditExtra are further arguments of the edit tool.
	EditExtra map[string]any
	// ShellOnly: every attempt is a shell command (Codex writes and edits
	// through its shell tool).
	ShellOnly bool
	// Reader is the tool the positive control reads its file with (Read
	// when empty; cat through Shell when ShellOnly).
	Reader string
}

// VerifySpec is how a profile's agent is verified offline.
type VerifySpec struct {
	// Vocab writes the attempts with the agent's own tools.
	Vocab ToolVocab
	// Redirect returns what the agent's launch gets, after the rule's own
	// environment and arguments (so it wins), for the agent to talk to the
	// scripted model at to.URL, with to.Key as its API key, and to no other
	// model. ruleEnv is the rule's environment for the session (nil when
	// the session runs without a rule). The key reaches the agent through
	// its environment only: other users can read a process's arguments.
	Redirect func(to ScriptedModel, ruleEnv []string) (Launch, error)
	// Refuse, when set, returns why the agent cannot be verified on this
	// machine without going to the network or touching the user's
	// settings or credentials, or "".
	Refuse func() string
	// NoModel, when set, says why the agent's model cannot be pointed at
	// the scripted model (Cursor's): no attempt or control is run, each
	// is reported not run with this reason, and only the Offline checks
	// are made. Redirect is then unused.
	NoModel string
	// Offline, when set, are the checks a NoModel verification makes:
	// what can be checked on this machine without the agent's model.
	Offline func() []OfflineCheck
}

// OfflineCheck is one check of a profile that needs no model.
type OfflineCheck struct {
	Name   string
	Passed bool
	Detail string
}

// Launch is what a verification adds to an agent's launch.
type Launch struct {
	Env   []string // added last, so it wins
	Args  []string // appended to the argv
	Unset []string // removed from the environment
	// EnvJSON is merged into JSON variables after the rule's (Rule.EnvJSON).
	EnvJSON map[string]map[string]any
}

// set reports whether l adds anything.
func (l Launch) set() bool {
	return len(l.Env)+len(l.Args)+len(l.Unset)+len(l.EnvJSON) > 0
}

// ScriptedModel is where a verification's agent finds its model: the
// scripted server's base URL and the key it serves.
type ScriptedModel struct {
	URL, Key string
}

// verifyProvider names the provider a verification adds (Codex, OpenCode).
const verifyProvider = "relay-verify"

// VerifyPlan is what the dispatcher knows of an agent about to be
// verified.
type VerifyPlan struct {
	// Adapter is the adapter installed, as identified on disk.
	Adapter Adapter
	// Profile is the profile the verification runs under: the one for
	// the adapter installed (a guess, the current generation's, when it
	// cannot be identified on disk; each session confirms it at
	// initialize). Nil when the agent has none, or with Refused.
	Profile *Profile
	// Refused says why every task to this adapter would be refused
	// (agent_unsafe_mode), or "".
	Refused string
	// NoCommand: the agent has no command configured.
	NoCommand bool
	// Unhardened names the test switch that runs the agent without its
	// profile's session options when it does (a test build only), or "".
	Unhardened string
}

// PlanVerify returns the plan of a verification of the named agent; the
// error is a *model.Error with the code unknown_agent.
func (d *Dispatcher) PlanVerify(name string) (VerifyPlan, error) {
	spec, ok := d.o.Registry.Spec(name)
	if !ok {
		return VerifyPlan{}, model.Errorf(model.CodeUnknownAgent, "no agent named %q", name)
	}
	p := VerifyPlan{Adapter: d.o.Registry.adapter(spec), Unhardened: d.unhardened(name),
		NoCommand: len(spec.Command) == 0 || spec.Command[0] == ""}
	p.Profile, p.Refused = verifyProfile(spec, p.Adapter)
	return p, nil
}

// verifyProfile is the profile a verification of spec runs under, or nil
// with why none can be (VerifyPlan.Profile).
func verifyProfile(spec AgentSpec, ad Adapter) (*Profile, string) {
	if len(spec.Profiles) == 0 {
		return nil, ""
	}
	if ad.Package == "" {
		if c := choose(spec.Name, spec.Profiles, "", ""); c.profile != nil {
			return c.profile, "" // a profile for any adapter (tests)
		}
		return spec.Profiles[0], ""
	}
	c := choose(spec.Name, spec.Profiles, ad.Package, ad.Version)
	return c.profile, c.refused
}

// VerifySession is one session of a verification: a prompt run in a mode
// and a cwd under the agent's profile, with its launch redirected.
type VerifySession struct {
	Agent  string
	Mode   model.Mode
	Cwd    string
	Prompt string
	// Timeout bounds the session.
	Timeout time.Duration
	// Log names the session's log under Home/logs/verify; FreshLog
	// replaces an earlier one (else the session appends: a second try).
	Log      string
	FreshLog bool
	// Note is the first line of the log.
	Note string
	// Redirect returns what the launch gets after the rule's (ruleEnv is
	// the rule's environment, nil without a rule).
	Redirect func(ruleEnv []string) (Launch, error)
	// Judge, when set, says what the session's end means; what it returns
	// is written into the session's log.
	Judge func(VerifyEnd) string
}

// VerifyEnd is how a verification's session ended.
type VerifyEnd struct {
	Outcome  model.Outcome
	StartErr error // the agent could not be started
	Denied   int   // permission requests the relay denied
	// AgentVersion is the version the agent reported at initialize, or "".
	AgentVersion string
}

// RunVerifySession runs one session of a verification: started, driven to
// its end and torn down as a probe is, so that Stop stops it; ctx ending
// stops it too. stopped reports that ctx or Stop ended the session (its
// end then means nothing). The error says why nothing was started:
// Redirect failed, or the agent is unknown.
func (d *Dispatcher) RunVerifySession(ctx context.Context, vs VerifySession) (end VerifyEnd, stopped bool, err error) {
	spec, ok := d.o.Registry.Spec(vs.Agent)
	if !ok {
		return end, false, model.Errorf(model.CodeUnknownAgent, "no agent named %q", vs.Agent)
	}
	lg, err := openLog(d.verifyLogDir(), vs.Log, d.o.LogLimit, vs.FreshLog)
	if err != nil {
		lg, _ = openLog("", "", d.o.LogLimit, false)
	}
	defer lg.Close()

	// No MCP servers: the user's would start (and could reach the
	// network) for a state_changing session; the built-in tools are what
	// is verified.
	spec.MCPServers = nil
	s := newSession(d, spec, "", vs.Mode, vs.Cwd, promptBlocks(vs.Prompt, nil), vs.Timeout, lg)
	var ruleEnv []string
	if s.rule != nil {
		ruleEnv = s.rule.Env
	}
	launch, err := vs.Redirect(ruleEnv)
	if err != nil {
		return end, false, fmt.Errorf("redirecting the agent to the scripted model: %w", err)
	}
	s.extra = launch
	lg.Printf("%s", vs.Note)

	end.Outcome, _, end.StartErr, stopped = d.runBounded(ctx, s)
	if stopped {
		return end, true, nil
	}
	s.mu.Lock()
	if s.agentInfo != nil {
		end.AgentVersion = s.agentInfo.Version
	}
	s.mu.Unlock()
	if end.StartErr == nil {
		end.Denied = s.client.denied()
	}
	if vs.Judge != nil {
		lg.Printf("%s", vs.Judge(end))
	}
	return end, false, nil
}

func (d *Dispatcher) verifyLogDir() string {
	if d.o.Home == "" {
		return ""
	}
	return filepath.Join(d.o.Home, "logs", "verify")
}

// runBounded starts s, drives it to its end, and tears it down, as probes
// and verification sessions are run: registered so that Stop stops it,
// stopped when ctx ends. res is what the drive ended with; started is the
// spawn error, if any; stopped reports that ctx or Stop ended the session
// (its outcome then means nothing).
func (d *Dispatcher) runBounded(ctx context.Context, s *session) (out model.Outcome, res runResult, started error, stopped bool) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return out, res, nil, true
	}
	d.probes[s] = struct{}{}
	d.wg.Add(1)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.probes, s)
		d.mu.Unlock()
		d.wg.Done()
	}()
	if err := s.start(); err != nil {
		return out, res, err, false
	}
	stopOnCancel := context.AfterFunc(ctx, func() { s.stop(causeCancel) })
	defer stopOnCancel()
	res = s.drive(nil)
	s.teardown()
	out = s.outcome(res)
	cause, _, _, _ := s.stopState()
	s.log.Printf("outcome: %s %s %s", out.State, out.Code, out.Message)
	return out, res, nil, cause == causeCancel || cause == causeShutdown
}

// RecordVerification records v, a verification that ran, as the agent's
// hardening signal: in the registry and through Options.OnVerify, and in
// the log with how long it took.
func (d *Dispatcher) RecordVerification(v model.Verification, took time.Duration) {
	d.o.Registry.SetVerification(v.Agent, v)
	if d.o.OnVerify != nil {
		d.o.OnVerify(v)
	}
	d.log.Info("agent verified", "agent", v.Agent, "status", v.Status, "adapter_version", v.AdapterVersion,
		"reason", v.Reason, "elapsed", took.Round(time.Millisecond))
}

// ClipLine is s on one line, without control characters, clipped to n
// bytes: how the relay shows a line an agent or a model wrote.
func ClipLine(s string, n int) string { return clipText(sanitizeLine(s), n) }

// addJSONKeys adds keys to the JSON object obj ("" is {}), keeping its
// own keys where and as they are (OpenCode's config merge keeps key order,
// which its permission rules depend on). A key obj already has is an
// error.
func addJSONKeys(obj string, keys []string, values []any) (string, error) {
	obj = strings.TrimSpace(obj)
	if obj == "" {
		obj = "{}"
	}
	var have map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &have); err != nil || have == nil {
		return "", fmt.Errorf("not a JSON object: %v", err)
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(obj, "}"))
	sep := ","
	if len(have) == 0 {
		sep = ""
	}
	for i, k := range keys {
		if _, dup := have[k]; dup {
			return "", fmt.Errorf("it already has a key %q", k)
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(values[i])
		if err != nil {
			return "", err
		}
		b.WriteString(sep)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
		sep = ","
	}
	b.WriteByte('}')
	return b.String(), nil
}

// envValue returns the last value of name in env.
func envValue(env []string, name string) (string, bool) {
	val, found := "", false
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && k == name {
			val, found = v, true
		}
	}
	return val, found
}
