//go:build unix

package facade

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ErrSocketInUse is returned (wrapped, with the path) by Listen when a live
// server already answers on the socket path.
var ErrSocketInUse = errors.New("a server already answers on this socket")

// listenMaxPath is the longest socket path the kernel takes (Linux's
// sun_path is 108 bytes with its terminating NUL).
const listenMaxPath = 107

// listenUmaskMu serializes this package's umask changes. The umask itself
// is process-wide: a file another goroutine creates while Listen holds it
// at 0177 is created without group/other bits, never with more.
var listenUmaskMu sync.Mutex

// Listen creates the daemon's Unix socket at sockPath, mode 0600 from the
// start, and returns its listener.
//
//   - The parent directory must exist, be owned by the current uid and give
//     no access to group or others (0700); otherwise Listen refuses.
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
	if len(sockPath) > listenMaxPath {
		return nil, fmt.Errorf("socket path %s is %d bytes; Unix socket paths must be at most %d (use a shorter --home)", sockPath, len(sockPath), listenMaxPath)
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
		return nil, fmt.Errorf("listen on %s: %w", sockPath, err)
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

// listenCheckDir refuses a socket directory others can enter or list.
func listenCheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("socket directory %s has mode %04o; it must give group and others no access (chmod 700 %s)", dir, perm, dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not by the current uid %d", dir, st.Uid, os.Getuid())
	}
	return nil
}

// listenClearStale removes a socket file nobody listens on any more.
func listenClearStale(sockPath string) error {
	fi, err := os.Lstat(sockPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", sockPath, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", sockPath)
	}
	c, err := net.DialTimeout("unix", sockPath, time.Second)
	switch {
	case err == nil:
		_ = c.Close()
		return fmt.Errorf("%w: %s (is a relay daemon already running on this home?)", ErrSocketInUse, sockPath)
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
