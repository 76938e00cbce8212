package hardening_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/model"
)

// The sandbox's launch plan, made without starting or creating anything:
// the per-task directory in baseInput does not even exist.
const (
	taskDir = "/srv/relay/profiles/sandbox-1"
	ownHome = taskDir + "/home"
	scratch = taskDir + "/tmp"
	cwd     = "/srv/project"
	agent   = "/usr/local/bin/agent"
)

func baseInput() hardening.LaunchInput {
	return hardening.LaunchInput{
		Agent: "codex", Cwd: cwd, Mode: model.ModeReadOnly,
		Argv:      []string{agent, "acp"},
		Env:       []string{"HOME=/home/u", "PATH=/usr/local/bin:/usr/bin"},
		Getenv:    func(string) string { return "" },
		RelayHome: "/srv/relay", Exec: []string{"/usr/local/bin/relay", sandbox.ExecCommand}, Bwrap: "/usr/bin/bwrap",
		UID: 1000, GID: 1000, Dir: taskDir,
	}
}

// seq reports whether argv holds want, in a row.
func seq(argv []string, want ...string) bool {
	for i := 0; i+len(want) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// launchCase is one plan and what it must hold.
type launchCase struct {
	name string
	edit func(in *hardening.LaunchInput)
	// argv are runs of arguments the command line holds; notArgv, runs
	// it does not.
	argv, notArgv [][]string
	// env are variables the environment holds; notEnv, names it does
	// not set.
	env    []string
	notEnv []string
	mkdirs []string
	copies []hardening.Copy // nil: not checked
	binds  []sandbox.Bind
	check  func(t *testing.T, lp hardening.LaunchPlan)
}

func TestPlanLaunch(t *testing.T) {
	t.Parallel()
	for _, c := range launchCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := baseInput()
			if c.edit != nil {
				c.edit(&in)
			}
			lp, err := hardening.PlanLaunch(in)
			if err != nil {
				t.Fatal(err)
			}
			checkLaunch(t, c, lp)
		})
	}
}

func checkLaunch(t *testing.T, c launchCase, lp hardening.LaunchPlan) {
	t.Helper()
	for _, w := range c.argv {
		if !seq(lp.Argv, w...) {
			t.Errorf("argv lacks %q: %q", w, lp.Argv)
		}
	}
	for _, w := range c.notArgv {
		if seq(lp.Argv, w...) {
			t.Errorf("argv holds %q: %q", w, lp.Argv)
		}
	}
	for _, w := range c.env {
		if !slices.Contains(lp.Env, w) {
			t.Errorf("env lacks %s: %q", w, lp.Env)
		}
	}
	for _, n := range c.notEnv {
		if v, ok := hardening.EnvValue(lp.Env, n); ok {
			t.Errorf("env sets %s=%s", n, v)
		}
	}
	if c.mkdirs != nil && !slices.Equal(lp.Mkdirs, c.mkdirs) {
		t.Errorf("mkdirs = %q, want %q", lp.Mkdirs, c.mkdirs)
	}
	if c.copies != nil && !slices.EqualFunc(lp.Copies, c.copies, func(a, b hardening.Copy) bool {
		return a.Rel == b.Rel && a.Src == b.Src && a.Dst == b.Dst && slices.Equal(a.Skip, b.Skip)
	}) {
		t.Errorf("copies = %+v, want %+v", lp.Copies, c.copies)
	}
	if c.binds != nil && !slices.Equal(lp.Plan.Binds, c.binds) {
		t.Errorf("binds = %+v, want %+v", lp.Plan.Binds, c.binds)
	}
	if c.check != nil {
		c.check(t, lp)
	}
}

func launchCases() []launchCase {
	return append(taskCases(), homeCases()...)
}

