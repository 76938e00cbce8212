package hardening

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A file an agent loads code or rules from, in a directory anyone the
// relay does not trust can write to, cannot be checked first and then
// trusted: whatever is planted between the check and the agent's read
// runs (seen: an OpenCode plugin planted 2 s after the relay looked ran
// in a hardened task). So such paths are hidden instead, in a mount
// namespace of the agent's own (bubblewrap): the agent sees the host's
// filesystem, except that every directory a Mask names is an empty tmpfs
// into which each entry that was there at the start, but the masked
// names, is bound back. What is created later in it, a masked name
// included, is not seen; an entry bound back is the real one, live.
//
// Every directory is masked so, whoever owns it and whoever can write to
// it: a directory the relay's user cannot write to (a project of another
// uid) is written to by its owner, at any moment, and a cover over only
// the names there at the start would leave a name created later visible.
// Only / is different: no tmpfs goes over it (everything would have to be
// bound back), and only root can create a name in it, so a masked name
// already there is covered (a directory by an empty read-only tmpfs, a
// file by /dev/null) and none is looked for later.
//
// Masks are computed on canonical paths, parents included: a directory a
// mask names and the task's cwd are resolved (filepath.EvalSymlinks)
// before anything is masked, so no directory is passed over for being, or
// being reached through, a symlink; a mount covers every path that leads
// to its directory. Nothing is created on the host.
//
// The cost is one bind mount per entry of each masked directory (a big
// /tmp or /home has thousands: as many arguments to bwrap and mounts in
// the agent's namespace, each cheap); a directory the relay's user cannot
// list cannot be masked, and the session is refused.

// Mask hides names in directories from an agent.
type Mask struct {
	// Dir is the directory: "{cwd}" for the task's cwd and every directory
	// above it, else a path where "~" and $VARS are expanded from the
	// daemon's environment (a pattern naming an unset variable is
	// skipped). Either is resolved to its canonical path first.
	Dir string
	// Names are the entries hidden in it.
	Names []string
}

// cwdAndAbove returns the canonical path of cwd and of every directory
// above it, cwd first.
func cwdAndAbove(cwd string) ([]string, error) {
	canon, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return nil, fmt.Errorf("resolving the cwd: %w", err)
	}
	var dirs []string
	for dir := canon; ; dir = filepath.Dir(dir) {
		dirs = append(dirs, dir)
		if dir == filepath.Dir(dir) {
			return dirs, nil
		}
	}
}

// maskSet is the masks of a session, expanded once for its cwd
// (expandMasks): the canonical directories, outermost first, and the
// names hidden in each.
type maskSet struct {
	dirs  []string
	names map[string][]string
}

// expandMasks expands masks for a session in cwd (maskDirs).
func expandMasks(masks []Mask, cwd string) (maskSet, error) {
	dirs, names, err := maskDirs(masks, cwd)
	return maskSet{dirs: dirs, names: names}, err
}

// in returns the names hidden in directory dir (symbolic links followed).
func (m maskSet) in(dir string) []string {
	if len(m.names) == 0 {
		return nil
	}
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	return m.names[canon]
}

