package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

func init() {
	register(command{name: "doctor", summary: "check everything a first run needs, and say what to do for each problem", usage: "[--json]", setup: doctorCommand})
}

// check is one line of `relay doctor`: what was checked, whether it is
// fine, what was found, and what to do when it is not.
type check struct {
	Name string `json:"name"`
	// Status is "ok", "warn" (works, but worth a look) or "fail" (tasks
	// would be refused or blocked).
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	// Code is the code tasks would end with because of a failure.
	Code model.Code `json:"code,omitempty"`
}

// doctor collects the checks of one run.
type doctor struct{ checks []check }

func (d *doctor) ok(name, format string, a ...any) {
	d.checks = append(d.checks, check{Name: name, Status: "ok", Detail: fmt.Sprintf(format, a...)})
}

func (d *doctor) warn(name, detail, fix string) {
	d.checks = append(d.checks, check{Name: name, Status: "warn", Detail: detail, Fix: fix})
}

func (d *doctor) fail(name string, code model.Code, detail, fix string) {
	d.checks = append(d.checks, check{Name: name, Status: "fail", Detail: detail, Fix: fix, Code: code})
}

// doctorCommand is `relay doctor`: the home, its config, the daemon and
// its environment, the sandbox, the authority adapter and every agent,
// each with what to do when it is not right. It exits non-zero when a
// problem would refuse or block tasks.
func doctorCommand(f *flags) runFunc {
	return func(ctx context.Context, e *cliIO) error {
		home, err := resolveHome(f.home, e.getenv)
		if err != nil {
			return err
		}
		var d doctor
		cfg, cfgOK := d.home(home)
		st, c := d.daemon(ctx, e, f, home)
		if c != nil {
			defer c.Close()
		}
		d.sandbox(st)
		if cfgOK {
			d.authority(cfg)
		}
		d.agents(ctx, c, cfg, cfgOK)
		return d.report(e, f, home)
	}
}

// home checks the relay home and its config.
func (d *doctor) home(home string) (config.Config, bool) {
	exists, _, err := secureHome(home, false, model.CodeDaemonUnavailable)
	switch {
	case err != nil:
		d.fail("home", model.CodeDaemonUnavailable, model.Public(err).Message, model.Public(err).Hint)
		return config.Config{}, false
	case !exists:
		d.warn("home", home+" does not exist yet", "`relay daemon` makes it (0700), or a facade's first call does")
	default:
		d.ok("home", "%s (yours, not open to group or others)", home)
	}
	cfg, err := loadHomeConfig(home, model.CodeInvalidConfig)
	if err != nil {
		d.fail("config", model.CodeInvalidConfig, model.Public(err).Message, model.Public(err).Hint)
		return cfg, false
	}
	if _, err := os.Stat(filepath.Join(home, "config.toml")); err != nil {
		d.ok("config", "no config.toml: the defaults (docs/config.md lists the keys)")
	} else {
		d.ok("config", "%s parses", filepath.Join(home, "config.toml"))
	}
	return cfg, true
}

// daemon checks the daemon: running, who started it, its PATH and the
// names of its environment (never their values).
func (d *doctor) daemon(ctx context.Context, e *cliIO, f *flags, home string) (*socketapi.DaemonStatus, *socketapi.Client) {
	c, _, err := operatorAt(e, f)
	if err != nil {
		d.fail("daemon", model.ErrorCode(err), model.Public(err).Message, model.Public(err).Hint)
		return nil, nil
	}
	st, err := c.DaemonStatus(ctx)
	if err != nil {
		c.Close()
		d.warn("daemon", "no relay daemon runs on "+home,
			"start one with `relay daemon` (it keeps your shell's environment: API keys, proxies), or let a facade start one on demand (then only an allow-listed environment, plus [daemon] env)")
		return nil, nil
	}
	by := "hand"
	if st.Autostarted {
		by = "a facade (autostart)"
		if st.StartedBy.Agent != "" {
			by = "the " + st.StartedBy.Agent + " facade (autostart)"
		}
	}
	d.ok("daemon", "pid %d, version %s, started by %s", st.PID, st.Version, by)
	d.ok("daemon PATH", "%s (%s)", st.Path, st.PathSource)
	var keys []string
	for _, n := range st.Env {
		if strings.HasSuffix(n, "_API_KEY") || strings.HasSuffix(n, "_BASE_URL") || strings.HasSuffix(n, "_TOKEN") {
			keys = append(keys, n)
		}
	}
	switch {
	case len(keys) > 0:
		d.ok("daemon env", "model keys present: %s (values not shown)", strings.Join(keys, ", "))
	case st.Autostarted:
		d.warn("daemon env", "no API key or base URL in the environment of this autostarted daemon: agents that log in with a key will ask for a login",
			"put the variables in [daemon] env in config.toml, or start the daemon by hand from a shell that has them (`relay daemon stop`, then `relay daemon`); `relay daemon status` shows its environment")
	default:
		d.ok("daemon env", "no API key variables (agents use their own logins)")
	}
	return &st, c
}

// sandbox checks that the sandbox every agent runs in can run: the
// daemon's word when it runs, else this process's (same user, its PATH).
func (d *doctor) sandbox(st *socketapi.DaemonStatus) {
	var ss socketapi.SandboxStatus
	if st != nil {
		ss = st.Sandbox
	} else {
		s := sandbox.Check("bwrap", exec.LookPath)
		ss = socketapi.SandboxStatus{OK: s.OK, Problem: s.Problem, Fix: s.Fix}
		if s.OK {
			ss.Layers = s.Layers()
		}
	}
	if ss.OK {
		d.ok("sandbox", "%s: read_only is held by the kernel (docs/sandbox.md)", ss.Layers)
		return
	}
	d.fail("sandbox", model.CodeAgentSandboxUnavailable, ss.Problem+": no task of any agent runs", ss.Fix)
}

