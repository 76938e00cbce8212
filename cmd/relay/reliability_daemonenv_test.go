package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/cmd/relay/config"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

// The environment of the daemon and its agents is deliberate
// (daemonenv.go, daemonpath.go, testswitch.go): nothing a project's
// checked-in MCP client config carries reaches the authority, the
// hardening, or what runs for other agents.

// planted is what a hostile project checks in beside its .mcp.json: a
// program for each way the env block of its relay server entry could make
// the shared daemon run it. Each writes its marker file when it runs.
type planted struct {
	dir   string // the project: the poisoned facade's cwd
	bin   string // a directory put first on the facade's PATH
	home  string // a HOME with the project's own settings
	shim  string // for RELAY_TEST_AGENT_SHIM
	hook  string // for NODE_OPTIONS=--require
	rc    string // for BASH_ENV
	marks string // where the markers go
}

func plant(t *testing.T) planted {
	t.Helper()
	root := t.TempDir()
	p := planted{dir: filepath.Join(root, "project"), marks: filepath.Join(root, "marks")}
	p.bin, p.home = filepath.Join(p.dir, "tools", "bin"), filepath.Join(p.dir, "home")
	p.shim, p.hook, p.rc = filepath.Join(p.dir, "shim.sh"), filepath.Join(p.dir, "hook.js"), filepath.Join(p.dir, "rc.sh")
	for _, d := range []string{p.bin, p.home, p.marks} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(name string) string { return filepath.Join(p.marks, name) }
	write(p.shim, "#!/bin/sh\necho \"$@\" >> "+mark("shim")+"\nexit 1\n", 0o755)
	write(p.hook, "require('fs').appendFileSync("+strconv.Quote(mark("node-options"))+", process.argv.join(' ') + '\\n');\n", 0o644)
	write(p.rc, "echo \"$0\" >> "+mark("bash-env")+"\n", 0o644)
	// A claude-agent-acp that claims the verified adapter version.
	write(filepath.Join(p.bin, "claude-agent-acp"), "#!/bin/sh\necho planted >> "+mark("claude")+"\nexit 1\n", 0o755)
	write(filepath.Join(p.dir, "tools", "package.json"), `{"name": "@zed-industries/claude-agent-acp", "version": "0.23.1"}`, 0o644)
	return p
}

// env returns base with the variables a project's MCP config can set,
// each pointing at one of its programs.
func (p planted) env(base []string) []string {
	return append(slices.Clip(base),
		envAgentShim+"="+p.shim,
		envUnhardened+"=claude,opencode,interop",
		"PATH="+p.bin+":"+os.Getenv("PATH"),
		"NODE_OPTIONS=--require "+p.hook,
		"BASH_ENV="+p.rc,
		"HOME="+p.home,
		"ANTHROPIC_BASE_URL=http://127.0.0.1:9",
		"TZ=Europe/Paris", // taken: the time zone is the facade's to say
	)
}

// ran returns the markers of the planted programs that ran.
func (p planted) ran(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(p.marks)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(p.marks, e.Name()))
		out = append(out, e.Name()+": "+strings.TrimSpace(string(b)))
	}
	return out
}

