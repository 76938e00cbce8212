package dispatch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hai-relay/relay/dispatch/hardening"
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

// bwrapPath is the bubblewrap executable the sandbox runs; a variable so
// that a test can point it elsewhere.
var bwrapPath = "bwrap"

// sandboxed returns argv run inside the task's sandbox (package sandbox),
// and env with the agent's own home: the filesystem read-only but for a
// scratch /tmp and that home (per-task directories, removed at teardown)
// and, for a state_changing task, the cwd; the rule's masks; its own
// user, pid and IPC namespaces; Landlock inside. The plan is
// hardening.PlanLaunch's; sandboxed makes what it names.
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
	lp, err := hardening.PlanLaunch(s.launchInput(dir, st.Bwrap, argv, env))
	if err != nil {
		return nil, nil, err
	}
	if err := os.Mkdir(lp.Plan.Scratch, 0o700); err != nil {
		return nil, nil, err
	}
	if err := s.makeHome(lp); err != nil {
		return nil, nil, fmt.Errorf("making the agent's own home: %w", err)
	}
	if r := s.sandboxRule(); r != nil && len(r.Masks) > 0 {
		s.log.Printf("masked for the agent, in a mount namespace of its own: %s", hardening.DescribeMasks(r.Masks))
	}
	if lp.AdapterBind != "" {
		s.log.Printf("bound back for the agent, read-only: %s (its own installation, under a masked name)", lp.AdapterBind)
	}
	s.log.Printf("sandbox (%s): read-only but for %s; own user, pid and IPC namespaces%s",
		st.Layers(), strings.Join(lp.Plan.Writable(), ", "), landlockNote(lp.Plan))
	return lp.Argv, lp.Env, nil
}

// launchInput is what hardening.PlanLaunch needs of the session to plan
// its sandbox in dir.
func (s *session) launchInput(dir, bwrap string, argv, env []string) hardening.LaunchInput {
	in := hardening.LaunchInput{
		Agent: s.agent, Cwd: s.cwd, Mode: s.mode, Argv: argv, Env: env, Getenv: os.Getenv,
		RelayHome: s.d.o.Home, Exec: s.d.sandboxExec(), Bwrap: bwrap,
		UID: os.Geteuid(), GID: os.Getegid(), Dir: dir,
		Writable: append([]string{s.ownDir}, s.d.testWritable()...),
		Adapter:  s.adapter.RealPath,
	}
	if r := s.sandboxRule(); r != nil {
		in.Home, in.HomeVars, in.OwnSandbox, in.Masks = r.Home, r.HomeVars, r.OwnSandbox, r.Masks
	}
	return in
}

// homeCopyLimit bounds each path of Rule.Home copied into an agent's own
// home: a login, a config directory, never a history.
const homeCopyLimit = 64 << 20

// makeHome makes the agent's own home as lp plans it: its directories,
// then the copies from the user's home.
func (s *session) makeHome(lp hardening.LaunchPlan) error {
	for _, d := range lp.Mkdirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	var copied []string
	for _, c := range lp.Copies {
		ok, err := copyInto(c.Src, c.Dst, homeCopyLimit, c.Skip)
		if err != nil {
			return fmt.Errorf("copying %s: %w", c.Src, err)
		}
		if ok {
			copied = append(copied, c.Rel)
		}
	}
	s.log.Printf("the agent's home is its own, %s (copied from %s: %s)", lp.Home, lp.UserHome, strings.Join(copied, ", "))
	return nil
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

// removeSandbox removes the run's per-task sandbox directories.
func (s *session) removeSandbox() {
	if s.sandboxDir != "" {
		_ = os.RemoveAll(s.sandboxDir)
	}
}

// isSandboxErr reports whether err refused a start for the sandbox.
func isSandboxErr(err error) bool { return errors.Is(err, errSandbox) }

// sandboxRefusal is the error of a dispatch refused because the sandbox
// cannot run (or cannot hold the rule): agent_sandbox_unavailable, with
// the fix for this machine.
func sandboxRefusal(agent string, err error) *model.Error {
	st := sandbox.Check(bwrapPath, exec.LookPath)
	hint := st.Fix
	var ch *hardening.CannotHold
	switch {
	case errors.As(err, &ch):
		hint = ch.Fix
	case st.OK || hint == "":
		hint = "read the task log"
	}
	return &model.Error{Code: model.CodeAgentSandboxUnavailable,
		Message: fmt.Sprintf("agent %s was not started: %v", agent, err), Hint: hint, Err: err}
}

// sandboxRule is the rule whose sandbox fields (Home, HomeVars,
// OwnSandbox) the run's sandbox follows: the session's, or the bare one
// of a run without its profile (the test switch).
func (s *session) sandboxRule() *hardening.Rule {
	if s.rule != nil {
		return s.rule
	}
	return s.bare
}

// bareRule keeps of the first profile's rule for mode only what the
// sandbox needs for the agent to run at all: its own home and whether it
// runs a sandbox of its own. Nil when there is none.
func bareRule(profiles []*hardening.Profile, mode model.Mode) *hardening.Rule {
	for _, p := range profiles {
		if r, ok := p.Rules[mode]; ok {
			return &hardening.Rule{Home: r.Home, HomeVars: r.HomeVars, OwnSandbox: r.OwnSandbox}
		}
	}
	return nil
}
