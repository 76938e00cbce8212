package hardening

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/model"
)

// LaunchInput is what PlanLaunch needs to plan an agent's sandbox: the
// rule's sandbox fields, the task, the agent's argv and environment, and
// facts of the host.
type LaunchInput struct {
	// Agent names the agent, for a refusal.
	Agent string
	// Home, HomeVars, OwnSandbox and Masks are the rule's (Rule); all
	// empty for an agent without one.
	Home       []string
	HomeVars   map[string]string
	OwnSandbox bool
	Masks      []Mask
	// Cwd is the task's cwd, canonical; Mode, the task's mode (a
	// state_changing task writes its cwd).
	Cwd  string
	Mode model.Mode
	// Argv is the agent's argv, argv[0] a path.
	Argv []string
	// Env is the agent's environment so far. Its HOME is the user's.
	Env []string
	// Getenv reads the daemon's environment (os.Getenv): a variable Env
	// does not set is read there. Nil reads nothing.
	Getenv func(string) string
	// RelayHome is the relay's home (--home): a facade inside the task
	// dials its socket there.
	RelayHome string
	// Exec is the sandbox exec command (sandbox.Plan.Exec); Bwrap,
	// bubblewrap's executable.
	Exec  []string
	Bwrap string
	// UID and GID are the agent's ids inside its user namespace.
	UID, GID int
	// Dir is the per-task directory the scratch and the agent's home go
	// in.
	Dir string
	// Writable are more directories bound writable where they are (the
	// session's own directory, Rule.OwnDir; the test switch's).
	Writable []string
	// Adapter is the agent's executable, symbolic links resolved, or "".
	// When a mask would hide it, its installation is bound back.
	Adapter string
}

// LaunchPlan is what to do to start an agent in its sandbox. PlanLaunch
// makes it and creates nothing: the caller makes the scratch and
// Mkdirs, makes the Copies, then starts Argv with Env.
type LaunchPlan struct {
	// Argv is the command line that starts the agent in its sandbox.
	Argv []string
	// Plan is the sandbox Argv is made from.
	Plan sandbox.Plan
	// Env is the agent's environment: the input's, then the variables
	// that point the agent at its own home.
	Env []string
	// Home is the agent's own home, in Dir. UserHome is the user's
	// (HOME), where the copies come from.
	Home, UserHome string
	// Mkdirs are the directories to make (0700) once the scratch is
	// made, in order: the agent's home, then its HomeVars directories.
	Mkdirs []string
	// Copies are what to copy from the user's home into the agent's,
	// after Mkdirs.
	Copies []Copy
	// AdapterBind is the agent's own installation, bound back read-only
	// because a mask would hide it, or "".
	AdapterBind string
}

// Copy is a path of Rule.Home copied into the agent's own home.
type Copy struct {
	// Rel is the path, relative to either home.
	Rel string
	// Src is where it is copied from: in the user's home, or under the
	// variable (XDG_DATA_HOME, a HomeVars one) that moves it. Dst is in
	// the agent's home.
	Src, Dst string
	// Skip are names of Src, a directory, that are not copied: the masks
	// hide them there.
	Skip []string
}

// CannotHold is a start refused because the sandbox cannot hold this
// task for this agent, though it runs here: the reason and its fix.
type CannotHold struct{ Reason, Fix string }

func (e *CannotHold) Error() string { return e.Reason }

// Is makes a CannotHold a sandbox.ErrUnavailable.
func (e *CannotHold) Is(target error) bool { return target == sandbox.ErrUnavailable }

// PlanLaunch returns how to start the agent of in inside its sandbox: the
// filesystem read-only but for a scratch /tmp, the agent's own home (both
// in in.Dir) and, for a state_changing task, the cwd; the rule's masks;
// its own user, pid and IPC namespaces; Landlock inside unless the agent
// runs a sandbox of its own. It reads the filesystem (symbolic links, the
// masked directories) and writes nothing. It refuses an agent with its
// own sandbox that needs the host's /tmp (a *CannotHold), and a mask on
// the cwd of a state_changing task.
func PlanLaunch(in LaunchInput) (LaunchPlan, error) {
	plan := sandbox.Plan{
		Cwd: in.Cwd, WritableCwd: in.Mode == model.ModeStateChanging,
		Scratch: filepath.Join(in.Dir, "tmp"),
		UID:     in.UID, GID: in.GID,
		Exec:       in.Exec,
		NoLandlock: in.OwnSandbox,
	}
	// The masks are expanded once, from one look at the directories: the
	// copies' skip lists, the mount arguments and the adapter's bind-back
	// agree.
	var masks maskSet
	var err error
	if len(in.Masks) > 0 {
		if masks, err = expandMasks(in.Masks, in.Cwd); err != nil {
			return LaunchPlan{}, err
		}
	}
	out := ownHome(in, masks)
	inTmp := needsHostTmp(in.Cwd, in.RelayHome, in.Argv, in.Exec, out.Env)
	plan.HostTmp = inTmp != ""
	if in.OwnSandbox && plan.HostTmp {
		// Its own sandbox writes /tmp by name, which is then the host's,
		// read-only: every command it runs would fail while the task
		// "completes".
		return LaunchPlan{}, &CannotHold{
			Reason: fmt.Sprintf("%s runs its commands in a sandbox of its own, which cannot start when the task needs the host's /tmp, read-only (%s is in /tmp): every command would fail", in.Agent, inTmp),
			Fix:    "keep the task's cwd, the relay home (--home) and the agent's program out of /tmp (e.g. under your home directory)"}
	}
	if len(in.Masks) > 0 {
		if plan.Masks, plan.After, err = maskArgs(masks, plan); err != nil {
			return LaunchPlan{}, err
		}
		if out.AdapterBind = masks.adapterBind(in.Adapter); out.AdapterBind != "" {
			plan.Masks = append(plan.Masks, "--ro-bind", out.AdapterBind, out.AdapterBind)
		}
	}
	// The agent's own home and its own directories are its (fresh,
	// removed at teardown): writable.
	for _, own := range append([]string{out.Home}, in.Writable...) {
		if own != "" {
			plan.Binds = append(plan.Binds, sandbox.Bind{Src: own, Dst: own})
		}
	}
	out.Plan, out.Argv = plan, plan.Command(in.Bwrap, in.Argv)
	return out, nil
}

