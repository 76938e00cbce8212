// Package sandbox is the kernel-held layer of a task's read_only (and
// state_changing) promise: every agent process the relay starts runs
// inside a sandbox the relay makes, whatever the agent's adapter, mode or
// settings do. The hardening profiles (package dispatch/hardening) are
// the first layer: they keep the agent from trying. The sandbox is the
// second: it keeps the agent from succeeding.
//
// Two mechanisms, each holding what it holds best:
//
//   - bubblewrap (bwrap) makes a user, mount, pid and IPC namespace: the
//     whole filesystem is bound read-only, but a private scratch directory
//     (the agent's /tmp and TMPDIR) and the directories its profile names
//     as state, each bound from a per-task directory; /dev and /proc are
//     the sandbox's own; the masks hide names; the agent cannot see or
//     signal a process outside its pid namespace, the daemon included.
//   - Landlock, applied inside the sandbox just before the agent is
//     executed (the hidden ExecCommand of the relay binary), holds writes
//     and signals a second time, in the kernel's LSM rather than in the
//     mount table: writes only beneath the same writable paths, no signal
//     and no abstract Unix socket outside the agent's own domain. It is
//     best effort (a kernel without Landlock keeps the bubblewrap layer),
//     and left out for an agent that runs a sandbox of its own (Codex runs
//     its commands in bubblewrap, which Landlock's ban on mounts breaks).
//
// The network is not held: the agent needs its model's API.
//
// A Plan is pure data turned into a command line (Plan.Command), tested
// without starting anything; Check says whether the sandbox can run here.
// Nothing runs unsandboxed: where bubblewrap is missing or cannot make
// its namespaces, a task fails agent_sandbox_unavailable with the fix.
package sandbox

import (
	"path/filepath"
	"strconv"
	"strings"
)

// ExecCommand is the hidden subcommand of the relay binary (and of the
// tests' agent shim) that applies Landlock and executes the agent, inside
// the sandbox: ExecCommand [--rw DIR]... [--no-landlock] -- PATH ARGV0 [ARGS...].
const ExecCommand = "__sandbox-exec"

// Bind is a host directory bound writable over a path inside the sandbox.
type Bind struct {
	Src string // on the host: a per-task directory of the relay's
	Dst string // inside the sandbox
}

// Plan is one agent process's sandbox.
type Plan struct {
	// Cwd is the agent's working directory, canonical (no symlink on
	// the way), as the task stores it.
	Cwd string
	// WritableCwd makes Cwd writable (state_changing tasks).
	WritableCwd bool
	// Scratch is the task's private scratch directory on the host, bound
	// at /tmp (the agent's TMPDIR).
	Scratch string
	// HostTmp keeps the host's /tmp (read-only) instead of making the
	// scratch the sandbox's /tmp, for a task that needs something there
	// (its cwd, its HOME, the relay home, its program): the scratch is
	// then only its TMPDIR, at its own path. Otherwise /tmp is the
	// scratch, private to the task.
	HostTmp bool
	// Binds are the per-task directories bound writable over the
	// profile's state paths (and the agent's own HOME when it has one).
	Binds []Bind
	// Masks are bubblewrap mount arguments that hide names (the masks of
	// package dispatch/hardening), applied after /tmp; After, after the
	// writable binds (the masks' tmpfs made read-only once every mount
	// point in them is made).
	Masks, After []string
	// UID and GID are the agent's ids inside its user namespace: the
	// relay's own, so that files it reads keep their owner.
	UID, GID int
	// Exec is the command that applies Landlock and executes the agent
	// inside (the relay binary and ExecCommand); empty: the agent is
	// executed by bubblewrap directly (no Landlock layer).
	Exec []string
	// NoLandlock leaves Landlock out while still going through Exec (an
	// agent that runs a bubblewrap sandbox of its own).
	NoLandlock bool
}

// tmpDir is the agent's TMPDIR: /tmp, or the scratch at its own path.
func (p Plan) tmpDir() string {
	if p.HostTmp && p.Scratch != "" {
		return p.Scratch
	}
	return "/tmp"
}

// Writable returns the paths the agent may write inside the sandbox:
// /tmp, the binds, /dev (the sandbox's own) and the cwd when it is
// writable.
func (p Plan) Writable() []string {
	out := []string{p.tmpDir(), "/dev"}
	for _, b := range p.Binds {
		out = append(out, b.Dst)
	}
	if p.WritableCwd && p.Cwd != "" {
		out = append(out, p.Cwd)
	}
	return out
}

// Command returns the command line that runs the agent argv (argv[0]
// resolved: a path) under bubblewrap, bwrap being its executable.
//
// Bubblewrap applies its mount arguments in order, each over what came
// before: the read-only root; the sandbox's own /dev and /proc; the
// scratch at /tmp; what the agent must see in /tmp, bound back
// read-only; the masks (whose bind-backs are read-only); last the
// writable binds and cwd, so that no mask's tmpfs over a parent covers
// them. A mask on a writable cwd itself cannot be held that way (binding
// the cwd writable would show what the mask hides): see Check.
func (p Plan) Command(bwrap string, argv []string) []string {
	out := []string{bwrap,
		// The sandbox dies with its parent (the agent shim), and the agent
		// gets a session of its own (no TIOCSTI into a terminal of ours).
		"--die-with-parent", "--new-session",
		// A user namespace (root included: inside it the agent has no
		// capability on the host's objects), with the relay's ids mapped.
		"--unshare-user", "--uid", strconv.Itoa(p.UID), "--gid", strconv.Itoa(p.GID),
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--ro-bind", "/", "/",
		"--dev", "/dev", "--proc", "/proc",
	}
	switch {
	case p.HostTmp:
	case p.Scratch == "":
		out = append(out, "--tmpfs", "/tmp")
	default:
		out = append(out, "--bind", p.Scratch, "/tmp")
	}
	out = append(out, p.Masks...)
	if p.HostTmp && p.Scratch != "" {
		out = append(out, "--bind", p.Scratch, p.Scratch)
	}
	for _, b := range p.Binds {
		out = append(out, "--bind", b.Src, b.Dst)
	}
	if p.WritableCwd && p.Cwd != "" {
		out = append(out, "--bind", p.Cwd, p.Cwd)
	}
	out = append(out, p.After...)
	out = append(out, "--setenv", "TMPDIR", p.tmpDir())
	if p.Cwd != "" {
		out = append(out, "--chdir", p.Cwd)
	}
	out = append(out, "--")
	if len(p.Exec) > 0 {
		out = append(out, p.Exec...)
		if p.NoLandlock {
			out = append(out, "--no-landlock")
		}
		for _, w := range p.Writable() {
			out = append(out, "--rw", filepath.Clean(w))
		}
		out = append(out, "--", argv[0])
	}
	return append(out, argv...)
}

// Fresh reports whether dir is one the sandbox makes anew, so that no
// mask needs to cover it: a private /tmp.
func (p Plan) Fresh(dir string) bool { return !p.HostTmp && filepath.Clean(dir) == "/tmp" }

// InTmp reports whether the host path p lies in /tmp, which the
// sandbox's scratch replaces.
func InTmp(p string) bool {
	p = filepath.Clean(p)
	return p == "/tmp" || strings.HasPrefix(p, "/tmp/")
}
