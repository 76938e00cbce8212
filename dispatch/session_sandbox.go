package dispatch

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/model"
)

// errSandbox marks a start refused because the sandbox cannot run here
// (sandbox.ErrUnavailable) or cannot hold the rule for this task.
var errSandbox = sandbox.ErrUnavailable

// sandboxExec is the command that applies Landlock inside the sandbox and
// executes the agent (Options.SandboxExec); none: bubblewrap alone.
func (d *Dispatcher) sandboxExec() []string { return d.o.SandboxExec }

// SandboxStatus says whether the sandbox every agent runs in can run here.
func (d *Dispatcher) SandboxStatus() sandbox.Status {
	return sandbox.Check(bwrapPath, exec.LookPath)
}

// sandboxed returns argv run inside the task's sandbox (package sandbox),
// and env with the agent's own home: the filesystem read-only but for a
// scratch /tmp and that home (per-task directories, removed at teardown)
// and, for a state_changing task, the cwd; the rule's masks; its own
// user, pid and IPC namespaces; Landlock inside.
func (s *session) sandboxed(argv, env []string) ([]string, []string, error) {
	// The agent's program is found before anything is made: a missing
	// one fails the spawn, as it would unsandboxed.
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, err
	}
	argv = append([]string{prog}, argv[1:]...)
	st := sandbox.Check(bwrapPath, exec.LookPath)
	if !st.OK {
		return nil, nil, st.Unavailable()
	}
	base, err := s.d.profileDir()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(base, "sandbox-")
	if err != nil {
		return nil, nil, err
	}
	s.sandboxDir = dir
	plan := sandbox.Plan{
		Cwd: s.cwd, WritableCwd: s.mode == model.ModeStateChanging,
		Scratch: filepath.Join(dir, "tmp"),
		UID:     os.Geteuid(), GID: os.Getegid(),
		Exec: s.d.sandboxExec(),
	}
	if err := os.Mkdir(plan.Scratch, 0o700); err != nil {
		return nil, nil, err
	}
	home, homeEnv, err := s.ownHome(dir, env)
	if err != nil {
		return nil, nil, fmt.Errorf("making the agent's own home: %w", err)
	}
	env = append(slices.Clip(env), homeEnv...)
	inTmp := needsHostTmp(s.cwd, s.d.o.Home, argv, plan.Exec, env)
	plan.HostTmp = inTmp != ""
	if r := s.sandboxRule(); r != nil {
		plan.NoLandlock = r.OwnSandbox
		if r.OwnSandbox && plan.HostTmp {
			// Its own sandbox writes /tmp by name, which is then the
			// host's, read-only: every command it runs would fail while
			// the task "completes".
			return nil, nil, &cannotHold{
				reason: fmt.Sprintf("%s runs its commands in a sandbox of its own, which cannot start when the task needs the host's /tmp, read-only (%s is in /tmp): every command would fail", s.agent, inTmp),
				fix:    "keep the task's cwd, the relay home (--home) and the agent's program out of /tmp (e.g. under your home directory)"}
		}
	}
	if s.rule != nil {
		if len(s.rule.Masks) > 0 {
			if plan.Masks, plan.After, err = s.maskArgs(plan); err != nil {
				return nil, nil, err
			}
		}
	}
	// The agent's own home and its own configuration directory are its
	// (fresh, removed at teardown): writable.
	for _, own := range []string{home, s.ownDir} {
		if own != "" {
			plan.Binds = append(plan.Binds, sandbox.Bind{Src: own, Dst: own})
		}
	}
	for _, w := range s.d.testWritable() {
		plan.Binds = append(plan.Binds, sandbox.Bind{Src: w, Dst: w})
	}
	s.log.Printf("sandbox (%s): read-only but for %s; own user, pid and IPC namespaces%s",
		st.Layers(), strings.Join(plan.Writable(), ", "), landlockNote(plan))
	return plan.Command(st.Bwrap, argv), env, nil
}

// homeCopyLimit bounds each path of Rule.Home copied into an agent's own
// home: a login, a config directory, never a history.
const homeCopyLimit = 64 << 20

// ownHome makes the agent's own home in dir (Rule.Home) and returns it
// with the variables that point the agent at it: HOME, the XDG data,
// state and cache directories in it, the rule's HomeVars, and
// XDG_CONFIG_HOME at the user's (read-only in the sandbox). env is the
// agent's environment so far, whose HOME is the user's.
func (s *session) ownHome(dir string, env []string) (string, []string, error) {
	get := func(k string) string {
		if v, ok := envValue(env, k); ok {
			return v
		}
		return os.Getenv(k)
	}
	real := get("HOME")
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", nil, err
	}
	// Where each part of the agent's home comes from in the user's: a
	// variable set in the daemon's environment, else the same path in
	// the user's home.
	from := map[string]string{".local/share": get("XDG_DATA_HOME"), ".local/state": get("XDG_STATE_HOME"), ".cache": get("XDG_CACHE_HOME")}
	var vars []string
	r := s.sandboxRule()
	if r != nil {
		for _, k := range slices.Sorted(maps.Keys(r.HomeVars)) {
			rel := r.HomeVars[k]
			from[rel] = get(k)
			if err := os.MkdirAll(filepath.Join(home, rel), 0o700); err != nil {
				return "", nil, err
			}
			vars = append(vars, k+"="+filepath.Join(home, rel))
		}
	}
	var copied []string
	if r != nil && real != "" {
		masked := s.maskedNames()
		for _, rel := range r.Home {
			src := filepath.Join(real, rel)
			for prefix, v := range from {
				if rest, ok := strings.CutPrefix(rel, prefix+"/"); ok && v != "" {
					src = filepath.Join(v, rest)
				}
			}
			ok, err := copyInto(src, filepath.Join(home, rel), homeCopyLimit, masked.in(src))
			if err != nil {
				return "", nil, fmt.Errorf("copying %s: %w", src, err)
			}
			if ok {
				copied = append(copied, rel)
			}
		}
	}
	config := get("XDG_CONFIG_HOME")
	if config == "" && real != "" {
		config = filepath.Join(real, ".config")
	}
	if r != nil && r.HomeVars["XDG_CONFIG_HOME"] != "" {
		config = "" // the agent's own, among vars
	}
	out := append(vars, "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	if config != "" {
		out = append(out, "XDG_CONFIG_HOME="+config)
	}
	s.log.Printf("the agent's home is its own, %s (copied from %s: %s)", home, real, strings.Join(copied, ", "))
	return home, out, nil
}

