package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "agents", summary: "list agents with their three health signals (configured, enabled, worked_live)", run: runAgents})
	register(command{name: "agents probe", summary: "run a bounded live ACP invocation of an agent (deny-all, read_only)", run: runAgentsProbe})
}

func runAgents(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "agents", "[--json]")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	c, err := operator(e, f)
	if err != nil {
		return err
	}
	defer c.Close()
	as, err := c.Agents(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(e.stdout, map[string]any{"agents": as})
	}
	return agentTable(e, as)
}

func agentTable(e *env, as []model.AgentInfo) error {
	t := newTable(e.stdout, "AGENT", "COMMAND", "CONFIGURED", "ENABLED", "WORKED_LIVE", "PROFILE", "WHY")
	for _, a := range as {
		why := a.WorkedLiveReason
		if !a.Configured {
			why = a.ConfiguredReason
		} else if !a.Enabled {
			why = a.EnabledReason
		}
		t.row(a.Name, strings.Join(a.Command, " "), yesNo(a.Configured), yesNo(a.Enabled), yesNo(a.WorkedLive), profileCell(a.Profile), why)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "\nPROFILE is the hardening profile of delegated sessions, with the adapter versions it was verified on;")
	fmt.Fprintln(e.stdout, "\"none\": permission requests are still denied, but the agent's own allow rules are not controlled (docs/agents.md).")
	return nil
}

// profileCell is an agent's hardening profile in a table: name@versions,
// or "none".
func profileCell(p model.AgentProfile) string {
	if p.Name == "" {
		return "none"
	}
	return p.Name + "@" + strings.Join(p.VerifiedOn, ",")
}

func runAgentsProbe(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "agents probe", "NAME [--timeout 60s] [--json]")
	timeout := f.Duration("timeout", 0, "bound the probe (default limits.probe_timeout, 60s)")
	if err := f.parseN(args, 1); err != nil {
		return err
	}
	c, err := operator(e, f)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(e.stderr, "probing %s (initialize → session/new → one prompt)…\n", safeText(f.pos[0]))
	a, perr := c.ProbeAgent(ctx, f.pos[0], *timeout)
	if f.json {
		if err := printJSON(e.stdout, a); err != nil {
			return err
		}
	} else if a.Name != "" {
		if err := agentTable(e, []model.AgentInfo{a}); err != nil {
			return err
		}
	}
	if perr != nil {
		return perr
	}
	if !a.WorkedLive {
		code := model.CodeDispatchFailed
		if strings.HasPrefix(a.WorkedLiveReason, "auth required") {
			code = model.CodeAgentAuthRequired // the reason names the agent's own login
		}
		return model.Errorf(code, "probe of %s failed: %s", a.Name, a.WorkedLiveReason).
			WithHint("see docs/agents.md for how to install and log in to " + a.Name)
	}
	fmt.Fprintf(e.stderr, "%s worked live\n", safeText(a.Name))
	return nil
}
