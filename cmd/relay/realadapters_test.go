package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
	"github.com/mark3labs/mcp-go/client"
)

// TestRealAdapters runs the pinned real Claude and Codex ACP adapters
// (interop/) through the relay with no credentials (an empty HOME, no API
// keys: the daemon gets a minimal environment) and, where a network
// namespace can be made, no network. It checks what a new user without a
// login would see: both configured; the probe fails at the stage that
// needs a login and says so; a dispatched task fails with
// agent_auth_required well within task_timeout; and no adapter process
// (codex's native child included) outlives its run.
//
// Not parallel: it watches every process started from interop/, so it
// runs alone.
func TestRealAdapters(t *testing.T) {
	bins := requireRealAgents(t)
	node := filepath.Join(bins, "node")
	prefix := filepath.Dir(bins)
	claudeBin, codexBin := claudeAgent.command(bins)[0], codexAgent.command(bins)[0]

	// Every process whose command line names the install prefix is an
	// adapter process (node running an adapter, codex's native binary).
	watch := watchProcesses(prefix)
	defer watch.stop()

	// 2. A relay home whose config points claude and codex at the bins.
	home := newHome(t, fmt.Sprintf(`[authority]
command = [%q, "allow-guarded"]
timeout = "5s"

[agents.claude]
command = [%q]

[agents.codex]
command = [%q]

[limits]
task_timeout = "60s"
probe_timeout = "60s"
`, gatestest.BuildFakeAuthority(t), claudeBin, codexBin))
	const taskTimeout = 60 * time.Second

	// No credentials: the daemon, and so every agent, gets an empty HOME
	// and only PATH (for node), the locale and the temp dir; no API key,
	// no CODEX_HOME, no CLAUDE_CONFIG_DIR can leak in from the caller.
	agentHome := t.TempDir()
	daemonEnv := []string{
		"HOME=" + agentHome,
		"PATH=" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"TMPDIR=" + os.TempDir(),
	}
	if os.Geteuid() == 0 {
		// As root Claude Code offers bypassPermissions only under
		// IS_SANDBOX=1: set it, as for any other user.
		daemonEnv = append(daemonEnv, "IS_SANDBOX=1")
	}
	// No network: a fresh network namespace when one can be made (the
	// socket is a path, so CLI and facades outside still reach it); else
	// proxies that go nowhere, which the adapters' HTTP clients honour.
	argv := []string{relayBin, "daemon", "--home", home}
	if exec.Command("unshare", "--net", "true").Run() == nil {
		argv = append([]string{"unshare", "--net"}, argv...)
		t.Log("network: the daemon and its agents run in an empty network namespace (unshare --net)")
	} else {
		for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"} {
			daemonEnv = append(daemonEnv, k+"=http://127.0.0.1:9")
		}
		t.Log("network: no network namespace available; proxies point at a closed port (best effort)")
	}
	d := launchDaemonArgv(t, home, argv, daemonEnv)

	// 3. relay agents: both configured (their bins exist), both enabled,
	// neither worked live.
	var listed struct{ Agents []model.AgentInfo }
	cliJSON(t, home, &listed, "agents")
	want := map[string]string{"claude": claudeBin, "codex": codexBin}
	for _, a := range listed.Agents {
		bin, ok := want[a.Name]
		if !ok {
			continue
		}
		delete(want, a.Name)
		if !a.Configured || a.ConfiguredReason != bin || !a.Enabled || a.WorkedLive {
			t.Errorf("relay agents: %s: configured=%v (%s) enabled=%v worked_live=%v", a.Name, a.Configured, a.ConfiguredReason, a.Enabled, a.WorkedLive)
		}
	}
	if len(want) != 0 {
		t.Fatalf("relay agents lacks %v", want)
	}

	// 4. The probes fail where a login is needed, and say so.
	//
	// codex: initialize succeeds; session/new answers ACP auth_required
	// (-32000) because no login and no OPENAI_API_KEY/CODEX_API_KEY.
	// claude: initialize and session/new succeed (it offers the plan mode,
	// which the relay selects); the prompt runs the bundled Claude Code,
	// which has no login, and the adapter answers session/prompt with
	// auth_required ("Please run /login" from the CLI). The truth is
	// that the prompt cannot reach a model, and the adapter reports it as
	// auth_required, so the probe says "auth required: at prompt".
	for _, p := range []struct{ agent, reason, login, log string }{
		{"codex", "auth required: at session/new", "`codex login`", ""},
		{"claude", "auth required: at prompt", "`claude /login`", "hardening profile claude-agent-acp"},
	} {
		began := time.Now()
		stdout, stderr, code := cli(t, home, "agents", "probe", p.agent, "--json", "--timeout", "60s")
		took := time.Since(began)
		var a model.AgentInfo
		if err := json.Unmarshal([]byte(stdout), &a); err != nil {
			t.Fatalf("probe %s: stdout is not the agent entry: %v\n%s\n%s", p.agent, err, stdout, stderr)
		}
		t.Logf("probe %s: exit %d in %s: %s", p.agent, code, took.Round(time.Millisecond), a.WorkedLiveReason)
		if code == 0 || a.WorkedLive || a.WorkedLiveAt == nil {
			t.Errorf("probe %s: exit %d worked_live=%v at=%v; want a recorded failure", p.agent, code, a.WorkedLive, a.WorkedLiveAt)
		}
		if !strings.HasPrefix(a.WorkedLiveReason, p.reason) || !strings.Contains(a.WorkedLiveReason, p.login) {
			t.Errorf("probe %s: reason %q, want it to start with %q and name %s", p.agent, a.WorkedLiveReason, p.reason, p.login)
		}
		if !strings.Contains(stderr, "probe of "+p.agent+" failed") || !strings.Contains(stderr, "docs/agents.md") {
			t.Errorf("probe %s: stderr does not explain the failure:\n%s", p.agent, stderr)
		}
		logPath := filepath.Join(home, "logs", "probes", p.agent+".log")
		lg, err := os.ReadFile(logPath)
		if err != nil {
			t.Errorf("probe %s: no probe log: %v", p.agent, err)
		} else if p.log != "" && !strings.Contains(string(lg), p.log) {
			t.Errorf("probe %s: log lacks %q:\n%s", p.agent, p.log, lg)
		}
		watch.requireGone(t, "after the "+p.agent+" probe", 10*time.Second)
	}

	// 5. Delegation: claude's facade submits a read-only task to codex and
	// codex's facade one to claude. Both end failed/agent_auth_required,
	// well within task_timeout, and each submitter hears of it.
	cwd := t.TempDir()
	facades := map[string]*client.Client{}
	for _, a := range []string{"claude", "codex"} {
		facades[a] = startFacade(t, home, a, "--no-autostart")
	}
	type run struct {
		from, to, id string
		began        time.Time
		wantPath     []model.State // the states the task passes through
	}
	runs := []*run{
		{from: "claude", to: "codex", wantPath: []model.State{model.StateSubmitted, model.StateAuthorized, model.StateFailed}},
		{from: "codex", to: "claude", wantPath: []model.State{model.StateSubmitted, model.StateAuthorized, model.StateWorking, model.StateFailed}},
	}
	for _, r := range runs {
		r.began = time.Now()
		r.id = mustOK(t, facades[r.from], "submit_task", map[string]any{
			"target": r.to, "prompt": "List the files in the working directory. Do not change anything.",
			"mission_id": "M-real-1", "lease_id": "S-real-1", "mode": "read_only", "cwd": cwd,
		}).str("task_id")
	}
	for _, r := range runs {
		eventually(t, "task "+r.id+" terminal", taskTimeout+30*time.Second, func() bool {
			got := mustOK(t, facades[r.from], "get_task", map[string]any{"task_id": r.id})
			return model.State(got.str("state")).Terminal()
		})
		took := time.Since(r.began)
		var show model.TaskDetail
		cliJSON(t, home, &show, "tasks", "show", r.id)
		path := []model.State{model.StateSubmitted}
		for _, ev := range show.Events {
			path = append(path, ev.To)
		}
		t.Logf("task %s → %s: %s/%s in %s, path %v: %s", r.from, r.to, show.State, show.Code, took.Round(time.Millisecond), path, show.Message)
		if show.State != model.StateFailed || show.Code != model.CodeAgentAuthRequired {
			t.Errorf("task to %s: %s/%s (%s), want failed/agent_auth_required", r.to, show.State, show.Code, show.Message)
		}
		if took >= taskTimeout {
			t.Errorf("task to %s took %s, not within task_timeout %s", r.to, took, taskTimeout)
		}
		if fmt.Sprint(path) != fmt.Sprint(r.wantPath) {
			t.Errorf("task to %s: path %v, want %v", r.to, path, r.wantPath)
		}
		if !strings.Contains(show.Message, "log in") || !strings.Contains(show.Message, "never authenticates") {
			t.Errorf("task to %s: message %q does not tell the user to log in", r.to, show.Message)
		}
		inbox := mustOK(t, facades[r.from], "check_inbox", map[string]any{})
		if !strings.Contains(inbox.text, r.id) || !strings.Contains(inbox.text, "agent_auth_required") {
			t.Errorf("%s's inbox does not report task %s: %s", r.from, r.id, inbox.text)
		}
	}

	// 6. No adapter process is left: neither after the runs nor after the
	// daemon stops. Codex's launcher (node) spawns the native codex-acp and
	// does not forward SIGTERM to it; the relay's group kill must take both.
	watch.requireGone(t, "after the tasks", 10*time.Second)
	d.stop(t, syscall.SIGTERM)
	watch.requireGone(t, "after the daemon stopped", 5*time.Second)
	seen := watch.seenLines()
	for _, w := range []struct{ what, marker string }{
		{"claude-agent-acp (node)", "node_modules/@zed-industries/claude-agent-acp/dist/index.js"},
		{"codex-acp launcher (node)", "node_modules/@zed-industries/codex-acp/bin/codex-acp.js"},
		{"codex-acp native binary (the launcher's child)", "node_modules/@zed-industries/codex-acp-"}, // its platform package
	} {
		found := false
		for _, l := range seen {
			if strings.Contains(l, w.marker) {
				found = true
			}
		}
		if !found {
			t.Errorf("never saw the %s running (looked for %q); seen:\n%s", w.what, w.marker, strings.Join(seen, "\n"))
		}
	}
	t.Logf("adapter processes seen during the test, all gone:\n%s", strings.Join(seen, "\n"))
	if _, errOut, code := cli(t, home, "audit", "verify"); code != 0 {
		t.Errorf("audit verify: exit %d\n%s", code, errOut)
	}
}

