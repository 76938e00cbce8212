package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

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
	// Profile is the hardening profile of the agent's sessions. Nil:
	// NewRegistry takes the verified profile of that agent name, if any
	// (ProfileFor).
	Profile *Profile
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
		if s.Profile == nil {
			s.Profile = ProfileFor(s.Name)
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
	info := model.AgentInfo{Name: s.Name, Command: append([]string(nil), s.Command...), Enabled: s.Enabled,
		Profile: s.Profile.describe()}
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
	info.Hardening = hardening(s, v, verified, installedVersion(resolved, seen), now)
	switch {
	case !probed:
		info.WorkedLiveReason = "never probed; run `relay agents probe " + name + "`"
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

// hardening is an agent's hardening signal: its last verification v (when
// verified), and whether v holds for require_verified given the adapter
// version installed now.
func hardening(s AgentSpec, v model.Verification, verified bool, installed installed, now time.Time) model.AgentHardening {
	h := model.AgentHardening{Status: model.HardeningUnverified, InstalledVersion: installed.version,
		RequireVerified: s.RequireVerified, VerifiedWithin: model.ShortDuration(s.VerifiedWithin)}
	switch {
	case s.Profile == nil && !verified:
		h.Reason = "no hardening profile"
	case !verified:
		h.Reason = "never verified; run `relay agents verify " + s.Name + "`"
	default:
		at := v.At
		h.Status, h.At, h.AdapterVersion, h.Reason = v.Status, &at, v.AdapterVersion, v.Reason
	}
	switch {
	case h.Status != model.HardeningVerified:
		h.CurrentReason = "the last verification did not pass (" + string(h.Status) + ": " + h.Reason + ")"
	case now.Sub(v.At) > s.VerifiedWithin:
		h.CurrentReason = fmt.Sprintf("the last passed verification (%s) is older than verified_within (%s)",
			v.At.UTC().Format(time.RFC3339), model.ShortDuration(s.VerifiedWithin))
	case installed.version == "":
		h.CurrentReason = "the installed adapter version is unknown (" + installed.how + ")"
	case v.AdapterVersion != installed.version:
		h.CurrentReason = fmt.Sprintf("verified on adapter version %q, but %q is installed now (%s)",
			v.AdapterVersion, installed.version, installed.how)
	default:
		h.Current = true
		h.CurrentReason = fmt.Sprintf("verified %s on adapter version %s, the one installed now (%s)",
			v.At.UTC().Format(time.RFC3339), v.AdapterVersion, installed.how)
	}
	return h
}

// installed is the adapter version installed now, and how it was found.
type installed struct {
	version string
	how     string
}

// installedVersion finds the version of the adapter at path (the agent's
// resolved command): from the nearest package.json with a version above
// the file its symbolic links lead to (an npm install), else the version
// the agent last reported at initialize (seen).
func installedVersion(path, seen string) installed {
	var tried string
	if path != "" {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			if v, pkg := packageVersion(real); v != "" {
				return installed{v, pkg}
			}
			tried = "no package.json with a version above " + real
		}
	} else {
		tried = "the command is not found"
	}
	if seen != "" {
		return installed{seen, "as the adapter reported it at initialize; " + tried}
	}
	return installed{"", tried + ", and no session reported a version since the daemon started"}
}

// packageVersion walks up from file to the nearest package.json that has
// a version, stopping at a node_modules directory; it returns the version
// and the package.json's path.
func packageVersion(file string) (string, string) {
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if filepath.Base(dir) == "node_modules" || dir == filepath.Dir(dir) {
			return "", ""
		}
		p := filepath.Join(dir, "package.json")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &pkg) == nil && pkg.Version != "" {
			return pkg.Version, p
		}
	}
}
