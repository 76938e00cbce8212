package dispatch

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// What a hardening verification (package dispatch/verify) needs of
// dispatch: the profile's side of it (VerifySpec: the agent's tools and how
// its launch is pointed at the scripted model), and three hooks on the
// Dispatcher. PlanVerify says which profile a verification runs under,
// RunVerifySession runs one of its sessions through the very path a task
// takes (the agent's hardening profile, the deny-all client), and
// RecordVerification keeps the report as the agent's hardening signal.

// VerifyPlan is what the dispatcher knows of an agent about to be
// verified.
type VerifyPlan struct {
	// Adapter is the adapter installed, as identified on disk.
	Adapter Adapter
	// Profile is the profile the verification runs under: the one for
	// the adapter installed (a guess, the current generation's, when it
	// cannot be identified on disk; each session confirms it at
	// initialize). Nil when the agent has none, or with Refused.
	Profile *hardening.Profile
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
func verifyProfile(spec AgentSpec, ad Adapter) (*hardening.Profile, string) {
	if len(spec.Profiles) == 0 {
		return nil, ""
	}
	if ad.Package == "" {
		if c := hardening.Choose(spec.Name, spec.Profiles, "", ""); c.Profile != nil {
			return c.Profile, "" // a profile for any adapter (tests)
		}
		return spec.Profiles[0], ""
	}
	c := hardening.Choose(spec.Name, spec.Profiles, ad.Package, ad.Version)
	return c.Profile, c.Refused
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
	Redirect func(ruleEnv []string) (hardening.Launch, error)
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
