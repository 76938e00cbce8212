//go:build unix

package socketapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hai-relay/relay/model"
)

func TestListenSocketIs0600EvenWithUmask0(t *testing.T) {
	// Not parallel: it changes the process-wide umask.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
	if now := syscall.Umask(0); now != 0 {
		t.Errorf("Listen left the umask at %04o, want it restored to 0", now)
	}
}

// apiStaleSocket leaves a socket file nobody listens on, as a crash does.
func apiStaleSocket(t *testing.T, sock string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := net.Dial("unix", sock); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("stale socket dial: %v, want ECONNREFUSED", err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	apiStaleSocket(t, sock)
	s := apiServeAt(t, sock, &apiFakeService{}, ServerOptions{})
	c := apiNewClient(t, s.sock, ClientOptions{})
	if _, err := c.Version(context.Background()); err != nil {
		t.Errorf("server on a replaced stale socket: %v", err)
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced socket: %v %v", fi.Mode(), err)
	}
}

func TestListenRefusesLiveServer(t *testing.T) {
	t.Parallel()
	s := apiServe(t, &apiFakeService{}, ServerOptions{})
	before, err := os.Lstat(s.sock)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(s.sock)
	if err == nil {
		ln.Close()
		t.Fatal("Listen on a live server's socket succeeded")
	}
	if !errors.Is(err, ErrSocketInUse) {
		t.Errorf("Listen on a live socket: %v, want ErrSocketInUse", err)
	}
	after, err := os.Lstat(s.sock)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the live server's socket was replaced or removed: %v", err)
	}
	c := apiNewClient(t, s.sock, ClientOptions{})
	if _, err := c.Version(context.Background()); err != nil {
		t.Errorf("the live server no longer answers: %v", err)
	}
}

func TestListenRefusesOpenDirectory(t *testing.T) {
	t.Parallel()
	dir := apiShortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(filepath.Join(dir, "relay.sock"))
	if err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("Listen in a 0755 directory: %v, want a refusal naming chmod 700", err)
	}
	_, err = Listen(filepath.Join(dir, "missing", "relay.sock"))
	if err == nil {
		t.Error("Listen in a missing directory succeeded")
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	if err := os.WriteFile(sock, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ln, err := Listen(sock); err == nil {
		ln.Close()
		t.Fatal("Listen replaced a regular file")
	}
	if b, err := os.ReadFile(sock); err != nil || string(b) != "precious" {
		t.Errorf("the regular file was touched: %q %v", b, err)
	}
}

// TestListenRefusesLongPath: a socket path over the kernel's limit is
// refused with invalid_args naming the path, its length and the limit,
// and a hint to use a shorter home, before anything is created.
func TestListenRefusesLongPath(t *testing.T) {
	t.Parallel()
	sock := "/tmp/" + strings.Repeat("d", 120) + "/relay.sock"
	_, err := Listen(sock)
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeInvalidArgs {
		t.Fatalf("Listen with a 136-byte path: %v, want an invalid_args *model.Error", err)
	}
	for _, want := range []string{sock, "is 136 bytes", fmt.Sprintf("at most %d bytes", SocketPathMax)} {
		if !strings.Contains(me.Message, want) {
			t.Errorf("message %q lacks %q", me.Message, want)
		}
	}
	if !strings.Contains(me.Hint, "shorter --home") || !strings.Contains(me.Hint, "RELAY_HOME") {
		t.Errorf("hint %q does not say to use a shorter --home or RELAY_HOME", me.Hint)
	}
	if err := CheckSocketPath(sock[:5] + sock[len(sock)-SocketPathMax+5:]); err != nil {
		t.Errorf("a socket path of exactly %d bytes: %v", SocketPathMax, err)
	}
}

// TestListenRefusesADirectoryOfAnotherUser: a socket directory owned by
// another uid is refused with invalid_args naming the directory and the
// owner found (as root, with a directory given to nobody).
func TestListenRefusesADirectoryOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test gives a directory to another uid (nobody)")
	}
	dir := apiShortDir(t)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(filepath.Join(dir, "relay.sock"))
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeInvalidArgs {
		t.Fatalf("Listen in nobody's directory: %v, want an invalid_args *model.Error", err)
	}
	for _, want := range []string{dir, "owned by uid 65534"} {
		if !strings.Contains(me.Message, want) {
			t.Errorf("message %q lacks %q", me.Message, want)
		}
	}
	if me.Hint == "" {
		t.Error("no hint")
	}
	if _, err := os.Lstat(filepath.Join(dir, "relay.sock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a socket was created in nobody's directory: %v", err)
	}
}

func TestListenCloseRemovesOnlyItsOwnSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	a, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	// Someone removes A's file and a second daemon listens on the path.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	b, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	bInfo, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	now, err := os.Lstat(sock)
	if err != nil || !os.SameFile(now, bInfo) {
		t.Fatalf("closing A removed or replaced B's socket: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("B's own socket after Close: %v, want removed", err)
	}
}

func TestPeerCredIsTheConnectingProcess(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(apiShortDir(t), "relay.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer sc.Close()
	uid, pid, err := PeerCred(sc)
	if err != nil || uid != os.Getuid() || pid != os.Getpid() {
		t.Errorf("PeerCred = %d, %d, %v; want %d, %d", uid, pid, err, os.Getuid(), os.Getpid())
	}
	if _, _, err := PeerCred(apiNotASocket{}); err == nil {
		t.Error("PeerCred on a non-socket conn succeeded")
	}
}

// apiNotASocket is a net.Conn without a file descriptor.
type apiNotASocket struct{ net.Conn }
