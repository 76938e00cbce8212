package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

func init() {
	register(command{name: "agents", summary: "list agents with their four health signals (configured, enabled, worked_live, hardening)", usage: "[--json]", setup: agentsCommand, wide: true})
	register(command{name: "agents probe", summary: "run a bounded live ACP invocation of an agent (deny-all, read_only)", usage: "NAME [--timeout 60s] [--json]", args: oneArg("an agent name", "claude"), setup: agentsProbeCommand})
	register(command{name: "agents verify", summary: "prove offline that agents stay read-only with your settings (scripted model on 127.0.0.1)", usage: "NAME [NAME...] | --all [--timeout 60s] [--json]", args: maxArgs(64), setup: agentsVerifyCommand, wide: true})
}

func agentsCommand(f *flags) runFunc {
	return func(ctx context.Context, e *cliIO) error {
		c, err := operator(e, f)
		if err != nil {
			return err
		}
		defer c.Close()
		as, err := c.Agents(ctx)
		if err != nil {
			return err
		}
		st, err := c.DaemonStatus(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return printJSON(e.stdout, map[string]any{"agents": as, "sandbox": st.Sandbox})
		}
		if err := agentTable(e, f.wide, as); err != nil {
			return err
		}
		if st.Sandbox.OK {
			fmt.Fprintf(e.stdout, "sandbox: %s; every agent runs in it, read_only held by the kernel (docs/sandbox.md)\n", safeText(st.Sandbox.Layers))
		} else {
			fmt.Fprintf(e.stdout, "sandbox: unavailable: %s; every task fails agent_sandbox_unavailable\nfix: %s\n",
				safeText(st.Sandbox.Problem), safeText(st.Sandbox.Fix))
		}
		return nil
	}
}

