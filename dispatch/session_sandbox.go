package dispatch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/model"
)

// errSandbox marks a start refused because the sandbox cannot run here
// (sandbox.ErrUnavailable) or cannot hold the rule for this task.
var errSandbox = sandbox.ErrUnavailable

// sandboxExec is the command that applies Landlock inside the sandbox and
// executes the agent: Options.SandboxExec, else the shim's executable when
// it is a real path (the tests' shim program has the same subcommand),
// else none (bubblewrap alone).
func (d *Dispatcher) sandboxExec() []string {
	switch {
	case len(d.o.SandboxExec) > 0:
		return d.o.SandboxExec
	case len(d.o.Shim) > 0 && filepath.IsAbs(d.o.Shim[0]) && !strings.HasPrefix(d.o.Shim[0], "/proc/"):
		return []string{d.o.Shim[0], sandbox.ExecCommand}
	}
	return nil
}

// SandboxStatus says whether the sandbox every agent runs in can run here.
func (d *Dispatcher) SandboxStatus() sandbox.Status {
	return sandbox.Check(bwrapPath, exec.LookPath)
}

// sandboxed returns argv run inside the task's sandbox (package sandbox):
// the filesystem read-only but for a scratch /tmp and the rule's state
// directories (per-task directories, removed at teardown) and, for a
// state_changing task, the cwd; the rule's masks; its own user, pid and
// IPC namespaces; Landlock inside. env is the agent's environment, from
// which the paths it must still see are taken.
func (s *session) sandboxed(argv, env []string) ([]string, error) {
	// The agent's program is found before anything is made: a missing
	// one fails the spawn, as it would unsandboxed.
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	argv = append([]string{prog}, argv[1:]...)
	st := sandbox.Check(bwrapPath, exec.LookPath)
	if !st.OK {
		return nil, st.Unavailable()
	}
	base, err := s.d.profileDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "sandbox-")
	if err != nil {
		return nil, err
	}
	s.sandboxDir = dir
	plan := sandbox.Plan{
		Cwd: s.cwd, WritableCwd: s.mode == model.ModeStateChanging,
		Scratch: filepath.Join(dir, "tmp"),
		UID:     os.Geteuid(), GID: os.Getegid(),
		Exec: s.d.sandboxExec(),
	}
	if err := os.Mkdir(plan.Scratch, 0o700); err != nil {
		return nil, err
	}
	plan.HostTmp = needsHostTmp(s.cwd, s.d.o.Home, argv, plan.Exec, env)
	if s.rule != nil {
		plan.NoLandlock = s.rule.OwnSandbox
		for i, p := range s.rule.State {
			dst, ok := expandPathIn(p, env)
			if !ok {
				continue
			}
			src := filepath.Join(dir, "state", strconv.Itoa(i))
			if err := os.MkdirAll(src, 0o700); err != nil {
				return nil, err
			}
			// The mount point must exist: where the agent would have
			// made it on its first run anyway.
			if err := os.MkdirAll(dst, 0o700); err != nil {
				return nil, fmt.Errorf("making the state directory %s the profile names: %w", dst, err)
			}
			if dst, err = filepath.EvalSymlinks(dst); err != nil {
				return nil, err
			}
			plan.Binds = append(plan.Binds, sandbox.Bind{Src: src, Dst: dst})
		}
		if len(s.rule.Masks) > 0 {
			if plan.Masks, plan.After, err = s.maskArgs(plan); err != nil {
				return nil, err
			}
		}
	}
	// The session's own HOME and own configuration directory are its
	// (fresh, removed at teardown): writable.
	for _, own := range []string{s.emptyHome, s.ownDir} {
		if own != "" {
			plan.Binds = append(plan.Binds, sandbox.Bind{Src: own, Dst: own})
		}
	}
	for _, w := range s.d.testWritable() {
		plan.Binds = append(plan.Binds, sandbox.Bind{Src: w, Dst: w})
	}
	bwrap, err := exec.LookPath(bwrapPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSandbox, err)
	}
	s.log.Printf("sandbox (%s): read-only but for %s; own user, pid and IPC namespaces%s",
		st.Layers(), strings.Join(plan.Writable(), ", "), landlockNote(plan))
	return plan.Command(bwrap, argv), nil
}

func landlockNote(p sandbox.Plan) string {
	switch {
	case len(p.Exec) == 0:
		return "; no Landlock step (no sandbox exec command)"
	case p.NoLandlock:
		return "; Landlock left out (the agent runs a bubblewrap sandbox of its own)"
	}
	return ""
}

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
	state := func(p string) bool {
		return slices.ContainsFunc(plan.Binds, func(b sandbox.Bind) bool { return b.Dst == p })
	}
	args, after, err = maskBinds(s.rule.Masks, plan.Cwd, false, plan.Fresh, state)
	if err != nil {
		return nil, nil, err
	}
	s.log.Printf("masked for the agent: %s", describeMasks(s.rule.Masks))
	return append(args, s.maskedAdapterBinds()...), after, nil
}

// expandPathIn expands a leading "~" and $VARS in p from env (the agent's
// environment; a later entry wins), else the daemon's; ok is false when a
// variable is unset or empty.
func expandPathIn(p string, env []string) (string, bool) {
	look := func(k string) string {
		if v, ok := envValue(env, k); ok {
			return v
		}
		return os.Getenv(k)
	}
	ok := true
	p = os.Expand(p, func(v string) string {
		val := look(v)
		if val == "" {
			ok = false
		}
		return val
	})
	if rest, found := strings.CutPrefix(p, "~/"); found {
		home := look("HOME")
		if home == "" {
			return "", false
		}
		p = filepath.Join(home, rest)
	}
	return filepath.Clean(p), ok && filepath.IsAbs(p)
}

// removeSandbox removes the run's per-task sandbox directories.
func (s *session) removeSandbox() {
	if s.sandboxDir != "" {
		_ = os.RemoveAll(s.sandboxDir)
	}
}

// isSandboxErr reports whether err refused a start for the sandbox.
func isSandboxErr(err error) bool { return errors.Is(err, errSandbox) }

// needsHostTmp reports whether the agent needs something in the host's
// /tmp: its cwd, the relay home (a facade inside the task dials its
// socket), its program or the sandbox exec command (symbolic links
// followed), or any absolute path its environment names (HOME,
// CODEX_HOME, PATH entries…). Then the host's /tmp stays, read-only.
func needsHostTmp(cwd, home string, argv, execArgv, env []string) bool {
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
	return slices.ContainsFunc(paths, func(p string) bool { return filepath.IsAbs(p) && sandbox.InTmp(p) })
}

// sandboxRefusal is the error of a dispatch refused because the sandbox
// cannot run (or cannot hold the rule): agent_sandbox_unavailable, with
// the fix for this machine.
func sandboxRefusal(agent string, err error) *model.Error {
	st := sandbox.Check(bwrapPath, exec.LookPath)
	hint := st.Fix
	if st.OK || hint == "" {
		hint = "read the task log; `relay doctor` checks the sandbox"
	}
	return &model.Error{Code: model.CodeAgentSandboxUnavailable,
		Message: fmt.Sprintf("agent %s was not started: %v", agent, err), Hint: hint, Err: err}
}
