package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

// The PATH of a daemon: what agent commands (and the authority adapter's,
// and MCP servers') are resolved through, and the PATH every process the
// daemon starts gets. It never depends on who started the daemon: a
// facade's PATH comes from its MCP client's config, which a project can
// set (a checked-in .mcp.json with an env block), and the daemon it
// starts serves every agent of every project.
//
// Where it comes from, first match:
//
//  1. [daemon] path in config.toml, which only the user writes;
//  2. the file pinned-path in the home, written by the first start of
//     `relay daemon` by hand (the user's own shell's PATH) and replaced by
//     `relay daemon --pin-path`; a start by a facade never writes it;
//  3. else defaultDaemonPath: the system's directories.
//
// A file in the home rather than a line written into config.toml: the
// relay never rewrites the user's config (its comments and layout), and
// config.toml's key, when the user sets it, wins over the file.
//
// Only safe entries are used (pathEntryUnsafe), each by its real path
// (symbolic links resolved when the daemon starts, so a link swapped later
// changes nothing); every entry skipped is logged and shown by `relay
// daemon status`.

// pinnedPathFile is the home's file holding the pinned PATH.
const pinnedPathFile = "pinned-path"

// defaultDaemonPath is the PATH of a daemon with none configured or
// pinned.
const defaultDaemonPath = "/usr/local/bin:/usr/bin:/bin"

// Where a daemon's PATH came from (socketapi.DaemonStatus.PathSource).
const (
	pathFromConfig  = "config"
	pathFromPinned  = "pinned"
	pathFromDefault = "default"
)

// daemonPath is a daemon's PATH.
type daemonPath struct {
	source  string
	pinned  string   // as configured or pinned
	safe    []string // its safe entries, real paths, in order, each once
	skipped []socketapi.PathSkip
	// pin says this start pins it: save writes it to the home's file,
	// once the daemon has started (a refusal to start changes nothing).
	pin bool
}

// String is the PATH the daemon uses: the safe entries.
func (p daemonPath) String() string { return strings.Join(p.safe, ":") }

// resolveDaemonPath finds the daemon's PATH for home as the comment above
// says. byHand: the daemon was started by hand, with shellPath the PATH
// it was started with; repin (relay daemon --pin-path): pin shellPath
// even if a PATH is pinned already.
func resolveDaemonPath(home string, cfg config.DaemonConfig, byHand, repin bool, shellPath string) (daemonPath, error) {
	var p daemonPath
	switch {
	case cfg.Path != nil && repin:
		return p, &model.Error{Code: model.CodeInvalidArgs,
			Message: "--pin-path: [daemon] path in " + filepath.Join(home, "config.toml") + " sets the daemon's PATH; a pinned one would not be used",
			Hint:    "edit [daemon] path in config.toml, or remove it and run `relay daemon --pin-path` again"}
	case cfg.Path != nil:
		p.source, p.pinned = pathFromConfig, strings.Join(cfg.Path, ":")
	case repin && shellPath == "":
		return p, &model.Error{Code: model.CodeInvalidArgs, Message: "--pin-path: this shell's PATH is empty; there is nothing to pin",
			Hint: "set PATH to the directories agent commands are found in, or set [daemon] path in config.toml"}
	case repin:
		p.source, p.pinned, p.pin = pathFromPinned, shellPath, true
	default:
		pinned, err := readPinnedPath(filepath.Join(home, pinnedPathFile))
		switch {
		case err == nil:
			p.source, p.pinned = pathFromPinned, pinned
		case errors.Is(err, fs.ErrNotExist) && byHand && shellPath != "":
			p.source, p.pinned, p.pin = pathFromPinned, shellPath, true
		case errors.Is(err, fs.ErrNotExist):
			p.source, p.pinned = pathFromDefault, defaultDaemonPath
		default:
			return p, err
		}
	}
	for _, e := range strings.Split(p.pinned, ":") {
		real, why := pathEntryUnsafe(e)
		switch {
		case why != "":
			p.skipped = append(p.skipped, socketapi.PathSkip{Entry: e, Reason: why})
		case !slices.Contains(p.safe, real):
			p.safe = append(p.safe, real)
		}
	}
	return p, nil
}

// save writes the PATH this start pins (pin) to the home's file.
func (p daemonPath) save(home string) error {
	if !p.pin {
		return nil
	}
	return writePinnedPath(filepath.Join(home, pinnedPathFile), p.pinned)
}

// readPinnedPath reads the home's pinned PATH, opened as every file of the
// home is (openHomeFile: no link, ours).
func readPinnedPath(file string) (string, error) {
	f, err := openHomeFile(file, os.O_RDONLY|unix.O_NONBLOCK, 0, model.CodeInvalidArgs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", err
	}
	pinned := strings.TrimSpace(string(b))
	if pinned == "" || strings.ContainsAny(pinned, "\n\x00") {
		return "", &model.Error{Code: model.CodeInvalidArgs,
			Message: file + " does not hold one PATH line (the PATH agent commands are resolved through)",
			Hint:    "start the daemon by hand with `relay daemon --pin-path` to pin your shell's PATH, or set [daemon] path in config.toml"}
	}
	return pinned, nil
}

