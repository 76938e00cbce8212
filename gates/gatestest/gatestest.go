// Package gatestest helps tests that need a real authority adapter: it
// builds the fake adapter program (cmd/testfakes/fakeauthority) once per
// test binary and reads the log the fake appends to on every run.
//
// Typical use:
//
//	bin := gatestest.BuildFakeAuthority(t)
//	log := filepath.Join(t.TempDir(), "authority.log")
//	auth := gates.NewAuthority([]string{bin, "-log", log, "allow-guarded"}, 5*time.Second)
//	...
//	runs := gatestest.ReadFakeLog(t, log) // one entry per consultation
//
// The built binary lives in a temporary directory that RemoveFakeAuthority
// deletes; call it from TestMain after m.Run.
package gatestest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/hai-relay/relay/spec"
)

// FakeAuthorityPackage is the import path of the fake adapter program.
const FakeAuthorityPackage = "github.com/hai-relay/relay/cmd/testfakes/fakeauthority"

var build struct {
	once sync.Once
	mu   sync.Mutex
	dir  string
	path string
	err  error
}

// BuildFakeAuthority builds cmd/testfakes/fakeauthority with `go build` the
// first time it is called in a test binary and returns the program's path; later
// calls return the same path. A build failure fails tb (every time it is
// asked for).
func BuildFakeAuthority(tb testing.TB) string {
	tb.Helper()
	build.once.Do(func() {
		build.mu.Lock()
		defer build.mu.Unlock()
		dir, err := os.MkdirTemp("", "fakeauthority-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		path := filepath.Join(dir, "fakeauthority")
		cmd := exec.Command(goTool(), "build", "-o", path, FakeAuthorityPackage)
		cmd.Dir = sourceDir()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			build.err = errors.New("go build " + FakeAuthorityPackage + ": " + err.Error() + "\n" + out.String())
			return
		}
		build.path = path
	})
	build.mu.Lock()
	defer build.mu.Unlock()
	if build.err != nil {
		tb.Fatalf("gatestest: %v", build.err)
	}
	if build.path == "" {
		tb.Fatal("gatestest: the fake authority was removed; RemoveFakeAuthority runs after m.Run only")
	}
	return build.path
}

// RemoveFakeAuthority deletes the built fake adapter, if any. Call it from
// TestMain after m.Run; BuildFakeAuthority fails afterwards.
func RemoveFakeAuthority() {
	build.mu.Lock()
	defer build.mu.Unlock()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
		build.dir, build.path = "", ""
	}
}

// FakeRun is one line of the fake adapter's log: one run of the program.
type FakeRun struct {
	PID  int    `json:"pid"`
	Mode string `json:"mode"`
	// GrandchildPID is the pid of the grandchild the sleep, fork-hold
	// and escape modes start (0 otherwise).
	GrandchildPID int `json:"grandchild_pid"`
	// Stdin is everything the program read from its stdin.
	Stdin string `json:"stdin"`
	// Env names the variables of the program's environment, sorted.
	Env []string `json:"env"`
}

// Request decodes the run's stdin as exactly one spec.AuthorityRequest line:
// one JSON object with only the contract's fields, then a newline, then EOF.
func (r FakeRun) Request() (spec.AuthorityRequest, error) {
	var req spec.AuthorityRequest
	line, ok := strings.CutSuffix(r.Stdin, "\n")
	if !ok || strings.Contains(line, "\n") {
		return req, errors.New("stdin is not exactly one line ending in a newline")
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, err
	}
	if dec.More() {
		return req, errors.New("stdin holds more than one JSON value")
	}
	return req, nil
}

// ReadFakeLog returns the runs recorded in the fake adapter's log at path,
// oldest first; a missing log means no run.
func ReadFakeLog(tb testing.TB, path string) []FakeRun {
	tb.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatalf("gatestest: %v", err)
	}
	defer f.Close()
	var runs []FakeRun
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r FakeRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("gatestest: bad log line %q: %v", sc.Text(), err)
		}
		runs = append(runs, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("gatestest: %v", err)
	}
	return runs
}

// goTool returns the go command of the toolchain running the tests: `go
// test` puts its GOROOT/bin first on the tests' PATH.
func goTool() string { return "go" }

// sourceDir is a directory inside the module, so `go build` resolves the
// fake's import path: this file's, when the sources are present, else the
// working directory (a test runs in its package's directory).
func sourceDir() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		if dir := filepath.Dir(file); isDir(dir) {
			return dir
		}
	}
	return ""
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
