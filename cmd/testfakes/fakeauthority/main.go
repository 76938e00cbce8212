// Command fakeauthority is a fake authority adapter for tests: a real program
// that speaks (or deliberately breaks) the authority adapter contract
// (spec/authority.go), so tests start it as a subprocess exactly as the
// relay starts a real adapter.
//
// Usage:
//
//	fakeauthority [-log FILE] [-delay D] [-hold FIFO] MODE [ARGS...]
//
// MODE may also come from FAKEAUTHORITY_MODE, -log from FAKEAUTHORITY_LOG,
// -delay from FAKEAUTHORITY_DELAY and -hold from FAKEAUTHORITY_HOLD; flags
// win. The program first reads
// its whole stdin (the relay closes it after one request line), then, when a
// log file is named, appends one JSON line to it:
//
//	{"pid":123,"mode":"allow-guarded","grandchild_pid":0,"stdin":"{...}\n","env":["HOME","PATH"]}
//
// so tests can count runs and check the request exactly as it arrived,
// and which variables (names only, sorted) its environment held.
// Then it waits -delay; with -hold, it opens the named pipe FIFO for
// reading and reads it to its end, so it answers only once the test has
// opened the pipe's other end and closed it (an event, not a duration: the
// test decides when the authority answers). Then it behaves as MODE says:
//
//	allow-guarded        {"decision":"allow","assurance":"guarded"}
//	allow-standard       {"decision":"allow","assurance":"standard"}
//	allow                {"decision":"allow"} (no assurance)
//	allow-extra          allow guarded with unknown extra fields
//	allow-size N         allow guarded, padded to exactly N bytes of stdout
//	deny [CODE [MSG]]    {"decision":"deny","code":CODE,"message":MSG}
//	                     (default lease_expired)
//	deny-nocode          {"decision":"deny","message":"…"}
//	unknown-decision     {"decision":"maybe"}
//	missing-decision     {"assurance":"guarded"}
//	unknown-assurance    {"decision":"allow","assurance":"paranoid"}
//	wrong-type           {"decision":"allow","assurance":1}
//	case-twin            a guarded allow with "Decision":"deny" beside it
//	lone-surrogate       a deny whose message holds a lone \ud800
//	garbage              not JSON
//	trailing             a valid allow followed by garbage
//	two-objects          two valid JSON objects
//	array                a JSON array
//	empty                nothing at all
//	oversized            a syntactically valid allow of 100 KiB
//	crash                panics (exit 2, a stack trace on stderr)
//	exit-allow           prints a valid guarded allow, exits 3
//	sleep                starts a grandchild that sleeps holding stdout,
//	                     then sleeps itself (until killed; 10 min at most)
//	fork-hold            starts a grandchild that sleeps holding stdout,
//	                     prints a guarded allow and exits 0
//	escape               starts a grandchild that leaves the adapter's
//	                     session and process group (setsid), with an empty
//	                     environment and no pipe of the adapter's, then
//	                     prints a guarded allow and exits 0
//	escape-sleep         starts the same grandchild, then sleeps
//	stderr-flood         writes 10 MiB to stderr (starting with
//	                     STDERR-HEAD, ending with STDERR-TAIL), then allows
//	                     guarded
//
// Grandchildren other than escape's stay in the adapter's process group and record their pid in
// the log line as grandchild_pid; they exit by themselves after 10 minutes
// at most, so a failing test leaks nothing for long.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// grandchildMode is the hidden mode a grandchild runs in.
const grandchildMode = "grandchild"

// longest is how long anything here sleeps at most.
const longest = 10 * time.Minute

