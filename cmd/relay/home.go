package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/model"
)

// The relay home is trusted only when the user running the relay owns it.
// Every command that touches a home, the daemon and the clients alike,
// goes through secureHome first: a daemon run as root on another user's
// home (sudo -E relay daemon) must not open, read or run anything in it,
// and a client must not talk to a daemon another user could have put
// there (a shared --home under /tmp).
//
// The home must be a real directory (not a symbolic link), owned by the
// effective uid and not writable by group or others. Its files are
// checked by checkHomeFiles (present ones must be regular files, or the
// socket a socket, or the subdirectories directories, owned by the same
// uid, never symbolic links) and opened with O_NOFOLLOW (openHomeFile).
// Once the home is ours and private, no other uid can add or replace a
// file in it, so a check made here still holds when the file is opened by
// path later (SQLite opens relay.db and its -wal and -shm by name).

// homeFiles are the names the relay opens in its home, with the kind each
// must be. Subdirectories are the dispatcher's (logs, run records and
// agent profiles).
var homeFiles = []struct {
	name string
	kind fs.FileMode // 0: regular file
}{
	{"relay.lock", 0}, {"relay.log", 0}, {"relay.log.1", 0}, {"relay.log.2", 0}, {"relay.log.3", 0},
	{"relay.log.4", 0}, {"relay.log.5", 0}, {"config.toml", 0}, {pinnedPathFile, 0}, {pinnedPathFile + ".new", 0},
	{"relay.db", 0}, {"relay.db-wal", 0}, {"relay.db-shm", 0}, {"relay.sock", fs.ModeSocket},
	{"logs", fs.ModeDir}, {"run", fs.ModeDir}, {"profiles", fs.ModeDir},
}

// homeFix reports a mode secureHome took away from an own home.
type homeFix struct {
	from, to fs.FileMode
}

// secureHome checks the relay home dir for the current effective uid.
// With create, a missing home (and its parents) is created 0700; without,
// a missing home is not an error (nothing is there to trust or distrust)
// and exists is false. An own home open to group or others has that access
// taken away (never any added: a read-only home stays read-only); fix
// says so, for the caller to log. A refusal is a *model.Error with code,
// naming the path, the owner found and what to do; it changes nothing.
func secureHome(dir string, create bool, code model.Code) (exists bool, fix *homeFix, err error) {
	if create {
		// MkdirAll stops at an existing path, link or not; the lstat
		// below judges what is there.
		if err := os.MkdirAll(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, nil, &model.Error{Code: code, Err: err,
				Message: fmt.Sprintf("cannot create the relay home %s: %v", dir, err),
				Hint:    "check the permissions of its parent, or pass --home DIR"}
		}
	}
	// O_NOFOLLOW|O_DIRECTORY: a symbolic link or a file is refused by the
	// open itself, and the mode is then changed through this descriptor,
	// never through a path someone could swap.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) && !create {
			return false, nil, nil
		}
		var st unix.Stat_t
		if lerr := unix.Lstat(dir, &st); lerr == nil {
			kind := "not a directory"
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				target, _ := os.Readlink(dir)
				kind = "a symbolic link (to " + target + ")"
			}
			return false, nil, &model.Error{Code: code, Err: err,
				Message: fmt.Sprintf("the relay home %s is %s, owned by %s; the relay uses only a real directory it owns, and changed nothing", dir, kind, uidName(int(st.Uid))),
				Hint:    "pass the directory itself as --home, or " + homeHint()}
		}
		return false, nil, &model.Error{Code: code, Err: err,
			Message: fmt.Sprintf("cannot open the relay home %s: %v", dir, err),
			Hint:    "check that it is a directory you own (chmod 700), or pass another --home"}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, nil, fmt.Errorf("stat relay home %s: %w", dir, err)
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return false, nil, &model.Error{Code: code,
			Message: fmt.Sprintf("the relay home %s is owned by %s, not by %s who runs this relay; the relay opens, reads and runs nothing in another user's home, and changed nothing",
				dir, uidName(int(st.Uid)), uidName(euid)),
			Hint: "run the relay as the home's owner, " + uidName(int(st.Uid)) + " (not with sudo), or " + homeHint()}
	}
	perm := fs.FileMode(st.Mode & 0o777)
	if perm&0o077 != 0 {
		to := perm &^ 0o077
		if err := unix.Fchmod(fd, uint32(to)); err != nil {
			return false, nil, &model.Error{Code: code, Err: err,
				Message: fmt.Sprintf("the relay home %s has mode %04o and cannot be made private: %v", dir, perm, err),
				Hint:    "chmod 700 " + dir + ", or pass another --home"}
		}
		fix = &homeFix{from: perm, to: to}
	}
	return true, fix, nil
}