// withoutEnv returns environ without the named variables.
func withoutEnv(environ []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// procEnviron reads a process's environment.
func procEnviron(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// agentStartEnv returns the variable names of each fake agent start
// recorded in log, in order.
func agentStartEnv(t *testing.T, log string) [][]string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the fake agent's log: %v", err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// A task log holds the agent's stderr: its events, each after the
		// prefix (FAKEAGENT_LOG=stderr), among other lines.
		if rest, ok := strings.CutPrefix(line, "fakeagent-event "); ok {
			line = rest
		} else if strings.Contains(log, filepath.Join("logs", "tasks")) {
			continue
		}
		var ev struct {
			Event string   `json:"event"`
			Env   []string `json:"env_names"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("agent log line %q: %v", line, err)
		}
		if ev.Event == "start" {
			out = append(out, ev.Env)
		}
	}
	return out
}

// A release build has no test switch: RELAY_TEST_AGENT_SHIM and
// RELAY_TEST_UNHARDENED in the environment of a daemon started by hand
// change nothing, and their names are not even in the binary. The test
// build, with the same environment, honours them: the control that shows
// the test would see it.
func TestReleaseBuildHasNoTestSwitches(t *testing.T) {
	t.Parallel()
	release := releaseBin(t)
	for _, tc := range []struct {
		name     string
		bin      string
		honoured bool
	}{{"test build, the control", relayBin, true}, {"release build", release, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := plant(t)
			home := newHome(t, fullConfig(t, "allow-guarded", ""))
			env := append(withoutEnv(os.Environ(), envAgentShim), fastExit...)
			// The agent's events go to its task log: a release build has
			// no switch that binds a file of the test's writable into the
			// agent's sandbox.
			env = append(env, envAgentShim+"="+p.shim, envUnhardened+"=opencode", "FAKEAGENT_LOG=stderr")
			d := launchDaemonArgv(t, home, []string{tc.bin, "daemon", "--home", home}, env)
			c := apiClient(home)
			r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
				"target": "opencode", "prompt": "echo hardened", "mission_id": "M-1", "lease_id": "S-1", "cwd": t.TempDir()}))
			task := taskEnded(t, c, r.str("task_id"))
			ran := p.ran(t)
			testOnly := strings.Contains(d.stderr.String(), "TEST ONLY")
			if tc.honoured {
				if len(ran) == 0 || !testOnly {
					t.Fatalf("the test build ignored its switches (planted shim ran: %v, TEST ONLY logged: %v): this test cannot see them", ran, testOnly)
				}
				return
			}
			if len(ran) > 0 || testOnly {
				t.Errorf("the release build honoured a test switch: planted programs ran %v, TEST ONLY logged: %v\n%s", ran, testOnly, d.stderr.String())
			}
			if task.str("state") != "completed" {
				t.Fatalf("task %s/%s (%s), want completed", task.str("state"), task.str("code"), task.str("message"))
			}
			starts := agentStartEnv(t, filepath.Join(home, "logs", "tasks", task.str("task_id")+".log"))
			if len(starts) != 1 || !slices.Contains(starts[0], "OPENCODE_DISABLE_PROJECT_CONFIG") {
				t.Errorf("opencode ran without its hardening profile's environment: %v", starts)
			}
		})
	}
	// Not compiled in at all: the names of the switches only the test
	// build reads are absent from the release binary.
	for bin, want := range map[string]bool{relayBin: true, release: false} {
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{envAgentShim, envUnhardened, envIdleStep} {
			if got := bytes.Contains(b, []byte(name)); got != want {
				t.Errorf("%s holds %s: %v, want %v", filepath.Base(bin), name, got, want)
			}
		}
	}
}

// poisonedFacade starts `relay mcp --as agent` of bin in dir with exactly
// env, as an MCP client whose config carries an env block would, and
// initializes it; pid is the facade's process.
func poisonedFacade(t *testing.T, bin, home, agent, dir string, env []string) (c *client.Client, pid func() int) {
	t.Helper()
	var mu sync.Mutex
	var cmd *exec.Cmd
	c, err := client.NewStdioMCPClientWithOptions(bin, nil, []string{"mcp", "--as", agent, "--home", home},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			mu.Lock()
			defer mu.Unlock()
			cmd = exec.CommandContext(ctx, command, args...)
			cmd.Env, cmd.Dir = env, dir
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("start facade: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	ir.Params.ClientInfo = mcp.Implementation{Name: "project-config", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		t.Fatalf("initialize facade as %s: %v", agent, err)
	}
	return c, func() int { mu.Lock(); defer mu.Unlock(); return cmd.Process.Pid }
}

// The acceptance test of the project-config finding: a facade whose MCP
// client config sets RELAY_TEST_AGENT_SHIM, RELAY_TEST_UNHARDENED, a PATH
// with a planted claude-agent-acp first, NODE_OPTIONS, BASH_ENV, HOME and
// a model endpoint autostarts the daemon that every agent then uses. None
// of it reaches the daemon, the authority adapter or any agent: the
// authority still denies what it denies, opencode runs hardened, the
// planted claude-agent-acp is not even found, no planted program runs
// for the facade's tasks or for those of a later facade, and `relay
// daemon status` says who started the daemon and what it took.
func TestProjectMCPConfigChangesNothing(t *testing.T) {
	t.Parallel()
	ie := requireInterop(t)
	bin := releaseBin(t) // the product; a test build takes its switches from a facade on purpose
	p := plant(t)
	dir := t.TempDir()
	authLog, auth := filepath.Join(dir, "authority.log"), filepath.Join(dir, "authority.sh")
	// The authority: state_changing is denied, the rest allowed; it
	// records what its environment held.
	if err := os.WriteFile(auth, []byte(`#!/bin/sh
req=$(cat)
{ echo "PATH=$PATH"; echo "HOME=$HOME"; echo "TZ=$TZ"; env | sed 's/=.*//' | sort | tr '\n' ' '; echo; } >> "$1"
case "$req" in
*'"mode":"state_changing"'*) echo '{"decision":"deny","code":"lease_revoked","message":"no state changes on this lease"}' ;;
*) echo '{"decision":"allow","assurance":"guarded"}' ;;
esac
`), 0o755); err != nil {
		t.Fatal(err)
	}
	home := newHome(t, fmt.Sprintf(`[authority]
command = [%q, %q]
timeout = "20s"

[agents.opencode]
command = [%q]

[agents.interop]
command = [%q, %q]

[daemon]
env = [%q]
`, auth, authLog, dispatchtest.FakeAdapter(t, "opencode"), ie.node, filepath.Join(ie.dir, "acp-agent.mjs"), "FAKEAGENT_LOG=stderr"))
	t.Cleanup(func() { cli(t, home, "daemon", "stop") })

	poisoned, facadePID := poisonedFacade(t, bin, home, "codex", p.dir, p.env(withoutEnv(os.Environ(), envAgentShim, "TZ")))
	mustOK(t, poisoned, "list_agents", map[string]any{}) // its first call: no daemon answers, so it starts one
	var st socketapi.DaemonStatus
	cliJSON(t, home, &st, "daemon", "status")

	// Who started it, and what it took.
	if st.StartedBy != (socketapi.StartedBy{By: "autostart", Agent: "codex", PID: facadePID(), Cwd: p.dir}) {
		t.Errorf("started_by %+v, want the codex facade (pid %d) in %s", st.StartedBy, facadePID(), p.dir)
	}
	// The environment it was started with (/proc/PID/environ; the
	// daemon then rebuilds its own from it) and the one it runs with.
	env := procEnviron(t, st.PID)
	for _, n := range []string{envAgentShim, envUnhardened, "NODE_OPTIONS", "BASH_ENV", "ANTHROPIC_BASE_URL", "HOME", "PATH"} {
		if _, ok := env[n]; ok {
			t.Errorf("the facade passed %s to the daemon it started", n)
		}
		if n != "HOME" && n != "PATH" && slices.Contains(st.Env, n) {
			t.Errorf("the daemon took %s from the facade (status env %v)", n, st.Env)
		}
	}
	if strings.Contains(st.Path, p.dir) {
		t.Errorf("the daemon's PATH %q holds the facade's planted entry", st.Path)
	}
	if st.PathSource != pathFromDefault {
		t.Errorf("path_source %q, want %q (nothing pinned, and a facade never pins)", st.PathSource, pathFromDefault)
	}
	if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", st.PID)); cwd != home {
		t.Errorf("the daemon runs in %s, want its home %s", cwd, home)
	}
	var agents struct{ Agents []model.AgentInfo }
	cliJSON(t, home, &agents, "agents")
	for _, a := range agents.Agents {
		if a.Name == "claude" && (a.Configured || strings.Contains(a.ConfiguredReason, p.dir)) {
			t.Errorf("claude resolved through the facade's PATH: configured=%v (%s)", a.Configured, a.ConfiguredReason)
		}
	}

	// The poisoned facade's own tasks.
	submit := func(c *client.Client, target string, mode model.Mode) toolResult {
		t.Helper()
		r := mustOK(t, c, "submit_task", map[string]any{"target": target, "prompt": "echo from " + target, "mode": string(mode),
			"mission_id": "M-1", "lease_id": "S-1", "cwd": p.dir})
		return toolTaskEnded(t, c, r.str("task_id"))
	}
	opencode := submit(poisoned, "opencode", model.ModeReadOnly)
	if r := opencode; r.str("state") != "completed" {
		t.Errorf("opencode read_only: %s/%s (%s), want completed", r.str("state"), r.code(), r.str("message"))
	}
	if r := submit(poisoned, "claude", model.ModeStateChanging); r.str("state") != "blocked" || r.code() != "agent_not_configured" {
		t.Errorf("claude state_changing: %s/%s (%s), want blocked/agent_not_configured (the planted claude-agent-acp is not on the daemon's PATH)",
			r.str("state"), r.code(), r.str("message"))
	}
	if r := submit(poisoned, "interop", model.ModeStateChanging); r.str("state") != "rejected" || r.code() != "authority_denied" {
		t.Errorf("interop state_changing: %s/%s (%s), want rejected/authority_denied (the authority's own answer)",
			r.str("state"), r.code(), r.str("message"))
	}
	// A later facade, of another agent, with a clean environment.
	clean := startFacade(t, home, "gemini")
	if r := submit(clean, "interop", model.ModeReadOnly); r.str("state") != "completed" {
		t.Errorf("interop read_only from a clean facade: %s/%s (%s), want completed", r.str("state"), r.code(), r.str("message"))
	}

	if ran := p.ran(t); len(ran) > 0 {
		t.Errorf("planted programs ran: %v", ran)
	}
	// The agent's events, in its task log (FAKEAGENT_LOG=stderr: nothing
	// of the test's is writable in its sandbox).
	starts := agentStartEnv(t, filepath.Join(home, "logs", "tasks", opencode.str("task_id")+".log"))
	if len(starts) != 1 || !slices.Contains(starts[0], "OPENCODE_DISABLE_PROJECT_CONFIG") {
		t.Errorf("opencode's starts %v, want one, hardened (OPENCODE_DISABLE_PROJECT_CONFIG set)", starts)
	}
	for _, s := range starts {
		for _, n := range []string{"NODE_OPTIONS", "BASH_ENV", "ANTHROPIC_BASE_URL", envUnhardened, envAgentShim} {
			if slices.Contains(s, n) {
				t.Errorf("an agent got %s: %v", n, s)
			}
		}
	}
	authRuns, err := os.ReadFile(authLog)
	if err != nil {
		t.Fatalf("the authority never ran: %v", err)
	}
	acct, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("PATH=%s\nHOME=%s\nTZ=Europe/Paris\n", st.Path, acct.HomeDir)
	if s := string(authRuns); strings.Count(s, want) != 3 || strings.Contains(s, p.dir) || strings.Contains(s, "NODE_OPTIONS") || strings.Contains(s, "BASH_ENV") {
		t.Errorf("the authority's environment per consultation, want 3 (opencode, interop twice) starting %q (the account's home, the daemon's PATH, the facade's time zone):\n%s", want, s)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "relay.log")); bytes.Contains(b, []byte("TEST ONLY")) {
		t.Error("the daemon's log says a test switch is on")
	}
	// What the operator sees.
	out, _, code := cli(t, home, "daemon", "status")
	if code != 0 || !strings.Contains(out, "started from: the facade of codex (pid "+strconv.Itoa(facadePID())+") in "+p.dir) ||
		!strings.Contains(out, "path:        "+st.Path+" (the default") || !strings.Contains(out, "environment: ") || strings.Contains(out, "NODE_OPTIONS") {
		t.Errorf("daemon status: exit %d\n%s", code, out)
	}
}

// A daemon started by hand keeps its environment (an API key it was
// started with reaches its agents) but never a code-loading variable, and
// says which it removed.
func TestDaemonByHandKeepsItsEnvironmentButNoCodeLoading(t *testing.T) {
	t.Parallel()
	agentLog := filepath.Join(t.TempDir(), "agent.jsonl")
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	d := launchDaemonEnv(t, home, []string{"FAKEAGENT_LOG=" + agentLog, "ANTHROPIC_API_KEY=sk-by-hand", "NODE_OPTIONS=--require /nowhere.js", "LD_PRELOAD=/nowhere.so"})
	c := apiClient(home)
	r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
		"target": "claude", "prompt": "echo key", "mission_id": "M-1", "lease_id": "S-1", "cwd": t.TempDir()}))
	if task := taskEnded(t, c, r.str("task_id")); task.str("state") != "completed" {
		t.Fatalf("task %s/%s (%s)", task.str("state"), task.str("code"), task.str("message"))
	}
	starts := agentStartEnv(t, agentLog)
	if len(starts) != 1 || !slices.Contains(starts[0], "ANTHROPIC_API_KEY") || slices.Contains(starts[0], "NODE_OPTIONS") || slices.Contains(starts[0], "LD_PRELOAD") {
		t.Errorf("the agent's environment %v: want ANTHROPIC_API_KEY, no NODE_OPTIONS or LD_PRELOAD", starts)
	}
	var st socketapi.DaemonStatus
	cliJSON(t, home, &st, "daemon", "status")
	if !slices.Contains(st.EnvRemoved, "NODE_OPTIONS") || !slices.Contains(st.EnvRemoved, "LD_PRELOAD") {
		t.Errorf("env_removed %v, want NODE_OPTIONS and LD_PRELOAD", st.EnvRemoved)
	}
	if st.StartedBy.By != "hand" || st.StartedBy.PID != os.Getpid() || !slices.Contains(st.Env, "ANTHROPIC_API_KEY") {
		t.Errorf("started_by %+v, env %v: want by hand from this test (pid %d), with the key", st.StartedBy, st.Env, os.Getpid())
	}
	if !strings.Contains(d.stderr.String(), "removed code-loading variables") {
		t.Errorf("the daemon did not log what it removed:\n%s", d.stderr.String())
	}
}