// ownHome plans the agent's own home in in.Dir (Rule.Home): its
// directories, its copies, and the variables that point the agent at it
// (HOME, the XDG data, state and cache directories in it, the rule's
// HomeVars, and XDG_CONFIG_HOME at the user's, read-only in the sandbox)
// after in.Env in Env.
func ownHome(in LaunchInput, masks maskSet) LaunchPlan {
	get := func(k string) string {
		if v, ok := EnvValue(in.Env, k); ok {
			return v
		}
		if in.Getenv != nil {
			return in.Getenv(k)
		}
		return ""
	}
	real := get("HOME")
	home := filepath.Join(in.Dir, "home")
	out := LaunchPlan{Home: home, UserHome: real, Mkdirs: []string{home}}
	// Where each part of the agent's home comes from in the user's: a
	// variable set in the daemon's environment, else the same path in
	// the user's home.
	from := map[string]string{".local/share": get("XDG_DATA_HOME"), ".local/state": get("XDG_STATE_HOME"), ".cache": get("XDG_CACHE_HOME")}
	var vars []string
	for _, k := range slices.Sorted(maps.Keys(in.HomeVars)) {
		rel := in.HomeVars[k]
		from[rel] = get(k)
		out.Mkdirs = append(out.Mkdirs, filepath.Join(home, rel))
		vars = append(vars, k+"="+filepath.Join(home, rel))
	}
	if real != "" && len(in.Home) > 0 {
		for _, rel := range in.Home {
			src := filepath.Join(real, rel)
			for _, prefix := range slices.Sorted(maps.Keys(from)) {
				if rest, ok := strings.CutPrefix(rel, prefix+"/"); ok && from[prefix] != "" {
					src = filepath.Join(from[prefix], rest)
				}
			}
			out.Copies = append(out.Copies, Copy{Rel: rel, Src: src, Dst: filepath.Join(home, rel), Skip: masks.in(src)})
		}
	}
	config := get("XDG_CONFIG_HOME")
	if config == "" && real != "" {
		config = filepath.Join(real, ".config")
	}
	if in.HomeVars["XDG_CONFIG_HOME"] != "" {
		config = "" // the agent's own, among vars
	}
	vars = append(vars, "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	if config != "" {
		vars = append(vars, "XDG_CONFIG_HOME="+config)
	}
	out.Env = append(slices.Clip(in.Env), vars...)
	return out
}

// maskArgs returns the bubblewrap arguments of masks for plan: bind-backs
// read-only, directories the sandbox makes anew skipped. A mask on a
// writable cwd itself cannot be held (binding the cwd writable would show
// what it hides), so it refuses the start.
func maskArgs(masks maskSet, plan sandbox.Plan) (args, after []string, err error) {
	if plan.WritableCwd && len(masks.names[filepath.Clean(plan.Cwd)]) > 0 {
		return nil, nil, fmt.Errorf("%w: the profile masks %s in the cwd, which a state_changing task writes",
			sandbox.ErrUnavailable, strings.Join(masks.names[filepath.Clean(plan.Cwd)], ", "))
	}
	return masks.binds(false, plan.Fresh)
}

// adapterBind returns the child of a masked path that holds real (the
// agent's executable), or "". The Hermes installer puts Hermes in
// ~/.hermes/hermes-agent, and .hermes is masked in the cwd and every
// directory above it, the home directory among them: only the masked
// entry's child that holds the executable comes back, not the rest of it
// (plugins, config, .env).
func (m maskSet) adapterBind(real string) string {
	if real == "" {
		return ""
	}
	for _, d := range m.dirs {
		for _, n := range m.names[d] {
			hidden := filepath.Join(d, n)
			rel, err := filepath.Rel(hidden, real)
			if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			first, _, _ := strings.Cut(rel, string(filepath.Separator))
			return filepath.Join(hidden, first)
		}
	}
	return ""
}

// needsHostTmp returns the first path the agent needs in the host's /tmp,
// or "": its cwd, the relay home (a facade inside the task dials its
// socket), its program or the sandbox exec command (symbolic links
// followed), or any absolute path its environment names (HOME,
// CODEX_HOME, PATH entries…). Then the host's /tmp stays, read-only.
func needsHostTmp(cwd, home string, argv, execArgv, env []string) string {
	paths := []string{cwd, home}
	for _, a := range [][]string{argv, execArgv} {
		if len(a) > 0 && filepath.IsAbs(a[0]) {
			paths = append(paths, a[0])
			if r, err := filepath.EvalSymlinks(a[0]); err == nil {
				paths = append(paths, r)
			}
		}
	}
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		paths = append(paths, filepath.SplitList(v)...)
	}
	if i := slices.IndexFunc(paths, func(p string) bool { return filepath.IsAbs(p) && sandbox.InTmp(p) }); i >= 0 {
		return paths[i]
	}
	return ""
}

// EnvValue returns the last value of name in env.
func EnvValue(env []string, name string) (string, bool) {
	val, found := "", false
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok && k == name {
			val, found = v, true
		}
	}
	return val, found
}