// checkHomeFiles refuses a home holding one of the relay's files as a
// symbolic link, as the wrong kind of file, or owned by another uid. It
// only looks (lstat): a refusal changes nothing.
func checkHomeFiles(dir string, code model.Code) error {
	euid := os.Geteuid()
	for _, f := range homeFiles {
		p := filepath.Join(dir, f.name)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return &model.Error{Code: code, Err: err, Message: fmt.Sprintf("cannot inspect %s: %v", p, err),
				Hint: "check the relay home's permissions, or pass another --home"}
		}
		if err := checkOwned(p, st, f.kind, euid, code); err != nil {
			return err
		}
	}
	return nil
}

// checkOwned refuses st (the lstat or fstat of p) unless it is of kind and
// owned by euid.
func checkOwned(p string, st unix.Stat_t, kind fs.FileMode, euid int, code model.Code) error {
	want, wantName := uint32(unix.S_IFREG), "a regular file"
	switch kind {
	case fs.ModeDir:
		want, wantName = unix.S_IFDIR, "a directory"
	case fs.ModeSocket:
		want, wantName = unix.S_IFSOCK, "a socket"
	}
	got := st.Mode & unix.S_IFMT
	if got == unix.S_IFLNK {
		target, _ := os.Readlink(p)
		return &model.Error{Code: code,
			Message: fmt.Sprintf("%s is a symbolic link (to %s, the link owned by %s); the relay never follows links in its home, and changed nothing", p, target, uidName(int(st.Uid))),
			Hint:    "remove the link (the relay recreates its own files), or " + homeHint()}
	}
	if got != want {
		return &model.Error{Code: code,
			Message: fmt.Sprintf("%s is not %s (owned by %s); the relay changed nothing", p, wantName, uidName(int(st.Uid))),
			Hint:    "move it out of the relay home, or " + homeHint()}
	}
	if int(st.Uid) != euid {
		return &model.Error{Code: code,
			Message: fmt.Sprintf("%s is owned by %s, not by %s who runs this relay; the relay uses only its own files, and changed nothing", p, uidName(int(st.Uid)), uidName(euid)),
			Hint:    "find out who put it there; remove it or chown it to " + uidName(euid) + ", or " + homeHint()}
	}
	return nil
}

// openHomeFile opens the home's file p with O_NOFOLLOW, and refuses it
// (closed again, with code) unless it is a regular file owned by the
// effective uid.
func openHomeFile(p string, flag int, perm fs.FileMode, code model.Code) (*os.File, error) {
	f, err := os.OpenFile(p, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil {
				return nil, checkOwned(p, st, 0, os.Geteuid(), code)
			}
		}
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	if err := checkOwned(p, st, 0, os.Geteuid(), code); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// loadHomeConfig reads the home's config.toml as openHomeFile opens it
// (a missing one gives the defaults) and parses it.
func loadHomeConfig(home string, code model.Code) (config.Config, error) {
	p := filepath.Join(home, "config.toml")
	// O_NONBLOCK: opening a FIFO planted there must not hang; it is then
	// refused as not a regular file.
	f, err := openHomeFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0, code)
	if errors.Is(err, fs.ErrNotExist) {
		return config.DefaultConfig(), nil
	}
	if err != nil {
		var me *model.Error
		if errors.As(err, &me) {
			return config.Config{}, err
		}
		return config.Config{}, &model.Error{Code: model.CodeInvalidConfig, Err: err,
			Message: fmt.Sprintf("%s: cannot read the config file: %v", p, err),
			Hint:    "make it a readable file, or remove it to run with the defaults"}
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return config.Config{}, &model.Error{Code: model.CodeInvalidConfig, Err: err,
			Message: fmt.Sprintf("%s: cannot read the config file: %v", p, err),
			Hint:    "make it a readable file, or remove it to run with the defaults"}
	}
	return config.ParseConfig(data, p)
}

// homeHint is the tail of a refusal's hint: where a home of one's own is.
func homeHint() string {
	return "pass a --home you own and only you can write (the default is $XDG_STATE_HOME/hai-relay, else ~/.local/state/hai-relay)"
}

// uidName is "uid N (name)", or "uid N" when the name is unknown.
func uidName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return "uid " + strconv.Itoa(uid)
}