func main() {
	logPath := flag.String("log", os.Getenv("FAKEAUTHORITY_LOG"), "append a JSON line per run to `FILE`")
	delay := flag.Duration("delay", envDuration("FAKEAUTHORITY_DELAY"), "wait `D` before answering")
	hold := flag.String("hold", os.Getenv("FAKEAUTHORITY_HOLD"), "before answering, read the named pipe `FIFO` to its end")
	flag.Parse()
	args := flag.Args()
	mode := os.Getenv("FAKEAUTHORITY_MODE")
	if len(args) > 0 {
		mode, args = args[0], args[1:]
	}
	if mode == grandchildMode {
		time.Sleep(longest)
		return
	}

	stdin, _ := io.ReadAll(os.Stdin)

	grandchild := 0
	if mode == "sleep" || mode == "fork-hold" || mode == "escape" || mode == "escape-sleep" {
		var err error
		if grandchild, err = startGrandchild(strings.HasPrefix(mode, "escape")); err != nil {
			fmt.Fprintln(os.Stderr, "fakeauthority: grandchild:", err)
			os.Exit(4)
		}
		fmt.Fprintf(os.Stderr, "fakeauthority: grandchild pid %d\n", grandchild)
	}
	if *logPath != "" {
		if err := appendLog(*logPath, mode, grandchild, stdin); err != nil {
			fmt.Fprintln(os.Stderr, "fakeauthority: log:", err)
			os.Exit(4)
		}
	}
	if *delay > 0 {
		time.Sleep(*delay)
	}
	if *hold != "" {
		if err := waitPipe(*hold); err != nil {
			fmt.Fprintln(os.Stderr, "fakeauthority: hold:", err)
			os.Exit(4)
		}
	}

	const guarded = `{"decision":"allow","assurance":"guarded"}` + "\n"
	switch mode {
	case "allow-guarded":
		out(guarded)
	case "allow-standard":
		out(`{"decision":"allow","assurance":"standard"}` + "\n")
	case "allow":
		out(`{"decision":"allow"}` + "\n")
	case "allow-extra":
		out(`{"decision":"allow","assurance":"guarded","ttl_seconds":30,"trace":{"id":"x"}}` + "\n")
	case "case-twin":
		out(`{"decision":"allow","assurance":"guarded","Decision":"deny"}` + "\n")
	case "lone-surrogate":
		out(`{"decision":"deny","code":"lease_expired","message":"expired \ud800"}` + "\n")
	case "allow-size":
		n := 0
		if len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		const pre, post = `{"decision":"allow","assurance":"guarded","message":"`, `"}`
		if pad := n - len(pre) - len(post); pad >= 0 {
			out(pre + strings.Repeat("x", pad) + post)
		} else {
			fail("allow-size: %d is too small", n)
		}
	case "deny":
		code, msg := "lease_expired", "lease S-1 expired at 2026-01-01T00:00:00Z"
		if len(args) > 0 {
			code = args[0]
		}
		if len(args) > 1 {
			msg = args[1]
		}
		b, _ := json.Marshal(map[string]string{"decision": "deny", "code": code, "message": msg})
		out(string(b) + "\n")
	case "deny-nocode":
		out(`{"decision":"deny","message":"no reason given"}` + "\n")
	case "unknown-decision":
		out(`{"decision":"maybe"}` + "\n")
	case "missing-decision":
		out(`{"assurance":"guarded"}` + "\n")
	case "unknown-assurance":
		out(`{"decision":"allow","assurance":"paranoid"}` + "\n")
	case "wrong-type":
		out(`{"decision":"allow","assurance":1}` + "\n")
	case "garbage":
		out("this is not JSON at all\n")
	case "trailing":
		out(`{"decision":"allow","assurance":"guarded"} and then some` + "\n")
	case "two-objects":
		out(guarded + `{"decision":"deny","code":"x"}` + "\n")
	case "array":
		out(`[{"decision":"allow"}]` + "\n")
	case "empty":
	case "oversized":
		out(`{"decision":"allow","assurance":"guarded","message":"` + strings.Repeat("y", 100<<10) + `"}` + "\n")
	case "crash":
		panic("fakeauthority: crash requested")
	case "exit-allow":
		out(guarded)
		os.Exit(3)
	case "sleep", "escape-sleep":
		time.Sleep(longest)
	case "escape":
		out(guarded)
	case "fork-hold":
		out(guarded)
	case "stderr-flood":
		line := strings.Repeat("e", 1023) + "\n"
		chunk := []byte(strings.Repeat(line, 64)) // 64 KiB
		_, _ = os.Stderr.WriteString("STDERR-HEAD\n")
		for range 160 { // 10 MiB
			if _, err := os.Stderr.Write(chunk); err != nil {
				os.Exit(5)
			}
		}
		_, _ = os.Stderr.WriteString("STDERR-TAIL\n")
		out(guarded)
	default:
		fail("unknown mode %q", mode)
	}
}

// startGrandchild starts this program again in grandchild mode, sharing
// stdout and stderr and staying in this process's group; or, escaping, in
// a session of its own with an empty environment and no pipe of ours.
func startGrandchild(escape bool) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, grandchildMode)
	cmd.Env = append(os.Environ(), "FAKEAUTHORITY_MODE=")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if escape {
		cmd.Env = []string{}
		cmd.Stdout, cmd.Stderr = nil, nil
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

func appendLog(path, mode string, grandchild int, stdin []byte) error {
	line, err := json.Marshal(struct {
		PID           int      `json:"pid"`
		Mode          string   `json:"mode"`
		GrandchildPID int      `json:"grandchild_pid"`
		Stdin         string   `json:"stdin"`
		Env           []string `json:"env"`
	}{os.Getpid(), mode, grandchild, string(stdin), envNames()})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// envNames returns the names of this process's environment, sorted.
func envNames() []string {
	names := []string{}
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// waitPipe opens the named pipe at path for reading (which blocks until a
// writer opens it) and reads until every writer has closed it.
func waitPipe(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

func out(s string) {
	if _, err := os.Stdout.WriteString(s); err != nil {
		os.Exit(5)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fakeauthority: "+format+"\n", args...)
	os.Exit(64)
}

func envDuration(key string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(key))
	return d
}