// writePinnedPath writes path as the home's pinned PATH, replacing the
// file whole (a new file renamed over it).
func writePinnedPath(file, path string) error {
	tmp := file + ".new"
	_ = os.Remove(tmp)
	f, err := openHomeFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600, model.CodeInvalidArgs)
	if err != nil {
		return homeUnwritable(filepath.Dir(file), "the pinned PATH", err)
	}
	_, err = f.WriteString(path + "\n")
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return homeUnwritable(filepath.Dir(file), "the pinned PATH", err)
	}
	return nil
}

// pathEntryUnsafe returns the real path of the PATH entry dir, or why it
// is not used. An entry is used when it is absolute, exists, is a
// directory, and it and every directory above it (its real path) are
// owned by the user or root and writable by no one else — OpenSSH's
// StrictModes rule — except that a directory above it may be writable by
// all when its sticky bit is set (/tmp): there nobody but an entry's
// owner can rename or remove it.
func pathEntryUnsafe(dir string) (real, why string) {
	switch {
	case dir == "":
		return "", "empty (the current directory, whichever it is)"
	case !filepath.IsAbs(dir):
		return "", "relative (looked up in whichever directory a program runs in)"
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "does not exist"
		}
		return "", err.Error()
	}
	if why := dirChainUnsafe(real, true); why != "" {
		return "", why
	}
	return real, ""
}

// dirChainUnsafe returns why the directory real (a real path), or one
// above it, may be changed by someone other than the user or root, or "".
// entry: real is a PATH entry, which must be a directory and may not be
// writable by others even with the sticky bit (anyone could add a program
// to it); else it is the directory of a program file, where the sticky
// bit keeps others from replacing the file, as above an entry.
func dirChainUnsafe(real string, entry bool) string {
	euid := os.Geteuid()
	for p := real; ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return fmt.Sprintf("cannot inspect %s: %v", p, err)
		}
		where := ""
		if p != real {
			where = "below " + p + ", which is "
		}
		switch {
		case p == real && entry && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return "not a directory"
		case st.Uid != 0 && int(st.Uid) != euid:
			return where + "owned by " + uidName(int(st.Uid))
		case st.Mode&0o022 != 0 && (p == real && entry || st.Mode&unix.S_ISVTX == 0):
			return fmt.Sprintf("%sgroup- or world-writable (mode %04o)", where, st.Mode&0o7777)
		}
		if parent := filepath.Dir(p); parent == p {
			return ""
		}
	}
}

// programUnsafe returns why the program file (found in a safe entry) may
// be changed by someone other than the user or root, or "": the file it
// resolves to, and every directory above that, must be as an entry's are
// (an npm bin link points into a package directory elsewhere).
func programUnsafe(file string) string {
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		return err.Error()
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return err.Error()
	}
	switch {
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return real + " is owned by " + uidName(int(st.Uid))
	case st.Mode&0o022 != 0:
		return fmt.Sprintf("%s is group- or world-writable (mode %04o)", real, st.Mode&0o7777)
	}
	if why := dirChainUnsafe(filepath.Dir(real), false); why != "" {
		return real + " is " + why
	}
	return ""
}

// lookPath is exec.LookPath through the daemon's PATH: a name without a
// slash is found in the safe entries only, and only as a program file
// that is itself safe (programUnsafe); a path is checked as exec.LookPath
// checks it. The daemon passes it to config.ResolveCommands and to the
// agent registry (the configured signal).
func (p daemonPath) lookPath(name string) (string, error) {
	if strings.ContainsRune(name, '/') {
		return exec.LookPath(name)
	}
	for _, dir := range p.safe {
		cand := filepath.Join(dir, name)
		if !executableFile(cand) {
			continue
		}
		if programUnsafe(cand) != "" {
			continue
		}
		return cand, nil
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// notes says, for a program name, what lookPath passed over: copies in
// skipped entries, and unsafe program files in safe ones. The daemon logs
// them, so that "not found" or an unexpected program has its reason.
func (p daemonPath) notes(name string) []string {
	if name == "" || strings.ContainsRune(name, '/') {
		return nil
	}
	var out []string
	for _, s := range p.skipped {
		if s.Entry == "" || !filepath.IsAbs(s.Entry) {
			continue
		}
		if cand := filepath.Join(s.Entry, name); executableFile(cand) {
			out = append(out, fmt.Sprintf("%s not used: its PATH entry %s is %s", cand, s.Entry, s.Reason))
		}
	}
	for _, dir := range p.safe {
		cand := filepath.Join(dir, name)
		if !executableFile(cand) {
			continue
		}
		if why := programUnsafe(cand); why != "" {
			out = append(out, fmt.Sprintf("%s not used: %s", cand, why))
		}
	}
	return out
}

// executableFile reports whether p is a regular file someone may execute.
func executableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
