package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
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

// TestLineLimitReader: lines up to the bound pass whole, in any chunking;
// the read in which a line passes the bound fails with lineTooLong.
func TestLineLimitReader(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("a", 100) + "\n" + strings.Repeat("b", 100) + "\n" + strings.Repeat("c", 100)
	got, err := io.ReadAll(&lineLimitReader{r: iotest.OneByteReader(strings.NewReader(ok)), max: 100})
	if err != nil || string(got) != ok {
		t.Errorf("lines of exactly the bound: %d bytes, %v", len(got), err)
	}
	got, err = io.ReadAll(&lineLimitReader{r: strings.NewReader(ok), max: 100})
	if err != nil || string(got) != ok {
		t.Errorf("one chunk: %d bytes, %v", len(got), err)
	}
	_, err = io.ReadAll(&lineLimitReader{r: iotest.HalfReader(strings.NewReader("short\n" + strings.Repeat("x", 101))), max: 100})
	var long *lineTooLong
	if !errors.As(err, &long) || long.max != 100 {
		t.Errorf("a 101-byte line: err = %v, want lineTooLong", err)
	}
}

// TestMCPRefusesAnEndlessLine: the real facade, fed a line longer than its
// bound with no end, stops with payload_too_large instead of buffering it.
func TestMCPRefusesAnEndlessLine(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	cmd := exec.Command(relayBin, "mcp", "--as", "claude", "--home", home, "--no-autostart")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 64 { // 64 MiB, never a newline: stops when the facade does
			if _, err := in.Write(chunk); err != nil {
				return
			}
		}
		in.Close()
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "payload_too_large") {
			t.Errorf("exit %v, stderr %q; want a failure naming payload_too_large", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the facade kept reading an endless line")
	}
}
