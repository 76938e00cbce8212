package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

func init() {
	register(command{name: "agents", summary: "list agents with their four health signals (configured, enabled, worked_live, hardening)", run: runAgents, wide: true})
	register(command{name: "agents probe", summary: "run a bounded live ACP invocation of an agent (deny-all, read_only)", run: runAgentsProbe})
	register(command{name: "agents verify", summary: "prove offline that agents stay read-only with your settings (scripted model on 127.0.0.1)", run: runAgentsVerify, wide: true})
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
	return agentTable(e, f.wide, as)
}

func agentTable(e *env, wide bool, as []model.AgentInfo) error {
	t := newTable(e.stdout, "AGENT", "COMMAND", "CONFIGURED", "ENABLED", "WORKED_LIVE", "PROFILE", "HARDENING", "WHY")
	t.wide = wide
	for _, a := range as {
		why := a.WorkedLiveReason
		if !a.Configured {
			why = a.ConfiguredReason
		} else if !a.Enabled {
			why = a.EnabledReason
		} else if a.Hardening.RequireVerified && !a.Hardening.Current {
			why = "tasks blocked (require_verified): " + a.Hardening.CurrentReason
		}
		t.row(a.Name, strings.Join(a.Command, " "), yesNo(a.Configured), yesNo(a.Enabled), yesNo(a.WorkedLive), profileCell(a.Profile),
			hardeningCell(a.Hardening), why)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "\nPROFILE is the hardening profile of delegated sessions, with the adapter versions it was verified on;")
	fmt.Fprintln(e.stdout, "\"none\": permission requests are still denied, but the agent's own allow rules are not controlled (docs/agents.md).")
	fmt.Fprintln(e.stdout, "HARDENING is the last `relay agents verify` on this machine, with the adapter version it saw;")
	fmt.Fprintln(e.stdout, "\"(stale)\": it passed, but too long ago or on another adapter version than the one installed now.")
	return nil
}

// hardeningCell is an agent's hardening signal in a table: "verified
// 0.23.1", "failed", "unverified", with "(stale)" when a passed
// verification no longer holds.
func hardeningCell(h model.AgentHardening) string {
	s := string(h.Status)
	if h.Status == model.HardeningVerified && h.AdapterVersion != "" {
		s += " " + h.AdapterVersion
	}
	if h.Status == model.HardeningVerified && !h.Current {
		s += " (stale)"
	}
	return s
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
	timeout := f.Duration("timeout", 0, fmt.Sprintf("bound the probe (default limits.probe_timeout, %gs)", config.DefaultProbeTimeout.Seconds()))
	if err := f.parseN(args, 1); err != nil {
		return err
	}
	if *timeout == 0 {
		// The home's limits.probe_timeout, which the daemon applies too:
		// this client then waits as long as the probe may take.
		if home, err := resolveHome(f.home, e.getenv); err == nil {
			if cfg, err := loadHomeConfig(home, model.CodeInvalidConfig); err == nil {
				*timeout = cfg.Limits.ProbeTimeout
			}
		}
	}
	c, err := operator(e, f)
	if err != nil {
		return err
	}
	defer c.Close()
	// An unknown agent is only an error: look it up before saying that a
	// probe is under way.
	as, err := c.Agents(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(as, func(a model.AgentInfo) bool { return a.Name == f.pos[0] }) {
		return model.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(f.pos[0])).
			WithHint(spec.Hint(model.CodeUnknownAgent))
	}
	fmt.Fprintf(e.stderr, "probing %s (initialize → session/new → one prompt)…\n", safeText(f.pos[0]))
	a, perr := c.ProbeAgent(ctx, f.pos[0], *timeout)
	if f.json {
		if err := printJSON(e.stdout, a); err != nil {
			return err
		}
	} else if a.Name != "" {
		if err := agentTable(e, false, []model.AgentInfo{a}); err != nil {
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

func runAgentsVerify(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "agents verify", "NAME [NAME...] | --all [--timeout 60s] [--json]")
	timeout := f.Duration("timeout", 0, fmt.Sprintf("bound each agent's verification (default %gs)", dispatch.DefaultVerifyTimeout.Seconds()))
	all := f.Bool("all", false, "verify every agent that has a hardening profile")
	if err := f.parse(args, 64); err != nil {
		return err
	}
	if *all == (len(f.pos) > 0) {
		fmt.Fprintln(f.Output(), "relay: agents verify takes agent names or --all, not both")
		f.Usage()
		return errUsage
	}
	c, err := operator(e, f)
	if err != nil {
		return err
	}
	defer c.Close()
	names := f.pos
	if *all {
		as, err := c.Agents(ctx)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.Profile.Name != "" {
				names = append(names, a.Name)
			}
		}
	}
	var reports []model.Verification
	var bad []string
	for _, name := range names {
		fmt.Fprintf(e.stderr, "verifying %s: a scripted model on 127.0.0.1 makes it try to write, edit and run, in temporary directories…\n", name)
		v, err := c.VerifyAgent(ctx, name, *timeout)
		if err != nil {
			return err
		}
		reports = append(reports, v)
		if v.Status != model.HardeningVerified {
			bad = append(bad, fmt.Sprintf("%s %s", v.Agent, v.Status))
		}
		if !f.json {
			if err := verifyReport(e, f.wide, v); err != nil {
				return err
			}
		}
	}
	if f.json {
		if err := printJSON(e.stdout, map[string]any{"verifications": reports}); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return model.Errorf(model.CodeAgentNotVerified, "hardening not verified: %s", strings.Join(bad, ", ")).
			WithHint("read each attempt's line above (or --json) and the session logs in the relay home's logs/verify/; docs/agents.md says what each stop means")
	}
	return nil
}

// verifyReport prints one verification: a line per attempt, then the
// verdict.
func verifyReport(e *env, wide bool, v model.Verification) error {
	fmt.Fprintf(e.stdout, "%s", v.Agent)
	if v.Profile != "" {
		fmt.Fprintf(e.stdout, " (hardening profile %s", v.Profile)
		if v.AdapterVersion != "" {
			fmt.Fprintf(e.stdout, ", adapter %s", oneLine(v.AdapterVersion, 40))
		}
		fmt.Fprint(e.stdout, ")")
	}
	fmt.Fprintln(e.stdout)
	if len(v.Attempts) > 0 {
		t := newTable(e.stdout, "  MODE", "ATTEMPT", "TOOL", "STOPPED BY", "DETAIL")
		t.wide = wide
		for _, a := range v.Attempts {
			t.rowMax(160, "  "+string(a.Mode), a.Name, a.Tool, a.StoppedBy.Describe(), a.Detail)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "  => %s: %s\n\n", strings.ToUpper(string(v.Status)), oneLine(v.Reason, 400))
	return nil
}
