package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The test command (scripts/test, which CI runs) speaks from its first
// second: a heartbeat line comes within a few seconds of the start, not
// after the first 30 s of go test (npm and staticcheck had then gone by
// in silence, about 4 minutes on a cold machine). In the go test phase,
// each package it is given prints one line (✓, ✖, or ∅ when the
// selection runs none of its tests, or it has no test file), and the
// heartbeat's "N of M packages done" counts those lines: M is the number
// of package lines the run prints, and N never runs ahead of them.
// A tiny selection: the command installs nothing here (what the tests
// need is there already, or this test would not run).
func TestTestCommandHeartbeat(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "interop", "node_modules", ".package-lock.json")); err != nil {
		t.Skip("interop/ is not installed (scripts/test would install it first)")
	}
	cmd := exec.Command("./scripts/test", "-count=1", "-run", "TestLookup$", "./spec", "./cmd/testfakes/fakeagent")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RELAY_TEST_JSONFILE=") && !strings.HasPrefix(kv, "RELAY_TEST_HEARTBEAT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "RELAY_TEST_HEARTBEAT=1")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	type line struct {
		at   time.Duration
		text string
	}
	var lines []line
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines = append(lines, line{time.Since(began), sc.Text()})
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("scripts/test: %v", err)
	}
	var out strings.Builder
	for _, l := range lines {
		out.WriteString(l.text + "\n")
	}

	beat := regexp.MustCompile(`^scripts/test: \d+m\d\ds, `)
	done := regexp.MustCompile(`go test: (\d+) of (\d+) packages done`)
	pkgLine := regexp.MustCompile(`^(✓|✖|∅)  \S`)
	first, printed := time.Duration(-1), 0
	for _, l := range lines {
		if pkgLine.MatchString(l.text) {
			printed++
		}
		if !beat.MatchString(l.text) {
			continue
		}
		if first < 0 {
			first = l.at
		}
		if m := done.FindStringSubmatch(l.text); m != nil {
			if m[2] != "2" {
				t.Errorf("heartbeat %q: want of 2 packages (the two given, one with no test file)", l.text)
			}
			if n, _ := strconv.Atoi(m[1]); n > printed {
				t.Errorf("heartbeat %q runs ahead of the package lines", l.text)
			}
		}
	}
	if first < 0 || first > 5*time.Second {
		t.Errorf("the first heartbeat came after %v, want within the first seconds:\n%s", first, out.String())
	}
	if printed != 2 {
		t.Errorf("%d package lines printed, want one for each of the 2 packages given:\n%s", printed, out.String())
	}
}
