package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// relayBin is the real relay binary, built once for the end-to-end tests.
var relayBin string

func TestMain(m *testing.M) {
	if os.Getenv(fakeDaemonEnv) != "" {
		os.Exit(fakeDaemonMain()) // a fake daemon (reliability_home_test.go)
	}
	dir, err := os.MkdirTemp("", "relay-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	relayBin = filepath.Join(dir, "relay")
	// The test build: its test switches (testswitch.go) exist only with
	// this tag; releaseBin is the relay as users build it.
	args := []string{"build", "-tags", "relaytest", "-o", relayBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build relay: %v\n%s", err, out)
		os.Exit(1)
	}
	// Agents and authority adapters run under a shim built without the
	// race detector (envAgentShim), except where a test unsets it to check
	// the relay's own __agent-shim.
	buildDir = dir
	shim := filepath.Join(dir, "agentshim")
	if out, err := exec.Command("go", "build", "-o", shim, dispatchtest.ShimPackage).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agent shim: %v\n%s", err, out)
		os.Exit(1)
	}
	os.Setenv(envAgentShim, shim)
	code := m.Run()
	gatestest.RemoveFakeAuthority()
	dispatchtest.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildDir holds the binaries TestMain and releaseBin build.
var buildDir string

var release struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// releaseBin returns the relay built as a user builds it: without the
// relaytest tag, so without any test switch, and without the race
// detector. Built once, on first use (about 2 s with a warm cache).
func releaseBin(t *testing.T) string {
	t.Helper()
	release.once.Do(func() {
		release.bin = filepath.Join(buildDir, "relay-release")
		release.out, release.err = exec.Command("go", "build", "-o", release.bin, ".").CombinedOutput()
	})
	if release.err != nil {
		t.Fatalf("build the release relay: %v\n%s", release.err, release.out)
	}
	return release.bin
}

// syncBuffer is a bytes.Buffer safe for a subprocess to write while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newHome returns a fresh relay home with the given config.toml (if any).
func newHome(t *testing.T, config string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "h")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// fullConfig wires the fake authority (in the given mode) and points every
// core agent at the fake ACP agent (dispatchtest.FakeAdapter).
// ownShim, in a daemon's environment, has it run agents and adapters under
// its own __agent-shim rather than the tests' race-free build (TestMain).
const ownShim = envAgentShim + "="

// fakeAuthorityEnv is the authority.env of fullConfig.
const fakeAuthorityEnv = `["FAKEAUTHORITY_LOG", "FAKEAUTHORITY_DELAY", "FAKEAUTHORITY_MODE", "FAKEAUTHORITY_HOLD"]`

func fullConfig(t *testing.T, authMode string, extra string) string {
	t.Helper()
	auth := gatestest.BuildFakeAuthority(t)
	var b strings.Builder
	// The adapter sees only the environment its config names: the fake's
	// knobs are passed from the daemon's environment when a test sets them.
	fmt.Fprintf(&b, "[authority]\ncommand = [%q, %q]\ntimeout = \"5s\"\nenv = %s\n\n", auth, authMode, fakeAuthorityEnv)
	for _, n := range []string{"claude", "codex", "gemini", "cursor", "opencode", "hermes"} {
		// Installed as the adapter each profiled name runs: the daemon
		// identifies it as that adapter, under that adapter's profile.
		fmt.Fprintf(&b, "[agents.%s]\ncommand = [%q]\n\n", n, dispatchtest.FakeAdapter(t, n))
	}
	b.WriteString(extra)
	return b.String()
}

type daemonProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// launchDaemon runs `relay daemon --home home` and waits until its socket
// answers. Cleanup stops it with SIGTERM.
func launchDaemon(t *testing.T, home string) *daemonProc {
	t.Helper()
	return launchDaemonEnv(t, home, nil)
}

// launchDaemonEnv is launchDaemon with extra environment for the daemon
// (and so for the agents it starts).
func launchDaemonEnv(t *testing.T, home string, env []string) *daemonProc {
	t.Helper()
	cmd := exec.Command(relayBin, "daemon", "--home", home)
	cmd.Env = append(append(os.Environ(), fastExit...), env...)
	return runDaemonCmd(t, home, cmd)
}

// runDaemonCmd starts cmd (a relay daemon for home, possibly behind a
// wrapper) and waits until its socket answers. Cleanup stops it with
// SIGTERM.
func runDaemonCmd(t *testing.T, home string, cmd *exec.Cmd) *daemonProc {
	t.Helper()
	cmd.Env = withSandboxWritable(cmd.Env)
	d := &daemonProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.stop(t, syscall.SIGTERM) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("unix", filepath.Join(home, "relay.sock"))
		if err == nil {
			c.Close()
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("daemon exited before listening: %v\n%s", d.err, d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not listen within 60s\n%s", d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop signals the daemon and waits for it (killing it after 20s).
func (d *daemonProc) stop(t *testing.T, sig syscall.Signal) {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("daemon ignored %v for 20s\n%s", sig, d.stderr.String())
	}
}

// startFacade launches `relay mcp --as agent` as an MCP client would and
// initializes it.
func startFacade(t *testing.T, home, agent string, extra ...string) *client.Client {
	t.Helper()
	return facadeWithProtocol(t, home, agent, mcp.LATEST_PROTOCOL_VERSION, extra...)
}

func facadeWithProtocol(t *testing.T, home, agent, protocol string, extra ...string) *client.Client {
	t.Helper()
	args := append([]string{"mcp", "--as", agent, "--home", home}, extra...)
	c, err := client.NewStdioMCPClient(relayBin, append(os.Environ(), fastExit...), args...)
	if err != nil {
		t.Fatalf("start facade: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = protocol
	ir.Params.ClientInfo = mcp.Implementation{Name: "relay-e2e", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		t.Fatalf("initialize facade as %s: %v", agent, err)
	}
	return c
}

// toolResult is a tool call's outcome: its structured content and whether
// it is an MCP tool error.
type toolResult struct {
	isError bool
	data    map[string]any
	text    string
}

func (r toolResult) code() string { s, _ := r.data["code"].(string); return s }

func (r toolResult) str(k string) string { s, _ := r.data[k].(string); return s }

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) toolResult {
	t.Helper()
	r, err := tryTool(c, name, args)
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return r
}

func tryTool(c *client.Client, name string, args map[string]any) (toolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return toolResult{}, err
	}
	out := toolResult{isError: res.IsError}
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			out.text += tc.Text
		}
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out.data)
	return out, nil
}

// mustOK fails unless the call succeeded.
func mustOK(t *testing.T, c *client.Client, name string, args map[string]any) toolResult {
	t.Helper()
	r := callTool(t, c, name, args)
	if r.isError {
		t.Fatalf("%s(%v): tool error %s", name, args, r.text)
	}
	return r
}

// mustCode fails unless the call is a tool error with code.
func mustCode(t *testing.T, c *client.Client, name string, args map[string]any, code string) toolResult {
	t.Helper()
	r := callTool(t, c, name, args)
	if !r.isError || r.code() != code {
		t.Fatalf("%s(%v): isError=%v code=%q (%s), want %q", name, args, r.isError, r.code(), r.text, code)
	}
	if r.str("message") == "" || r.str("hint") == "" {
		t.Fatalf("%s: error lacks message or hint: %s", name, r.text)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(r.text), &fromText); err != nil || fromText["code"] != code {
		t.Fatalf("%s: error text is not the same {code,message,hint} JSON: %q", name, r.text)
	}
	return r
}

// cli runs the relay binary and returns stdout, stderr and the exit code.
// Under -race it exits without the race runtime's one-second pause.
func cli(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	return relayEnv(t, append(os.Environ(), fastExit...), append(args, "--home", home)...)
}

// cliJSON runs a relay command with --json and decodes its output.
func cliJSON(t *testing.T, home string, v any, args ...string) {
	t.Helper()
	out, errOut, code := cli(t, home, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("relay %v: exit %d\n%s", args, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("relay %v --json: %v\n%s", args, err, out)
	}
}

func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	// Every 10 ms at first, then half as often again each time, up to
	// every 250 ms: a long wait (a dispatch, a backlog being stored) does
	// not spend the CPU it waits for on asking.
	wait := 10 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(wait)
		wait = min(wait*3/2, 250*time.Millisecond)
	}
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// daemonsFor lists the pids of live `relay daemon` processes for home.
func daemonsFor(home string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 4 && args[0] == relayBin && args[1] == "daemon" && args[3] == home && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// withSandboxWritable adds to a daemon's environment the test switch that
// binds the directories of the scripted agents' logs and pid files writable
// into its sandbox (dispatch.SandboxWritableEnv), when env names them.
func withSandboxWritable(env []string) []string {
	var dirs []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if (k == "FAKEAGENT_LOG" || k == "FAKEAGENT_PIDFILE" || k == "FAKEAGENT_START_CHILD" || k == "INTEROP_ACP_LOG") && filepath.IsAbs(v) {
			dirs = append(dirs, filepath.Dir(v))
		}
	}
	if len(dirs) == 0 {
		return env
	}
	return append(slices.Clip(env), envSandboxWritable+"="+strings.Join(dirs, ":"))
}
