package dispatch

import (
	"context"
	"os/exec"
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
	// MCPServers are passed to the agent in session/new for
	// state_changing tasks only (HAI-MCP's guarded tools for Claude).
	MCPServers []MCPServer
	// Profile is the hardening profile of the agent's sessions. Nil:
	// NewRegistry takes the verified profile of that agent name, if any
	// (ProfileFor).
	Profile *Profile
}

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

// Registry resolves agent names to entries with three independent health
// signals: configured (the command resolves on PATH, checked at query
// time), enabled (policy) and worked_live (a probe succeeded within
// LiveWindow). The signals are never collapsed into one.
type Registry struct {
	specs    map[string]AgentSpec
	lookPath func(string) (string, error)
	now      func() time.Time

	mu     sync.Mutex
	probes map[string]Probe
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
	r := &Registry{specs: map[string]AgentSpec{}, lookPath: lookPath, now: now, probes: map[string]Probe{}}
	for _, s := range specs {
		if s.Profile == nil {
			s.Profile = ProfileFor(s.Name)
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
	if s.Enabled {
		info.EnabledReason = "enabled in config"
	} else {
		info.EnabledReason = "disabled in config ([agents." + s.Name + "] enabled = false)"
	}
	info.ConfiguredAt = &now
	switch {
	case len(s.Command) == 0 || s.Command[0] == "":
		info.ConfiguredReason = "no command configured"
	default:
		if p, err := r.lookPath(s.Command[0]); err != nil {
			info.ConfiguredReason = s.Command[0] + " not found on the daemon's PATH"
		} else {
			info.Configured, info.ConfiguredReason = true, p
		}
	}
	r.mu.Lock()
	p, probed := r.probes[name]
	r.mu.Unlock()
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
