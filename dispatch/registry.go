package dispatch

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/model"
)

// AgentSpec is an agent's launch spec and policy, as configured.
type AgentSpec struct {
	Name    string
	Command []string
	Enabled bool
	// EnabledSet says the config set Enabled; false means the default.
	EnabledSet bool
	// MCPServers are passed to the agent in session/new for
	// state_changing tasks only (HAI-MCP's guarded tools for Claude).
	MCPServers []MCPServer
	// Profiles are the hardening profiles of the agent's sessions, one per
	// adapter generation. Nil: NewRegistry takes the verified profiles of
	// that agent name, if any (ProfilesFor).
	Profiles []*hardening.Profile
	// RequireVerified blocks the agent's tasks (agent_not_verified)
	// unless its last hardening verification passed, within
	// VerifiedWithin, on the adapter version installed now.
	RequireVerified bool
	// VerifiedWithin is how old a passed verification may be
	// (DefaultVerifiedWithin when zero).
	VerifiedWithin time.Duration
}

// DefaultVerifiedWithin is how old a passed verification may be for
// RequireVerified when the spec says nothing.
const DefaultVerifiedWithin = 720 * time.Hour

// MCPServer is a stdio MCP server the relay passes to an agent.
type MCPServer struct {
	Name    string
	Command []string
	Env     map[string]string
}

// Probe is the outcome of the last live probe of an agent.
type Probe struct {
	OK     bool
	At     time.Time
	Reason string
	// Fingerprint is the adapter's the probe ran on (Adapter.Fingerprint;
	// "" when not known): worked_live belongs to that adapter.
	Fingerprint string
}

// LiveWindow is how long a successful probe counts as worked_live.
const LiveWindow = 24 * time.Hour

// Registry resolves agent names to entries with four independent health
// signals: configured (the command resolves on PATH, checked at query
// time), enabled (policy), worked_live (a probe succeeded within
// LiveWindow) and hardening (the last hardening verification, and whether
// it holds for the require_verified policy). The signals are never
// collapsed into one.
type Registry struct {
	specs    map[string]AgentSpec
	lookPath func(string) (string, error)
	now      func() time.Time

	mu            sync.Mutex
	probes        map[string]Probe
	verifications map[string]model.Verification
	seen          map[string]string // adapter version reported at initialize, by agent
}

// NewRegistry returns a registry over the given specs. lookPath defaults to
// exec.LookPath (the daemon's PATH).
func NewRegistry(specs []AgentSpec, lookPath func(string) (string, error), now func() time.Time) *Registry {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if now == nil {
		now = time.Now
	}
	r := &Registry{specs: map[string]AgentSpec{}, lookPath: lookPath, now: now, probes: map[string]Probe{},
		verifications: map[string]model.Verification{}, seen: map[string]string{}}
	for _, s := range specs {
		if s.Profiles == nil {
			s.Profiles = hardening.ProfilesFor(s.Name)
		}
		if s.VerifiedWithin <= 0 {
			s.VerifiedWithin = DefaultVerifiedWithin
		}
		r.specs[s.Name] = s
	}
	return r
}

// SetProbe records a probe outcome (loaded from the store at start, or
// just measured).
func (r *Registry) SetProbe(name string, p Probe) {
	r.mu.Lock()
	r.probes[name] = p
	r.mu.Unlock()
}

// SetVerification records an agent's last hardening verification (loaded
// from the store at start, or just made).
func (r *Registry) SetVerification(name string, v model.Verification) {
	r.mu.Lock()
	r.verifications[name] = v
	r.mu.Unlock()
}

// noteVersion records the adapter version an agent reported at
// initialize: the installed version when no package.json tells it.
func (r *Registry) noteVersion(name string, version string) {
	if version == "" {
		return
	}
	r.mu.Lock()
	r.seen[name] = version
	r.mu.Unlock()
}

// Spec returns an agent's launch spec.
func (r *Registry) Spec(name string) (AgentSpec, bool) {
	s, ok := r.specs[name]
	return s, ok
}

// adapter identifies the adapter the agent's command resolves to now.
func (r *Registry) adapter(s AgentSpec) Adapter {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return Adapter{}
	}
	p, err := r.lookPath(s.Command[0])
	if err != nil {
		return Adapter{}
	}
	return IdentifyCommand(p, s.Command[1:])
}

