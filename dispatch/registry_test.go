package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch"
)

func TestRegistrySignals(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	lookPath := func(name string) (string, error) {
		if name == "claude-agent-acp" || name == "codex-acp" {
			return "/opt/bin/" + name, nil
		}
		return "", errors.New("not found")
	}
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{
		{Name: "claude", Command: []string{"claude-agent-acp"}, Enabled: true},
		{Name: "codex", Command: []string{"codex-acp"}, Enabled: false},
		{Name: "gemini", Command: []string{"gemini", "--acp"}, Enabled: true, EnabledSet: true},
		{Name: "empty", Enabled: true},
	}, lookPath, clock)
	ctx := context.Background()

	a, ok := reg.Agent(ctx, "claude")
	if !ok || !a.Configured || a.ConfiguredReason != "/opt/bin/claude-agent-acp" || !a.Enabled || a.WorkedLive {
		t.Fatalf("claude = %+v", a)
	}
	if !strings.Contains(a.WorkedLiveReason, "never probed") || a.WorkedLiveAt != nil {
		t.Fatalf("claude worked_live = %q at %v", a.WorkedLiveReason, a.WorkedLiveAt)
	}
	// The signals are independent: configured but disabled.
	c, _ := reg.Agent(ctx, "codex")
	if !c.Configured || c.Enabled || !strings.Contains(c.EnabledReason, "enabled = false") {
		t.Fatalf("codex = %+v", c)
	}
	// Why an agent is enabled: the default, or the config's own word.
	if !strings.HasPrefix(a.EnabledReason, "default") {
		t.Errorf("claude, enabled by default: enabled_reason %q", a.EnabledReason)
	}
	g, _ := reg.Agent(ctx, "gemini")
	if g.EnabledReason != "enabled in config" {
		t.Errorf("gemini, enabled = true in config: enabled_reason %q", g.EnabledReason)
	}
	if g.Configured || !g.Enabled || !strings.Contains(g.ConfiguredReason, "gemini not found") {
		t.Fatalf("gemini = %+v", g)
	}
	if e, _ := reg.Agent(ctx, "empty"); e.Configured || e.ConfiguredReason != "no command configured" {
		t.Fatalf("empty = %+v", e)
	}
	if _, ok := reg.Agent(ctx, "nobody"); ok {
		t.Fatal("unknown agent found")
	}

	// worked_live: a success within 24h counts, an older one does not,
	// a failure carries its reason.
	reg.SetProbe("claude", dispatch.Probe{OK: true, At: now.Add(-23 * time.Hour), Reason: "end_turn in 1s"})
	if a, _ := reg.Agent(ctx, "claude"); !a.WorkedLive || a.WorkedLiveReason != "probe succeeded" || !a.WorkedLiveAt.Equal(now.Add(-23*time.Hour)) {
		t.Fatalf("within 24h: %+v", a)
	}
	now = now.Add(2 * time.Hour)
	if a, _ := reg.Agent(ctx, "claude"); a.WorkedLive || !strings.Contains(a.WorkedLiveReason, "older than 24h") || a.WorkedLiveAt == nil {
		t.Fatalf("after 24h: %+v", a)
	}
	reg.SetProbe("gemini", dispatch.Probe{OK: false, At: now, Reason: "spawn: not found"})
	if g, _ := reg.Agent(ctx, "gemini"); g.WorkedLive || g.WorkedLiveReason != "spawn: not found" {
		t.Fatalf("failed probe: %+v", g)
	}

	all := reg.Agents(ctx)
	var names []string
	for _, a := range all {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "claude,codex,empty,gemini" {
		t.Fatalf("agents = %v", names)
	}
}

func TestRegistryKnownNeedsNoPathSearch(t *testing.T) {
	t.Parallel()
	searched := 0
	r := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "claude", Command: []string{"claude-agent-acp"}, Enabled: true}},
		func(string) (string, error) { searched++; return "/bin/true", nil }, nil)
	if !r.Known("claude") || r.Known("clippy") {
		t.Fatal("Known: want claude known and clippy unknown")
	}
	if searched != 0 {
		t.Fatalf("Known searched PATH %d times; it must be a name lookup", searched)
	}
}