// launchDaemonArgv is launchDaemonEnv with a whole argv (a wrapper such as
// unshare in front of the relay) and a whole environment.
func launchDaemonArgv(t *testing.T, home string, argv, env []string) *daemonProc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	return runDaemonCmd(t, home, cmd)
}

// procWatch samples /proc for processes whose command line contains a
// marker, remembering every one it saw.
type procWatch struct {
	marker string
	quit   chan struct{}
	done   chan struct{}

	mu   sync.Mutex
	seen map[string]bool // "pid N: command line" (a pid that execs shows twice)
}

func watchProcesses(marker string) *procWatch {
	w := &procWatch{marker: marker, quit: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			for pid, cmdline := range w.scan() {
				w.mu.Lock()
				w.seen[fmt.Sprintf("pid %d: %s", pid, cmdline)] = true
				w.mu.Unlock()
			}
			select {
			case <-w.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// scan returns the live (non-zombie) processes whose command line contains
// the marker.
func (w *procWatch) scan() map[int]string {
	found := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), w.marker) {
			continue
		}
		if alive(pid) {
			found[pid] = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// requireGone fails unless every adapter process is gone within d.
func (w *procWatch) requireGone(t *testing.T, when string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := w.scan()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var ls []string
			for pid, c := range left {
				ls = append(ls, fmt.Sprintf("pid %d: %s", pid, c))
				_ = syscall.Kill(pid, syscall.SIGKILL) // do not leave them to the next test
			}
			sort.Strings(ls)
			t.Errorf("%s: %d adapter processes left behind:\n%s", when, len(left), strings.Join(ls, "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *procWatch) seenLines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ls []string
	for l := range w.seen {
		ls = append(ls, l)
	}
	sort.Strings(ls)
	return ls
}

func (w *procWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}