// Known implements model.Registry: a name lookup, no PATH search.
func (r *Registry) Known(name string) bool {
	_, ok := r.specs[name]
	return ok
}

// Agent implements model.Registry.
func (r *Registry) Agent(_ context.Context, name string) (model.AgentInfo, bool) {
	s, ok := r.specs[name]
	if !ok {
		return model.AgentInfo{}, false
	}
	now := r.now().UTC()
	info := model.AgentInfo{Name: s.Name, Command: append([]string(nil), s.Command...), Enabled: s.Enabled}
	switch {
	case s.Enabled && !s.EnabledSet:
		info.EnabledReason = "default (no enabled key for [agents." + s.Name + "] in config)"
	case s.Enabled:
		info.EnabledReason = "enabled in config"
	default:
		info.EnabledReason = "disabled in config ([agents." + s.Name + "] enabled = false)"
	}
	info.ConfiguredAt = &now
	resolved := ""
	switch {
	case len(s.Command) == 0 || s.Command[0] == "":
		info.ConfiguredReason = "no command configured"
	default:
		if p, err := r.lookPath(s.Command[0]); err != nil {
			info.ConfiguredReason = s.Command[0] + " not found on the daemon's PATH"
		} else {
			info.Configured, info.ConfiguredReason = true, p
			resolved = p
		}
	}
	r.mu.Lock()
	p, probed := r.probes[name]
	v, verified := r.verifications[name]
	seen := r.seen[name]
	r.mu.Unlock()
	ad := Adapter{}
	if resolved != "" {
		ad = IdentifyCommand(resolved, s.Command[1:])
	}
	info.Adapter = ad.Model()
	info.Adapter.RuntimeProblem = nodeProblem(ad, r.lookPath)
	inst := installedVersion(ad, seen)
	// As a session would be launched: a guess for an adapter not
	// identified on disk, until one reports itself.
	c, _ := hardening.Pick(s.Name, s.Profiles, ad.Package, ad.Version)
	info.Profile = hardening.DescribeChoice(s.Profiles, c, inst.version)
	info.Hardening = hardeningSignal(s, v, verified, ad, inst, now)
	info.Sandbox = r.sandboxFor(c.Profile)
	again := "; run `relay agents probe " + name + "`"
	switch {
	case !probed:
		info.WorkedLiveReason = "never probed" + again
	case p.Fingerprint != "" && ad.Fingerprint != "" && p.Fingerprint != ad.Fingerprint:
		// What was probed is not what is installed now: stale, whatever
		// the outcome was.
		at := p.At
		info.WorkedLiveAt, info.WorkedLiveReason = &at, "stale: the last probe ran on another adapter than the one installed now ("+
			adapterName(ad)+")"+again
	case !p.OK && strings.Contains(p.Reason, "the sandbox cannot run") && r.sandboxOK():
		at := p.At
		info.WorkedLiveAt, info.WorkedLiveReason = &at, "stale: the last probe failed because the sandbox could not run, and now it can"+again
	case !p.OK:
		at := p.At
		info.WorkedLiveAt, info.WorkedLiveReason = &at, p.Reason
	case now.Sub(p.At) > LiveWindow:
		at := p.At
		info.WorkedLiveAt, info.WorkedLiveReason = &at, "last successful probe is older than 24h"
	default:
		at := p.At
		info.WorkedLive, info.WorkedLiveAt, info.WorkedLiveReason = true, &at, "probe succeeded"
	}
	return info, true
}

// Agents implements model.Registry, sorted by name.
func (r *Registry) Agents(ctx context.Context) []model.AgentInfo {
	names := make([]string, 0, len(r.specs))
	for n := range r.specs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]model.AgentInfo, 0, len(names))
	for _, n := range names {
		a, _ := r.Agent(ctx, n)
		out = append(out, a)
	}
	return out
}