// taskCases: what the task's mode and cwd, and the agent's own sandbox,
// make of the command line.
func taskCases() []launchCase {
	return []launchCase{{
		name:    "read_only",
		argv:    [][]string{{"--ro-bind", "/", "/"}, {"--bind", scratch, "/tmp"}, {"--setenv", "TMPDIR", "/tmp"}, {"--chdir", cwd}, {"--", agent, agent, "acp"}},
		notArgv: [][]string{{"--bind", cwd, cwd}, {"--no-landlock"}, {"--rw", cwd}},
		binds:   []sandbox.Bind{{Src: ownHome, Dst: ownHome}},
		mkdirs:  []string{ownHome},
		check: func(t *testing.T, lp hardening.LaunchPlan) {
			if lp.Argv[0] != "/usr/bin/bwrap" || lp.Plan.Scratch != scratch || lp.Plan.HostTmp || lp.Plan.NoLandlock {
				t.Errorf("plan %+v, argv %q", lp.Plan, lp.Argv)
			}
		},
	}, {
		name: "state_changing writes its cwd",
		edit: func(in *hardening.LaunchInput) { in.Mode = model.ModeStateChanging },
		argv: [][]string{{"--bind", cwd, cwd}, {"--rw", cwd}},
	}, {
		name:    "a cwd in /tmp keeps the host's /tmp and binds the scratch at its own path",
		edit:    func(in *hardening.LaunchInput) { in.Cwd = "/tmp/project"; in.Mode = model.ModeStateChanging },
		argv:    [][]string{{"--bind", scratch, scratch}, {"--setenv", "TMPDIR", scratch}, {"--bind", "/tmp/project", "/tmp/project"}},
		notArgv: [][]string{{"--bind", scratch, "/tmp"}, {"--tmpfs", "/tmp"}},
		check: func(t *testing.T, lp hardening.LaunchPlan) {
			if !lp.Plan.HostTmp {
				t.Error("HostTmp not set")
			}
		},
	}, {
		name:    "an own sandbox leaves Landlock out",
		edit:    func(in *hardening.LaunchInput) { in.OwnSandbox = true },
		argv:    [][]string{{sandbox.ExecCommand, "--no-landlock"}},
		notArgv: [][]string{{"--bind", scratch, scratch}},
		check: func(t *testing.T, lp hardening.LaunchPlan) {
			if !lp.Plan.NoLandlock {
				t.Error("NoLandlock not set")
			}
		},
	}, {
		name:  "own directories are bound writable after the home",
		edit:  func(in *hardening.LaunchInput) { in.Writable = []string{"", "/srv/relay/profiles/cursor-1", "/srv/w"} },
		binds: []sandbox.Bind{{Src: ownHome, Dst: ownHome}, {Src: "/srv/relay/profiles/cursor-1", Dst: "/srv/relay/profiles/cursor-1"}, {Src: "/srv/w", Dst: "/srv/w"}},
		argv:  [][]string{{"--rw", "/srv/w"}},
	}}
}

