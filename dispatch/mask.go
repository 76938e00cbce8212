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

	"golang.org/x/sys/unix"
)

// A file an agent loads code or rules from, in a directory anyone the
// relay does not trust can write to, cannot be checked first and then
// trusted: whatever is planted between the check and the agent's read
// runs (seen: an OpenCode plugin planted 2 s after the relay looked ran
// in a hardened task). So such paths are hidden instead, in a mount
// namespace of the agent's own (bubblewrap): the agent sees the host's
// filesystem, except that every directory a Mask names, when the relay's
// user can write to it, is an empty tmpfs into which each entry that was
// there at the start, but the masked names, is bound back. What is
// created later in it, a masked name included, is not seen; an entry
// bound back is the real one, live. A directory nobody but root can write
// to needs no tmpfs: a masked name already there is covered by an empty
// read-only directory. Nothing is created on the host.

// Mask hides names in directories from an agent.
type Mask struct {
	// Dir is the directory: "{cwd}" for the task's cwd and every directory
	// above it, else a path where "~" and $VARS are expanded from the
	// daemon's environment (a pattern naming an unset variable is
	// skipped).
	Dir string
	// Names are the entries hidden in it.
	Names []string
}

// bwrapPath is the bubblewrap executable masks run under; a variable so
// that a test can point it elsewhere.
var bwrapPath = "bwrap"

// maskDirs expands the masks for a session in cwd into directories, each
// with the names hidden in it, outermost first.
func maskDirs(masks []Mask, cwd string) ([]string, map[string][]string) {
	names := map[string][]string{}
	add := func(dir string, ns []string) {
		dir = filepath.Clean(dir)
		for _, n := range ns {
			if !slices.Contains(names[dir], n) {
				names[dir] = append(names[dir], n)
			}
		}
	}
	for _, m := range masks {
		if m.Dir == "{cwd}" {
			for dir := filepath.Clean(cwd); ; dir = filepath.Dir(dir) {
				add(dir, m.Names)
				if dir == filepath.Dir(dir) {
					break
				}
			}
			continue
		}
		if d, ok := expandPath(m.Dir); ok {
			add(d, m.Names)
		}
	}
	dirs := make([]string, 0, len(names))
	for d := range names {
		dirs = append(dirs, d)
	}
	// Outer directories first: an inner one's tmpfs goes over the entry
	// its parent's bound back.
	slices.SortFunc(dirs, func(a, b string) int {
		if c := strings.Count(a, "/") - strings.Count(b, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return dirs, names
}

// maskArgv returns the bubblewrap command line that runs argv with masks
// applied for a session in cwd, using empty (an empty directory of the
// relay's) to cover masked names in directories that are not writable.
func maskArgv(masks []Mask, cwd, empty string) ([]string, error) {
	bwrap, err := exec.LookPath(bwrapPath)
	if err != nil {
		return nil, fmt.Errorf("bubblewrap (bwrap) is needed to hide the paths the profile masks: %w", err)
	}
	out := []string{bwrap, "--die-with-parent", "--dev-bind", "/", "/"}
	if os.Geteuid() != 0 {
		out = append(out, "--unshare-user", "--uid", strconv.Itoa(os.Geteuid()), "--gid", strconv.Itoa(os.Getegid()))
	}
	dirs, names := maskDirs(masks, cwd)
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue // nothing there, and nowhere to plant it
		}
		if unix.Access(dir, unix.W_OK) != nil || dir == "/" {
			for _, n := range names[dir] {
				if p := filepath.Join(dir, n); exists(p) {
					out = append(out, "--ro-bind", empty, p)
				}
			}
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("listing %s to mask %s in it: %w", dir, strings.Join(names[dir], ", "), err)
		}
		out = append(out, "--tmpfs", dir)
		for _, e := range entries {
			if slices.Contains(names[dir], e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					continue
				}
				out = append(out, "--symlink", target, p)
				continue
			}
			// -try: an entry removed meanwhile is not an error.
			out = append(out, "--dev-bind-try", p, p)
		}
		// The tmpfs takes the directory's mode (the sticky bit of /tmp too).
		mode := fi.Mode().Perm()
		if fi.Mode()&os.ModeSticky != 0 {
			mode |= 0o1000
		}
		out = append(out, "--chmod", fmt.Sprintf("%o", mode), dir)
	}
	return out, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}