// maskedNames are the names the rule's masks hide, by canonical
// directory.
type maskedNames map[string][]string

// maskedNames expands the rule's masks for the session's cwd, once.
func (s *session) maskedNames() maskedNames {
	if s.rule == nil || len(s.rule.Masks) == 0 {
		return nil
	}
	_, names, err := maskDirs(s.rule.Masks, s.cwd)
	if err != nil {
		return nil
	}
	return names
}

// in returns the names hidden in directory dir.
func (m maskedNames) in(dir string) []string {
	if len(m) == 0 {
		return nil
	}
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	return m[canon]
}

// copyInto copies the file or directory src to dst (regular files and
// directories only; symbolic links and anything else are skipped; in a
// directory, the entries named in skip too), and reports whether src
// existed. Files adding up to more than limit bytes are an error.
func copyInto(src, dst string, limit int64, skip []string) (bool, error) {
	_, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var total int64
	err = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if filepath.Dir(p) == src && slices.Contains(skip, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > limit {
				return fmt.Errorf("over %d bytes: not a login or a config file", limit)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o600)
		}
		return nil
	})
	return true, err
}

func landlockNote(p sandbox.Plan) string {
	switch {
	case len(p.Exec) == 0:
		return "; no Landlock step (no sandbox exec command)"
	case p.NoLandlock:
		return ";" + noLandlockOwnSandbox
	}
	return ""
}

// noLandlockOwnSandbox says why an agent that runs a sandbox of its own
// (Rule.OwnSandbox) runs without the Landlock layer.
const noLandlockOwnSandbox = " (Landlock left out: the agent runs a bubblewrap sandbox of its own, whose mounts Landlock forbids)"

// maskArgs returns the bubblewrap arguments of the rule's masks for the
// plan: bind-backs read-only, directories the sandbox makes anew skipped.
// A mask on a writable cwd itself cannot be held (binding the cwd
// writable would show what it hides), so it refuses the start.
func (s *session) maskArgs(plan sandbox.Plan) (args, after []string, err error) {
	if plan.WritableCwd {
		dirs, names, err := maskDirs(s.rule.Masks, plan.Cwd)
		if err != nil {
			return nil, nil, err
		}
		if slices.Contains(dirs, filepath.Clean(plan.Cwd)) {
			return nil, nil, fmt.Errorf("%w: the profile masks %s in the cwd, which a state_changing task writes",
				errSandbox, strings.Join(names[filepath.Clean(plan.Cwd)], ", "))
		}
	}
	args, after, err = maskBinds(s.rule.Masks, plan.Cwd, false, plan.Fresh)
	if err != nil {
		return nil, nil, err
	}
	s.log.Printf("masked for the agent, in a mount namespace of its own: %s", describeMasks(s.rule.Masks))
	return append(args, s.maskedAdapterBinds()...), after, nil
}

// removeSandbox removes the run's per-task sandbox directories.
func (s *session) removeSandbox() {
	if s.sandboxDir != "" {
		_ = os.RemoveAll(s.sandboxDir)
	}
}

// cannotHold is a start refused because the sandbox cannot hold this
// task for this agent, though it runs here: the reason and its fix.
type cannotHold struct{ reason, fix string }

func (e *cannotHold) Error() string        { return e.reason }
func (e *cannotHold) Is(target error) bool { return target == errSandbox }

// isSandboxErr reports whether err refused a start for the sandbox.
func isSandboxErr(err error) bool { return errors.Is(err, errSandbox) }

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

// sandboxRefusal is the error of a dispatch refused because the sandbox
// cannot run (or cannot hold the rule): agent_sandbox_unavailable, with
// the fix for this machine.
func sandboxRefusal(agent string, err error) *model.Error {
	st := sandbox.Check(bwrapPath, exec.LookPath)
	hint := st.Fix
	var ch *cannotHold
	switch {
	case errors.As(err, &ch):
		hint = ch.fix
	case st.OK || hint == "":
		hint = "read the task log"
	}
	return &model.Error{Code: model.CodeAgentSandboxUnavailable,
		Message: fmt.Sprintf("agent %s was not started: %v", agent, err), Hint: hint, Err: err}
}

// sandboxRule is the rule whose sandbox fields (Home, HomeVars,
// OwnSandbox) the run's sandbox follows: the session's, or the bare one
// of a run without its profile (the test switch).
func (s *session) sandboxRule() *Rule {
	if s.rule != nil {
		return s.rule
	}
	return s.bare
}

// bareRule keeps of the first profile's rule for mode only what the
// sandbox needs for the agent to run at all: its own home and whether it
// runs a sandbox of its own. Nil when there is none.
func bareRule(profiles []*Profile, mode model.Mode) *Rule {
	for _, p := range profiles {
		if r, ok := p.Rules[mode]; ok {
			return &Rule{Home: r.Home, HomeVars: r.HomeVars, OwnSandbox: r.OwnSandbox}
		}
	}
	return nil
}