// authority checks the authority adapter: configured and executable.
func (d *doctor) authority(cfg config.Config) {
	cmd := cfg.Authority.Command
	if len(cmd) == 0 {
		d.fail("authority", model.CodeAuthorityNotConfigured, "no [authority] command: every task is blocked",
			"set [authority] command in config.toml to your authority adapter (docs/authority.md has a minimal one)")
		return
	}
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		d.fail("authority", model.CodeAuthorityUnavailable, fmt.Sprintf("[authority] command %s: %v", cmd[0], err),
			"install the adapter, or give its absolute path in [authority] command")
		return
	}
	d.ok("authority", "%s", path)
}

// agents checks every agent: its command found, its adapter and profile,
// its last verification, as the daemon sees them (without a daemon: only
// whether its command is found).
func (d *doctor) agents(ctx context.Context, c *socketapi.Client, cfg config.Config, cfgOK bool) {
	if c != nil {
		as, err := c.Agents(ctx)
		if err == nil {
			for _, a := range as {
				d.agent(a)
			}
			return
		}
	}
	if !cfgOK {
		return
	}
	for _, name := range cfg.AgentNames() {
		a := cfg.Agents[name]
		if len(a.Command) == 0 {
			continue
		}
		if p, err := exec.LookPath(a.Command[0]); err == nil {
			d.ok("agent "+name, "%s (start the daemon for its adapter, profile and verification)", p)
		} else {
			d.warn("agent "+name, a.Command[0]+" is not on this shell's PATH", "install the agent's ACP adapter (docs/agents.md), or set [agents."+name+"] command")
		}
	}
}

// agent checks one agent as the daemon reports it.
func (d *doctor) agent(a model.AgentInfo) {
	name := "agent " + a.Name
	switch {
	case !a.Enabled:
		d.ok(name, "disabled: %s", a.EnabledReason)
	case !a.Configured:
		d.warn(name, "not installed: "+a.ConfiguredReason, "install its ACP adapter (docs/agents.md names the package), or set [agents."+a.Name+"] command; tasks to it are blocked agent_not_configured")
	case a.Profile.Name == "" && len(a.Profile.Generations) > 0:
		d.fail(name, model.CodeAgentUnsafeMode, fmt.Sprintf("%s: no hardening profile covers it: %s", adapterCell(a.Adapter), a.Profile.Summary),
			"install a version a profile covers (`relay agents` lists them)")
	case a.Hardening.RequireVerified && !a.Hardening.Current:
		d.fail(name, model.CodeAgentNotVerified, "require_verified, and "+a.Hardening.CurrentReason, "run `relay agents verify "+a.Name+"`")
	case a.Adapter.RuntimeProblem != "":
		// npm installs such an adapter with a warning only; it may start
		// and fail later, in the middle of a session.
		d.warn(name, a.Adapter.RuntimeProblem,
			fmt.Sprintf("run it with a Node that fits: put one first on the daemon's PATH and restart it with `relay daemon --pin-path`, or name it in config.toml: [agents.%s] command = [\"/path/to/node\", %q]; or install the adapter generation for your Node (docs/agents.md)", a.Name, a.Adapter.Path))
	case !a.WorkedLive && a.WorkedLiveReason != "" && !strings.HasPrefix(a.WorkedLiveReason, "never probed"):
		// The last probe on this adapter failed: its reason says what
		// to do (a login, most often).
		d.warn(name, fmt.Sprintf("%s, profile %s; its last probe failed: %s", adapterCell(a.Adapter), profileCell(a.Profile), a.WorkedLiveReason),
			"do what the probe says, then `relay agents probe "+a.Name+"`")
	case a.Hardening.Status == model.HardeningVerified && !a.Hardening.Current:
		d.warn(name, fmt.Sprintf("%s, profile %s; its verification is stale: %s", adapterCell(a.Adapter), profileCell(a.Profile), a.Hardening.CurrentReason),
			"run `relay agents verify "+a.Name+"` again")
	default:
		d.ok(name, "%s, profile %s, hardening %s", adapterCell(a.Adapter), profileCell(a.Profile), hardeningCell(a.Hardening))
	}
}

// report prints the checks and returns an error when one fails: the first
// failure's code, with every failure named.
func (d *doctor) report(e *cliIO, f *flags, home string) error {
	var failed []check
	for _, c := range d.checks {
		if c.Status == "fail" {
			failed = append(failed, c)
		}
	}
	if f.json {
		if err := printJSON(e.stdout, map[string]any{"home": home, "checks": d.checks, "blocking": len(failed)}); err != nil {
			return err
		}
	} else {
		mark := map[string]string{"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
		for _, c := range d.checks {
			fmt.Fprintf(e.stdout, "%s %-14s %s\n", mark[c.Status], c.Name, safeText(c.Detail))
			if c.Fix != "" {
				fmt.Fprintf(e.stdout, "     %-14s → %s\n", "", safeText(c.Fix))
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	var names []string
	for _, c := range failed {
		names = append(names, c.Name)
	}
	return model.Errorf(failed[0].Code, "%d problem(s) would refuse or block tasks: %s", len(failed), strings.Join(names, ", ")).
		WithHint(failed[0].Fix)
}