// homeCases: the agent's own home, its variables and its copies.
func homeCases() []launchCase {
	return []launchCase{{
		name: "the home's variables; XDG_CONFIG_HOME stays the user's",
		env: []string{"HOME=" + ownHome, "XDG_DATA_HOME=" + ownHome + "/.local/share", "XDG_STATE_HOME=" + ownHome + "/.local/state",
			"XDG_CACHE_HOME=" + ownHome + "/.cache", "XDG_CONFIG_HOME=/home/u/.config", "PATH=/usr/local/bin:/usr/bin"},
		copies: []hardening.Copy{},
	}, {
		name: "the daemon's XDG_CONFIG_HOME stays the agent's",
		edit: func(in *hardening.LaunchInput) { in.Getenv = getenv(map[string]string{"XDG_CONFIG_HOME": "/cfg"}) },
		env:  []string{"XDG_CONFIG_HOME=/cfg"},
	}, {
		name: "HomeVars point into the home, made, and copied from the variable's value",
		edit: func(in *hardening.LaunchInput) {
			in.Home = []string{".codex/config.toml", ".codex/auth.json", ".claude.json"}
			in.HomeVars = map[string]string{"CODEX_HOME": ".codex"}
			in.Env = append(in.Env, "CODEX_HOME=/srv/codex")
		},
		env:    []string{"CODEX_HOME=" + ownHome + "/.codex", "HOME=" + ownHome},
		mkdirs: []string{ownHome, ownHome + "/.codex"},
		copies: []hardening.Copy{
			{Rel: ".codex/config.toml", Src: "/srv/codex/config.toml", Dst: ownHome + "/.codex/config.toml"},
			{Rel: ".codex/auth.json", Src: "/srv/codex/auth.json", Dst: ownHome + "/.codex/auth.json"},
			{Rel: ".claude.json", Src: "/home/u/.claude.json", Dst: ownHome + "/.claude.json"},
		},
	}, {
		name: "XDG_DATA_HOME and a HomeVars XDG_CONFIG_HOME move the copies' sources; the config is the agent's own",
		edit: func(in *hardening.LaunchInput) {
			in.Home = []string{".local/share/opencode/auth.json", ".config/opencode", ".cache/x"}
			in.HomeVars = map[string]string{"XDG_CONFIG_HOME": ".config"}
			in.Getenv = getenv(map[string]string{"XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/cfg"})
		},
		env:    []string{"XDG_CONFIG_HOME=" + ownHome + "/.config", "XDG_DATA_HOME=" + ownHome + "/.local/share"},
		mkdirs: []string{ownHome, ownHome + "/.config"},
		copies: []hardening.Copy{
			{Rel: ".local/share/opencode/auth.json", Src: "/data/opencode/auth.json", Dst: ownHome + "/.local/share/opencode/auth.json"},
			{Rel: ".config/opencode", Src: "/cfg/opencode", Dst: ownHome + "/.config/opencode"},
			{Rel: ".cache/x", Src: "/home/u/.cache/x", Dst: ownHome + "/.cache/x"},
		},
		check: func(t *testing.T, lp hardening.LaunchPlan) {
			if v, _ := hardening.EnvValue(lp.Env, "XDG_CONFIG_HOME"); v != ownHome+"/.config" {
				t.Errorf("XDG_CONFIG_HOME=%s, want the agent's own (the last value)", v)
			}
		},
	}, {
		name: "no HOME: nothing copied",
		edit: func(in *hardening.LaunchInput) {
			in.Env = []string{"PATH=/usr/bin"}
			in.Home = []string{".claude.json"}
		},
		copies: []hardening.Copy{},
		notEnv: []string{"XDG_CONFIG_HOME"},
		env:    []string{"HOME=" + ownHome},
	}}
}

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// An agent that runs a sandbox of its own and needs the host's /tmp is
// refused with the fix, as the sandbox cannot hold it; so is a mask on
// the cwd of a state_changing task.
func TestPlanLaunchRefuses(t *testing.T) {
	t.Parallel()
	dir := realTempDir(t)
	for _, c := range []struct {
		name string
		edit func(in *hardening.LaunchInput)
		want []string
		fix  string
	}{{
		name: "own sandbox, cwd in /tmp",
		edit: func(in *hardening.LaunchInput) { in.OwnSandbox, in.Cwd = true, "/tmp/project" },
		want: []string{"codex runs its commands in a sandbox of its own", "(/tmp/project is in /tmp)"},
		fix:  "keep the task's cwd, the relay home (--home) and the agent's program out of /tmp (e.g. under your home directory)",
	}, {
		name: "own sandbox, HOME in /tmp",
		edit: func(in *hardening.LaunchInput) {
			in.OwnSandbox, in.Env = true, []string{"HOME=/tmp/u", "CODEX_HOME=/tmp/u/.codex"}
		},
		want: []string{"(/tmp/u is in /tmp)"},
		fix:  "keep the task's cwd",
	}, {
		name: "a mask on a writable cwd",
		edit: func(in *hardening.LaunchInput) {
			in.Cwd, in.Mode = dir, model.ModeStateChanging
			in.Masks = []hardening.Mask{{Dir: "{cwd}", Names: []string{".opencode", "opencode.json"}}}
		},
		want: []string{"the profile masks .opencode, opencode.json in the cwd, which a state_changing task writes"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := baseInput()
			c.edit(&in)
			_, err := hardening.PlanLaunch(in)
			if !errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("err = %v, want a sandbox refusal", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
			var ch *hardening.CannotHold
			if got := errors.As(err, &ch); got != (c.fix != "") || (got && !strings.HasPrefix(ch.Fix, c.fix)) {
				t.Errorf("CannotHold %v %+v, want fix %q", got, ch, c.fix)
			}
		})
	}
}

// The masks' arguments are in the plan, a masked name is not copied into
// the agent's home, and the agent's own installation under a masked name
// is bound back.
func TestPlanLaunchMasks(t *testing.T) {
	t.Parallel()
	root := realTempDir(t)
	user := filepath.Join(root, "u")
	project := filepath.Join(user, "project")
	for _, p := range []string{filepath.Join(user, ".codex", "rules"), filepath.Join(user, ".hermes", "agent", "bin"), project} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in := baseInput()
	in.Cwd, in.Env = project, []string{"HOME=" + user}
	in.Home = []string{".codex", ".hermes/config.yaml"}
	in.Masks = []hardening.Mask{{Dir: filepath.Join(user, ".codex"), Names: []string{"rules"}}, {Dir: "{cwd}", Names: []string{".hermes"}}}
	in.Adapter = filepath.Join(user, ".hermes", "agent", "bin", "hermes")
	lp, err := hardening.PlanLaunch(in)
	if err != nil {
		t.Fatal(err)
	}
	checkLaunch(t, launchCase{
		argv: [][]string{{"--tmpfs", filepath.Join(user, ".codex")}, {"--tmpfs", user}, {"--remount-ro", user},
			{"--ro-bind", filepath.Join(user, ".hermes", "agent"), filepath.Join(user, ".hermes", "agent")}},
		notArgv: [][]string{{"--ro-bind-try", filepath.Join(user, ".codex", "rules"), filepath.Join(user, ".codex", "rules")},
			{"--ro-bind-try", filepath.Join(user, ".hermes"), filepath.Join(user, ".hermes")}},
		copies: []hardening.Copy{
			{Rel: ".codex", Src: filepath.Join(user, ".codex"), Dst: ownHome + "/.codex", Skip: []string{"rules"}},
			{Rel: ".hermes/config.yaml", Src: filepath.Join(user, ".hermes", "config.yaml"), Dst: ownHome + "/.hermes/config.yaml"},
		},
	}, lp)
	if lp.AdapterBind != filepath.Join(user, ".hermes", "agent") {
		t.Errorf("AdapterBind = %q", lp.AdapterBind)
	}
	// The binds come after the masks, so that no mask's tmpfs covers
	// them; the read-only remounts after the binds.
	if i, j := slices.Index(lp.Argv, "--tmpfs"), slices.Index(lp.Argv, ownHome); i < 0 || j < i {
		t.Errorf("the home's bind is not after the masks: %q", lp.Argv)
	}
	if i, j := slices.Index(lp.Argv, ownHome), slices.Index(lp.Argv, "--remount-ro"); j < i {
		t.Errorf("a remount comes before the home's bind: %q", lp.Argv)
	}
}

func realTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