// hardeningSignal is an agent's hardening signal: its last verification v (when
// verified), and whether v holds for require_verified given the adapter
// installed now (ad: its fingerprint; installed: its version).
func hardeningSignal(s AgentSpec, v model.Verification, verified bool, ad Adapter, installed installed, now time.Time) model.AgentHardening {
	h := model.AgentHardening{Status: model.HardeningUnverified, InstalledVersion: installed.version,
		InstalledFingerprint: ad.Fingerprint,
		RequireVerified:      s.RequireVerified, VerifiedWithin: model.ShortDuration(s.VerifiedWithin)}
	switch {
	case len(s.Profiles) == 0 && !verified:
		h.Reason = "no hardening profile"
	case !verified:
		h.Reason = "never verified; run `relay agents verify " + s.Name + "`"
	default:
		at := v.At
		h.Status, h.At, h.AdapterVersion, h.Reason, h.Fingerprint = v.Status, &at, v.AdapterVersion, v.Reason, v.Fingerprint
	}
	verifiedAs := strings.TrimSpace(v.AdapterPackage + " " + v.AdapterVersion)
	switch {
	case h.Status != model.HardeningVerified:
		h.CurrentReason = "the last verification did not pass (" + string(h.Status) + ": " + h.Reason + ")"
	case now.Sub(v.At) > s.VerifiedWithin:
		h.CurrentReason = fmt.Sprintf("the last passed verification (%s) is older than verified_within (%s)",
			v.At.UTC().Format(time.RFC3339), model.ShortDuration(s.VerifiedWithin))
	case v.Fingerprint == "":
		h.CurrentReason = "the last passed verification did not record which adapter files it ran (it predates fingerprints); run `relay agents verify " + s.Name + "` again"
	case ad.Fingerprint == "":
		why := "the command is not found"
		if ad.Err != "" {
			why = ad.Err
		}
		h.CurrentReason = "the installed adapter cannot be fingerprinted (" + why + ")"
	case v.Fingerprint != ad.Fingerprint:
		h.CurrentReason = fmt.Sprintf("verified on %s at %s (fingerprint %s), but the adapter installed now is %s at %s (fingerprint %s)",
			verifiedAs, v.AdapterPath, shortFingerprint(v.Fingerprint), ad.Describe(), ad.RealPath, shortFingerprint(ad.Fingerprint))
	default:
		h.Current = true
		h.CurrentReason = fmt.Sprintf("verified %s on %s at %s, the very files installed now (fingerprint %s)",
			v.At.UTC().Format(time.RFC3339), verifiedAs, ad.RealPath, shortFingerprint(ad.Fingerprint))
	}
	return h
}

// shortFingerprint is the first 12 hex digits of a fingerprint, for
// messages.
func shortFingerprint(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// installed is the adapter version installed now, and how it was found.
type installed struct {
	version string
	how     string
}

// installedVersion is the version of the adapter ad: its package.json's,
// else the version the agent last reported at initialize (seen).
func installedVersion(ad Adapter, seen string) installed {
	var tried string
	switch {
	case ad.Version != "":
		return installed{ad.Version, ad.PackageJSON}
	case ad.RealPath != "":
		tried = "no package.json with a version above " + ad.RealPath
	default:
		tried = "the command is not found"
	}
	if seen != "" {
		return installed{seen, "as the adapter reported it at initialize; " + tried}
	}
	return installed{"", tried + ", and no session reported a version since the daemon started"}
}

// adapterName names an adapter in a reason: its package and version, or
// its path.
func adapterName(a Adapter) string {
	if a.Package != "" {
		return strings.TrimSpace(a.Package + " " + a.Version)
	}
	return a.RealPath
}

// sandboxOK reports whether the sandbox every agent runs in can run now.
func (r *Registry) sandboxOK() bool {
	return sandbox.Check(bwrapPath, r.lookPath).OK
}

// sandboxFor says what holds read_only for the tasks of an agent under
// profile p (nil: none): the sandbox's layers here, without Landlock for
// an agent that runs a sandbox of its own (Rule.OwnSandbox), or why no
// task of it can run.
func (r *Registry) sandboxFor(p *hardening.Profile) model.AgentSandbox {
	st := sandbox.Check(bwrapPath, r.lookPath)
	if !st.OK {
		return model.AgentSandbox{Problem: st.Problem}
	}
	layers := st.Layers()
	if p != nil && p.Rules[model.ModeReadOnly].OwnSandbox {
		layers = "bubblewrap" + noLandlockOwnSandbox
	}
	return model.AgentSandbox{Layers: layers}
}
