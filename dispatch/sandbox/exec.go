package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// Exit runs Exec with the arguments after ExecCommand and, since Exec
// only returns on failure, ends the process with status 127.
func Exit(args []string) {
	err := Exec(args)
	fmt.Fprintln(os.Stderr, "relay sandbox:", err)
	os.Exit(127)
}

// Exec applies the Landlock layer to this process and executes the agent
// in its place: args are [--rw DIR]... [--no-landlock] -- PATH ARGV0
// [ARGS...]. Every path but the --rw directories becomes read-only (and
// executable) to the agent and all its descendants, and signals and
// abstract Unix sockets are scoped to the agent's own domain. Where the
// kernel has no Landlock (or an older ABI), it applies what the kernel
// has: bubblewrap's namespaces hold the same writes and signals. It only
// returns on an error, before the agent runs.
func Exec(args []string) error {
	var rw []string
	lock := true
	for len(args) > 0 && args[0] != "--" {
		switch args[0] {
		case "--rw":
			if len(args) < 2 {
				return fmt.Errorf("usage: %s [--rw DIR]... [--no-landlock] -- PATH ARGV0 [ARGS...]", ExecCommand)
			}
			rw = append(rw, args[1])
			args = args[2:]
		case "--no-landlock":
			lock = false
			args = args[1:]
		default:
			return fmt.Errorf("unknown argument %q", args[0])
		}
	}
	if len(args) < 3 {
		return fmt.Errorf("usage: %s [--rw DIR]... [--no-landlock] -- PATH ARGV0 [ARGS...]", ExecCommand)
	}
	path, argv := args[1], args[2:]
	if resolved, err := exec.LookPath(path); err == nil {
		path = resolved
	}
	if lock {
		if err := restrict(rw); err != nil {
			return err
		}
	}
	return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, os.Environ()))
}

// restrict applies the Landlock layer: read and execute everywhere,
// writes only beneath rw, IPC scoped.
func restrict(rw []string) error {
	var dirs, files []string
	for _, p := range rw {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			files = append(files, p)
		} else {
			dirs = append(dirs, p)
		}
	}
	cfg := landlock.V6.BestEffort()
	if err := cfg.RestrictPaths(landlock.RODirs("/"), landlock.RWDirs(dirs...).IgnoreIfMissing(),
		landlock.RWFiles(files...).IgnoreIfMissing()); err != nil {
		return fmt.Errorf("landlock (files): %w", err)
	}
	if err := cfg.RestrictScoped(); err != nil {
		return fmt.Errorf("landlock (signals, abstract sockets): %w", err)
	}
	return nil
}

// LandlockABI returns the Landlock ABI version the kernel offers (0: none).
func LandlockABI() int {
	v, err := landlockABI()
	if err != nil {
		return 0
	}
	return v
}

// landlockABI asks the kernel for its Landlock ABI version.
func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}
