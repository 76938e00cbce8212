package main

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// nonblocking reports whether fd's file description is in non-blocking mode.
func nonblocking(t *testing.T, fd uintptr) bool {
	t.Helper()
	fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	return fl&syscall.O_NONBLOCK != 0
}

// TestPollableStdinPipe: a pipe on stdin is read through the poller (its
// description non-blocking) with nothing lost, and is blocking again after
// restore, as the client that shares it expects.
func TestPollableStdinPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// os.Pipe makes both ends non-blocking; Fd puts r back in blocking
	// mode, as a pipe a facade inherits from its client is. (Fd is not
	// called again: it would set blocking mode again.)
	fd := r.Fd()
	in, restore := pollableStdin(r)
	if in == io.Reader(r) {
		t.Fatal("a pipe was not switched to the poller")
	}
	if !nonblocking(t, fd) {
		t.Error("the pipe is still blocking")
	}
	go func() {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0"}` + "\n"))
		w.Close()
	}()
	got, err := io.ReadAll(in)
	if err != nil || string(got) != `{"jsonrpc":"2.0"}`+"\n" {
		t.Errorf("read %q, %v", got, err)
	}
	restore()
	if nonblocking(t, fd) {
		t.Error("restore left the pipe non-blocking")
	}
}

// TestPollableStdinFileUntouched: anything but a pipe or a socket (a file
// here; a terminal in real use) is returned as is.
func TestPollableStdinFileUntouched(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, restore := pollableStdin(f)
	defer restore()
	if in != io.Reader(f) || nonblocking(t, f.Fd()) {
		t.Error("a regular file was changed")
	}
}