// maskDirs expands the masks for a session in cwd into canonical
// directories, each with the names hidden in it, outermost first. A
// directory that does not exist is left out (nothing there, and nowhere to
// plant it); a cwd that cannot be resolved is an error.
func maskDirs(masks []Mask, cwd string) ([]string, map[string][]string, error) {
	names := map[string][]string{}
	add := func(dir string, ns []string) {
		for _, n := range ns {
			if !slices.Contains(names[dir], n) {
				names[dir] = append(names[dir], n)
			}
		}
	}
	for _, m := range masks {
		if m.Dir == "{cwd}" {
			dirs, err := cwdAndAbove(cwd)
			if err != nil {
				return nil, nil, err
			}
			for _, dir := range dirs {
				add(dir, m.Names)
			}
			continue
		}
		if d, ok := expandPath(m.Dir); ok {
			if canon, err := filepath.EvalSymlinks(d); err == nil {
				add(canon, m.Names)
			}
		}
	}
	dirs := slices.Collect(maps.Keys(names))
	// Outer directories first: an inner one's tmpfs goes over the entry
	// its parent's bound back.
	slices.SortFunc(dirs, func(a, b string) int {
		if c := strings.Count(a, "/") - strings.Count(b, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return dirs, names, nil
}

// binds returns the bubblewrap mount arguments that apply the masks,
// outermost directory first: for each masked directory a
// --tmpfs over it, each of its entries but the masked names bound back
// (--symlink for a symlink), a --chmod giving the tmpfs the directory's
// mode, and, when rw is false, a --remount-ro. They go after the caller's
// base mounts (the root, bound with --dev-bind or --ro-bind): a bind's
// source is the host's path, never what an earlier argument mounted, so a
// caller that mounts something inside a masked directory appends it after
// these.
//
// rw is whether the agent may write what is bound back: true binds each
// entry with --dev-bind-try (as the host has it, devices included), false
// with --ro-bind-try (read-only, devices unusable) and leaves the tmpfs
// read-only too, for a sandbox whose root is read-only. -try: an entry
// removed meanwhile is not an error.
//
// skip, when set, names directories to leave alone: those the sandbox
// makes anew (a private /tmp), where nothing could be planted.
//
// When rw is false, the masks' tmpfs are made read-only by the arguments
// of tail, which the caller appends after its own mounts inside them (a
// mount point is made in a tmpfs while it is still writable).
func (m maskSet) binds(rw bool, skip func(dir string) bool) (args, tail []string, err error) {
	dirs, names := m.dirs, m.names
	var out []string
	for _, dir := range dirs {
		if skip != nil && skip(dir) {
			continue
		}
		fi, err := os.Stat(dir) // canonical: Stat is Lstat
		if err != nil || !fi.IsDir() {
			continue // nothing there, and nowhere to plant it
		}
		var args []string
		if dir == "/" {
			args, err = coverNames(dir, names[dir])
		} else {
			args, err = maskDir(dir, fi, names[dir], rw)
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, args...)
		if !rw && dir != "/" {
			tail = append(tail, "--remount-ro", dir)
		}
	}
	return out, tail, nil
}

// maskDir returns the arguments that make dir, whose Stat is fi, an empty
// tmpfs with each entry but names bound back.
func maskDir(dir string, fi os.FileInfo, names []string, rw bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s to mask %s in it (a directory the relay's user cannot list cannot be masked): %w",
			dir, strings.Join(names, ", "), err)
	}
	bind := "--ro-bind-try"
	if rw {
		bind = "--dev-bind-try"
	}
	out := []string{"--tmpfs", dir}
	for _, e := range entries {
		if slices.Contains(names, e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				continue // removed meanwhile
			}
			out = append(out, "--symlink", target, p)
			continue
		}
		out = append(out, bind, p, p)
	}
	// The tmpfs takes the directory's mode (the sticky bit of /tmp too).
	mode := fi.Mode().Perm()
	if fi.Mode()&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	out = append(out, "--chmod", fmt.Sprintf("%o", mode), dir)
	return out, nil
}

// coverNames returns the arguments that cover each of names already in
// dir (/, which takes no tmpfs): a directory by an empty read-only tmpfs,
// anything else by /dev/null. A dangling symlink cannot be covered
// (bubblewrap would mount on, or create, its target): it is an error.
func coverNames(dir string, names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			out = append(out, "--tmpfs", p, "--remount-ro", p)
		case err == nil:
			out = append(out, "--dev-bind", "/dev/null", p)
		case exists(p):
			return nil, fmt.Errorf("%s cannot be masked: %w", p, err)
		}
	}
	return out, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// expandPath expands a leading "~" and $VARS from the daemon's
// environment; ok is false when a variable is unset.
func expandPath(p string) (string, bool) {
	ok := true
	p = os.Expand(p, func(v string) string {
		val, set := os.LookupEnv(v)
		if !set || val == "" {
			ok = false
		}
		return val
	})
	if rest, found := strings.CutPrefix(p, "~/"); found {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		p = filepath.Join(home, rest)
	}
	return p, ok
}

// DescribeMasks says what masks hide, for the task log.
func DescribeMasks(ms []Mask) string {
	var parts []string
	for _, m := range ms {
		where := m.Dir
		if where == "{cwd}" {
			where = "the cwd and every directory above it"
		}
		parts = append(parts, strings.Join(m.Names, ", ")+" in "+where)
	}
	return strings.Join(parts, "; ")
}
