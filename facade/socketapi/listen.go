//go:build unix

package socketapi

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hai-relay/relay/model"
)

// ErrSocketInUse is returned (wrapped, with the path) by Listen when a live
// server already answers on the socket path.
var ErrSocketInUse = errors.New("a server already answers on this socket")

// SocketPathMax is the longest socket path, in bytes, the kernel takes:
// sun_path less its terminating NUL (107 on Linux, whose sun_path is 108
// bytes; 103 on the BSDs and macOS).
const SocketPathMax = len(syscall.RawSockaddrUnix{}.Path) - 1

// CheckSocketPath refuses a socket path too long for the kernel, with
// model.CodeInvalidArgs naming the path, its length and the limit, and a
// hint to use a shorter home. bind(2) would only say "invalid argument".
// Listen checks it first; the daemon calls it before it opens anything.
func CheckSocketPath(sockPath string) error {
	if len(sockPath) <= SocketPathMax {
		return nil
	}
	// The longest home that fits: the socket is relay.sock in the home.
	fits := SocketPathMax - len(string(filepath.Separator)+filepath.Base(sockPath))
	return &model.Error{Code: model.CodeInvalidArgs,
		Message: fmt.Sprintf("the socket path %s is %d bytes; a Unix socket path is at most %d bytes on %s (sun_path holds %d with its terminating NUL)",
			sockPath, len(sockPath), SocketPathMax, runtime.GOOS, SocketPathMax+1),
		Hint: fmt.Sprintf("use a shorter --home or RELAY_HOME: the socket is %s in the home, so the home's absolute path may be at most %d bytes",
			filepath.Base(sockPath), fits)}
}

// listenUmaskMu serializes this package's umask changes. The umask itself
// is process-wide: a file another goroutine creates while Listen holds it
// at 0177 is created without group/other bits, never with more.
var listenUmaskMu sync.Mutex

// Listen creates the daemon's Unix socket at sockPath, mode 0600 from the
// start, and returns its listener.
//
//   - The path must fit the kernel's limit (CheckSocketPath), and the
//     parent directory must exist, be owned by the current uid and give
//     no access to group or others (0700); otherwise Listen refuses with
//     model.CodeInvalidArgs naming the path (and the owner found).
//   - The socket is created under umask 0177, so there is no window in which
//     it has a wider mode. The umask is process-wide: Listen restores it at
//     once, but call it at startup, before other goroutines create files.
//   - A socket file left by a crashed daemon (connecting to it is refused)
//     is removed and replaced. If a live server answers on it, Listen
//     returns an error wrapping ErrSocketInUse and leaves it alone; a path
//     that is not a socket is never removed.
//   - Closing the listener removes the socket file only if it is still the
//     one this call created (same device and inode), so a daemon that
//     replaced it keeps its socket.
//
// The stale-socket check and the creation are not atomic against a second
// daemon starting at the same instant: hold the home's lock around Listen.
func Listen(sockPath string) (net.Listener, error) {
	if err := CheckSocketPath(sockPath); err != nil {
		return nil, err
	}
	if err := listenCheckDir(filepath.Dir(sockPath)); err != nil {
		return nil, err
	}
	if err := listenClearStale(sockPath); err != nil {
		return nil, err
	}

	listenUmaskMu.Lock()
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", sockPath)
	syscall.Umask(old)
	listenUmaskMu.Unlock()
	if err != nil {
		return nil, &model.Error{Code: model.CodeInternal, Err: err,
			Message: fmt.Sprintf("cannot create the socket %s: %v", sockPath, err),
			Hint:    "check that the relay home is writable and on a filesystem that takes Unix sockets, or pass another --home"}
	}
	ul := ln.(*net.UnixListener)
	// Unlinking is ours to do, and only for our own file (Close below).
	ul.SetUnlinkOnClose(false)
	fi, err := os.Lstat(sockPath)
	if err != nil {
		_ = ul.Close()
		return nil, fmt.Errorf("stat new socket %s: %w", sockPath, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		_ = ul.Close()
		_ = os.Remove(sockPath)
		return nil, fmt.Errorf("socket %s was created with mode %04o, not 0600", sockPath, perm)
	}
	return &listenSocket{UnixListener: ul, path: sockPath, created: fi}, nil
}

// listenCheckDir refuses a socket directory others can enter or list, or
// that another uid owns.
func listenCheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return &model.Error{Code: model.CodeInvalidArgs, Err: err,
			Message: fmt.Sprintf("cannot use the socket directory %s: %v", dir, err),
			Hint:    "create it (mode 0700), or pass another --home"}
	}
	if !fi.IsDir() {
		return &model.Error{Code: model.CodeInvalidArgs,
			Message: fmt.Sprintf("the socket directory %s is not a directory", dir),
			Hint:    "pass a directory as --home"}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &model.Error{Code: model.CodeInvalidArgs,
			Message: fmt.Sprintf("the socket directory %s is owned by %s, not by %s who runs this relay; the relay makes its socket only in a directory of its own",
				dir, listenUIDName(int(st.Uid)), listenUIDName(os.Geteuid())),
			Hint: "run the relay as that directory's owner, or pass a --home you own"}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &model.Error{Code: model.CodeInvalidArgs,
			Message: fmt.Sprintf("the socket directory %s has mode %04o; it must give group and others no access (chmod 700 %s)", dir, perm, dir),
			Hint:    "chmod 700 " + dir + ", or pass another --home"}
	}
	return nil
}

// listenUIDName is "uid N (name)", or "uid N" when the name is unknown.
func listenUIDName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return "uid " + strconv.Itoa(uid)
}

// listenClearStale removes a socket file nobody listens on any more.
func listenClearStale(sockPath string) error {
	fi, err := os.Lstat(sockPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &model.Error{Code: model.CodeInvalidArgs, Err: err,
			Message: fmt.Sprintf("cannot inspect %s: %v", sockPath, err),
			Hint:    "check the relay home's permissions, or pass another --home"}
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return &model.Error{Code: model.CodeInvalidArgs,
			Message: fmt.Sprintf("%s exists and is not a socket; the relay does not replace it", sockPath),
			Hint:    "move it out of the way, or pass another --home"}
	}
	c, err := net.DialTimeout("unix", sockPath, time.Second)
	switch {
	case err == nil:
		_ = c.Close()
		return &model.Error{Code: model.CodeInvalidArgs, Err: ErrSocketInUse,
			Message: fmt.Sprintf("a server already answers on %s", sockPath),
			Hint:    "a relay daemon may already run on this home: use it, stop it first, or pass another --home"}
	case errors.Is(err, syscall.ECONNREFUSED):
		if err := os.Remove(sockPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale socket %s: %w", sockPath, err)
		}
		return nil
	case errors.Is(err, syscall.ENOENT):
		return nil // removed meanwhile
	default:
		return fmt.Errorf("probe existing socket %s: %w", sockPath, err)
	}
}

// listenSocket is Listen's listener: it removes its socket file on Close
// only if the file is still the one it created.
type listenSocket struct {
	*net.UnixListener
	path    string
	created os.FileInfo

	once sync.Once
	err  error
}

// Close stops listening and removes the socket file if it is still ours.
// It is idempotent.
func (l *listenSocket) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		if fi, err := os.Lstat(l.path); err == nil && os.SameFile(fi, l.created) {
			_ = os.Remove(l.path)
		}
	})
	return l.err
}