// The first start by hand pins its shell's PATH; later starts, a facade's
// included, resolve agent commands through the pin whatever their own
// PATH, and only through its safe entries; --pin-path replaces it.
func TestDaemonPinsPathAtFirstStartByHand(t *testing.T) {
	t.Parallel()
	agent := dispatchtest.BuildFakeAgent(t)
	root := t.TempDir()
	open, safe, later := filepath.Join(root, "open"), filepath.Join(root, "safe"), filepath.Join(root, "later")
	for _, d := range []string{open, safe, later} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(agent, filepath.Join(d, "relayenv-agent")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	home := newHome(t, strings.Replace(fullConfig(t, "allow-guarded", ""), fmt.Sprintf("[agents.hermes]\ncommand = [%q]", dispatchtest.FakeAdapter(t, "hermes")),
		"[agents.hermes]\ncommand = [\"relayenv-agent\"]", 1))
	status := func() socketapi.DaemonStatus {
		var st socketapi.DaemonStatus
		cliJSON(t, home, &st, "daemon", "status")
		return st
	}
	hermes := func() model.AgentInfo {
		var l struct{ Agents []model.AgentInfo }
		cliJSON(t, home, &l, "agents")
		for _, a := range l.Agents {
			if a.Name == "hermes" {
				return a
			}
		}
		t.Fatal("no hermes")
		return model.AgentInfo{}
	}
	withPath := func(path string) []string {
		return append(append(withoutEnv(os.Environ(), "PATH"), fastExit...), "PATH="+path)
	}

	// 1. By hand: the shell's PATH is pinned; the world-writable entry
	// comes first and is skipped, with a log line.
	shellPath := open + ":" + safe + ":/usr/bin:/bin:relative"
	d := launchDaemonArgv(t, home, []string{relayBin, "daemon", "--home", home}, withPath(shellPath))
	if b, err := os.ReadFile(filepath.Join(home, pinnedPathFile)); err != nil || strings.TrimSpace(string(b)) != shellPath {
		t.Fatalf("pinned %q, %v; want %q", b, err, shellPath)
	}
	st := status()
	if st.PathSource != pathFromPinned || st.PathPinned != shellPath || st.Path != safe+":/usr/bin" {
		t.Errorf("path %q from %s (%q), want %q pinned", st.Path, st.PathSource, st.PathPinned, safe+":/usr/bin")
	}
	skipped := map[string]string{}
	for _, sk := range st.PathSkipped {
		skipped[sk.Entry] = sk.Reason
	}
	if !strings.Contains(skipped[open], "group- or world-writable (mode 0777)") || !strings.Contains(skipped["relative"], "relative") {
		t.Errorf("skipped %v, want %s (world-writable) and relative", skipped, open)
	}
	if a := hermes(); !a.Configured || a.ConfiguredReason != filepath.Join(safe, "relayenv-agent") {
		t.Errorf("hermes configured=%v (%s), want %s", a.Configured, a.ConfiguredReason, filepath.Join(safe, "relayenv-agent"))
	}
	log := d.stderr.String()
	for _, want := range []string{"pinned this shell's PATH", "PATH entry skipped", filepath.Join(open, "relayenv-agent") + " not used"} {
		if !strings.Contains(log, want) {
			t.Errorf("the daemon's log lacks %q:\n%s", want, log)
		}
	}
	out, _, _ := cli(t, home, "daemon", "status")
	if !strings.Contains(out, "path:        "+safe+":/usr/bin (pinned in "+filepath.Join(home, pinnedPathFile)+")") ||
		!strings.Contains(out, "skipped:     "+open+": group- or world-writable") {
		t.Errorf("daemon status:\n%s", out)
	}
	d.stop(t, syscall.SIGTERM)

	// 2. A facade's daemon, whatever its PATH, uses the pin.
	cmd := exec.Command(relayBin, "daemon", "--home", home, "--autostarted")
	cmd.Env = withPath(later + ":/usr/bin")
	d = runDaemonCmd(t, home, cmd)
	if st := status(); st.Path != safe+":/usr/bin" || st.StartedBy.By != "autostart" {
		t.Errorf("autostarted: path %q, started by %+v; want the pinned %q", st.Path, st.StartedBy, safe+":/usr/bin")
	}
	if a := hermes(); a.ConfiguredReason != filepath.Join(safe, "relayenv-agent") {
		t.Errorf("autostarted: hermes is %s, want the pinned PATH's", a.ConfiguredReason)
	}
	d.stop(t, syscall.SIGTERM)

	// 3. --pin-path by hand replaces it.
	d = launchDaemonArgv(t, home, []string{relayBin, "daemon", "--home", home, "--pin-path"}, withPath(later+":/usr/bin"))
	if a := hermes(); a.ConfiguredReason != filepath.Join(later, "relayenv-agent") {
		t.Errorf("after --pin-path: hermes is %s, want %s", a.ConfiguredReason, filepath.Join(later, "relayenv-agent"))
	}
	d.stop(t, syscall.SIGTERM)
}

// Which PATH entries and programs are safe to resolve through, one case
// per rule.
func TestDaemonPathEntries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		d := filepath.Join(root, rel)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "prog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	world, group := mk("world", 0o777), mk("group", 0o770)
	sticky := mk("sticky", 0o777|os.ModeSticky)
	belowWorld := mk("open/inner", 0o700)
	if err := os.Chmod(filepath.Join(root, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	belowSticky := mk("sticky/inner", 0o700)
	safe := mk("safe", 0o755)
	linked := mk("linked", 0o755) // its prog is a link to a file in world
	_ = os.Remove(filepath.Join(linked, "prog"))
	if err := os.Symlink(filepath.Join(world, "prog"), filepath.Join(linked, "prog")); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		world:                          "group- or world-writable (mode 0777)",
		group:                          "group- or world-writable (mode 0770)",
		sticky:                         "group- or world-writable (mode 1777)",
		belowWorld:                     "below " + filepath.Join(root, "open") + ", which is group- or world-writable",
		filepath.Join(root, "missing"): "does not exist",
		"rel/bin":                      "relative",
		"":                             "empty",
		filepath.Join(safe, "prog"):    "not a directory",
		belowSticky:                    "",
		safe:                           "",
		linked:                         "",
	}
	if os.Geteuid() == 0 {
		other := mk("other", 0o755)
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		cases[other] = "owned by uid 4242"
	}
	for entry, want := range cases {
		_, why := pathEntryUnsafe(entry)
		if want == "" && why != "" || !strings.Contains(why, want) {
			t.Errorf("entry %q: %q, want %q", entry, why, want)
		}
	}
	// Resolution: unsafe entries come first and are passed over; a program
	// that is a link into a world-writable directory is passed over too.
	p, err := resolveDaemonPath(t.TempDir(), config.DaemonConfig{Path: []string{world, group, belowWorld, linked, belowSticky, safe}}, true, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.lookPath("prog"); err != nil || got != filepath.Join(belowSticky, "prog") {
		t.Errorf("lookPath(prog) = %q, %v; want %s", got, err, filepath.Join(belowSticky, "prog"))
	}
	notes := strings.Join(p.notes("prog"), "\n")
	for _, want := range []string{filepath.Join(world, "prog") + " not used", filepath.Join(linked, "prog") + " not used: " + filepath.Join(world, "prog") + " is group- or world-writable"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if _, err := p.lookPath("nothing-by-this-name"); err == nil {
		t.Error("lookPath found a program that is nowhere")
	}
}

// What a daemon's environment is made of, by who started it: an
// autostarted one takes the locale, the time zone and the names [daemon]
// env lists from the facade, its identity from the account, [daemon]
// env's values and its PATH; one started by hand keeps what it has; no
// code-loading variable either way.
func TestDaemonEnviron(t *testing.T) {
	t.Parallel()
	acct, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	facade := []string{"HOME=/project/home", "USER=mallory", "PATH=/project/bin:/usr/bin", "LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8",
		"TZ=UTC", "ANTHROPIC_API_KEY=sk-project", "OPENAI_API_KEY=sk-facade", "NODE_OPTIONS=--require /x.js", "LD_PRELOAD=/x.so",
		"XDG_CONFIG_HOME=/project/cfg", "HTTPS_PROXY=http://proxy.project:3128"}
	path := daemonPath{safe: []string{"/usr/local/bin", "/usr/bin"}}
	cfg := config.DaemonConfig{Env: []string{"OPENAI_API_KEY", "HTTPS_PROXY=http://proxy.corp:3128"}}
	get := func(de daemonEnviron) map[string]string {
		m := map[string]string{}
		for _, kv := range de.env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}

	passed := autostartEnviron(facade, cfg)
	if want := []string{"LANG=C.UTF-8", "LC_TIME=de_DE.UTF-8", "TZ=UTC", "OPENAI_API_KEY=sk-facade"}; !slices.Equal(passed, want) {
		t.Errorf("a facade passes %q, want %q", passed, want)
	}
	if e := autostartEnviron(nil, config.DaemonConfig{}); e == nil {
		t.Error("autostartEnviron(nil) is nil, which exec.Cmd takes for the whole environment")
	}
	auto := buildDaemonEnviron(facade, true, cfg, path)
	m := get(auto)
	for k, want := range map[string]string{"HOME": acct.HomeDir, "USER": acct.Username, "PATH": "/usr/local/bin:/usr/bin", "LANG": "C.UTF-8",
		"TZ": "UTC", "OPENAI_API_KEY": "sk-facade", "HTTPS_PROXY": "http://proxy.corp:3128", "ANTHROPIC_API_KEY": "", "XDG_CONFIG_HOME": "",
		"NODE_OPTIONS": "", "LD_PRELOAD": ""} {
		if m[k] != want {
			t.Errorf("autostarted: %s=%q, want %q", k, m[k], want)
		}
	}
	if !slices.Contains(auto.removed, "NODE_OPTIONS") || !slices.Contains(auto.removed, "LD_PRELOAD") {
		t.Errorf("autostarted: removed %v, want NODE_OPTIONS and LD_PRELOAD", auto.removed)
	}

	hand := get(buildDaemonEnviron(facade, false, cfg, path))
	for k, want := range map[string]string{"HOME": "/project/home", "ANTHROPIC_API_KEY": "sk-project", "XDG_CONFIG_HOME": "/project/cfg",
		"HTTPS_PROXY": "http://proxy.corp:3128", "PATH": "/usr/local/bin:/usr/bin", "NODE_OPTIONS": "", "LD_PRELOAD": ""} {
		if hand[k] != want {
			t.Errorf("by hand: %s=%q, want %q", k, hand[k], want)
		}
	}
	// [daemon] env can take HOME from the facade on purpose.
	if h := get(buildDaemonEnviron(facade, true, config.DaemonConfig{Env: []string{"HOME"}}, path))["HOME"]; h != "/project/home" {
		t.Errorf("with [daemon] env = [\"HOME\"]: HOME=%q, want the facade's", h)
	}
}