func agentTable(e *cliIO, wide bool, as []model.AgentInfo) error {
	t := newTable(e.stdout, "AGENT", "COMMAND", "CONFIGURED", "ENABLED", "WORKED_LIVE", "ADAPTER", "PROFILE", "HARDENING", "WHY")
	t.wide = wide
	var superseded []string
	for _, a := range as {
		why := a.WorkedLiveReason
		switch {
		case a.Sandbox.Problem != "":
			why = "tasks fail agent_sandbox_unavailable: the sandbox is unavailable: " + a.Sandbox.Problem
		case !a.Configured:
			why = a.ConfiguredReason
		case !a.Enabled:
			why = a.EnabledReason
		case a.Profile.Name == "" && len(a.Profile.Generations) > 0:
			why = "tasks refused (agent_unsafe_mode): " + a.Profile.Summary
		case a.Hardening.RequireVerified && !a.Hardening.Current:
			why = "tasks blocked (require_verified): " + a.Hardening.CurrentReason
		}
		if a.Adapter.Superseded != "" {
			superseded = append(superseded, fmt.Sprintf("%s: %s is superseded by %s", a.Name, a.Adapter.Package, a.Adapter.Superseded))
		}
		t.rowWrap(a.Name, strings.Join(a.Command, " "), yesNo(a.Configured), yesNo(a.Enabled), yesNo(a.WorkedLive), adapterCell(a.Adapter),
			profileCell(a.Profile), hardeningCell(a.Hardening), why)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, s := range superseded {
		fmt.Fprintln(e.stdout, "note: "+s)
	}
	fmt.Fprintln(e.stdout, "\nADAPTER is the package and version the agent's command resolves to (its package.json).")
	fmt.Fprintln(e.stdout, "PROFILE is the hardening profile for that adapter generation; \"(CI)\": that exact version is verified in the relay's CI;")
	fmt.Fprintln(e.stdout, "\"none\": held by the sandbox only: permission requests are still denied and read_only is held by the kernel, but the agent's own allow rules are not controlled;")
	fmt.Fprintln(e.stdout, "\"refused\": no profile covers the installed adapter, and its tasks end agent_unsafe_mode (docs/agents.md).")
	fmt.Fprintln(e.stdout, "HARDENING is the last `relay agents verify` on this machine, with the adapter version it saw;")
	fmt.Fprintln(e.stdout, "\"(stale)\": it passed, but too long ago or on other adapter files than those installed now.")
	return nil
}

// adapterCell is an agent's adapter in a table: "PACKAGE VERSION", the
// path when no package.json names it, "-" when it is not installed.
func adapterCell(a model.AgentAdapter) string {
	switch {
	case a.Package != "":
		s := strings.TrimSpace(a.Package + " " + a.Version)
		if a.Superseded != "" {
			s += " (superseded)"
		}
		return s
	case a.Path != "":
		return a.Path
	}
	return "-"
}

// hardeningCell is an agent's hardening signal in a table: "verified
// 0.23.1", "failed", "unusable", "unverified", with "(stale)" when a
// passed verification no longer holds.
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

// profileCell is the hardening profile that applies to an agent's adapter
// in a table: its name, "(CI)" when the installed version is one it was
// verified on in CI, "refused" when no profile covers the adapter, or
// "none".
func profileCell(p model.AgentProfile) string {
	switch {
	case p.Name == "" && len(p.Generations) > 0:
		return "refused"
	case p.Name == "":
		return "none"
	case p.VerifiedInCI:
		return p.Name + " (CI)"
	}
	return p.Name + " (verified on " + strings.Join(p.VerifiedOn, ",") + ")"
}

func agentsProbeCommand(f *flags) runFunc {
	timeout := f.Duration("timeout", 0, fmt.Sprintf("bound the probe (default limits.probe_timeout, %gs)", config.DefaultProbeTimeout.Seconds()))
	return func(ctx context.Context, e *cliIO) error {
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
			return spec.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(f.pos[0]))
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
}

func agentsVerifyCommand(f *flags) runFunc {
	timeout := f.Duration("timeout", 0, fmt.Sprintf("bound each agent's verification (default %gs)", verify.DefaultTimeout.Seconds()))
	all := f.Bool("all", false, "verify every agent that has a hardening profile")
	return func(ctx context.Context, e *cliIO) error {
		switch {
		case *all && len(f.pos) > 0:
			return f.usageError("agents verify takes agent names or --all, not both")
		case !*all && len(f.pos) == 0:
			return f.usageError("agents verify needs agent names or --all, e.g. relay agents verify claude")
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
				if a.Profile.Name != "" || len(a.Profile.Generations) > 0 {
					names = append(names, a.Name)
				}
			}
		}
		var reports []model.Verification
		var bad []string
		for _, name := range names {
			fmt.Fprintf(e.stderr, "verifying %s: a scripted model on 127.0.0.1 makes it try to write, edit and run, in temporary directories…\n", name)
			began := time.Now()
			v, err := c.VerifyAgent(ctx, name, *timeout)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "%s: %s in %s\n", name, v.Status, time.Since(began).Round(time.Second))
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
				WithHint("read each attempt's line above (or --json) and the session logs in the relay home's logs/verify/; docs/agents/verify.md says what each stop means")
		}
		return nil
	}
}

// verifyReport prints one verification: a line per attempt, then the
// verdict.
func verifyReport(e *cliIO, wide bool, v model.Verification) error {
	fmt.Fprintf(e.stdout, "%s", v.Agent)
	adapter := strings.TrimSpace(oneLine(v.AdapterPackage, 80) + " " + oneLine(v.AdapterVersion, 40))
	switch {
	case v.Profile != "":
		fmt.Fprintf(e.stdout, " (hardening profile %s", v.Profile)
		if adapter != "" {
			fmt.Fprintf(e.stdout, ", adapter %s", adapter)
		}
		fmt.Fprint(e.stdout, ")")
	case adapter != "":
		fmt.Fprintf(e.stdout, " (adapter %s)", adapter)
	}
	fmt.Fprintln(e.stdout)
	if len(v.Attempts) > 0 {
		t := newTable(e.stdout, "  MODE", "ATTEMPT", "TOOL", "STOPPED BY", "DETAIL")
		t.wide = wide
		for _, a := range v.Attempts {
			stop := a.StoppedBy.Describe()
			switch {
			case a.Control && a.Passed:
				stop = "positive control passed"
			case a.Control:
				stop = "POSITIVE CONTROL FAILED"
			}
			t.rowMax(160, "  "+string(a.Mode), a.Name, a.Tool, stop, a.Detail)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "  => %s: %s\n\n", strings.ToUpper(string(v.Status)), oneLine(v.Reason, 400))
	return nil
}
