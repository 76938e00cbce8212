package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
	_ "modernc.org/sqlite"
)

// agentStarts reads the fake agent's event log and returns the pids of its
// "start" events.
func agentStarts(t *testing.T, logPath string) []int {
	t.Helper()
	f, err := os.Open(logPath)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Event string `json:"event"`
			PID   int    `json:"pid"`
			Start uint64 `json:"start"`
			NS    string `json:"pidns"`
		}
		// The pid is the agent's sandbox's: the host's is found by the
		// namespace and start time (0 once the process is gone).
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "start" {
			pids = append(pids, dispatchtest.HostPIDOf(ev.PID, ev.Start, ev.NS))
		}
	}
	return pids
}

func TestE2EDispatchEvidence(t *testing.T) {
	t.Parallel()
	agentLog := filepath.Join(t.TempDir(), "agent.log")
	home := newHome(t, fullConfig(t, "allow-guarded", "[agents.offbot]\ncommand = [\"/bin/true\"]\nenabled = false\n"))
	launchDaemonEnv(t, home, []string{"FAKEAGENT_LOG=" + agentLog})
	codex := startFacade(t, home, "codex", "--no-autostart")
	cwd := t.TempDir()
	secret := fmt.Sprintf("THOUGHT-%d-%d", os.Getpid(), time.Now().UnixNano())

	submit := func(args map[string]any) string {
		args["cwd"] = cwd
		if _, ok := args["mission_id"]; !ok {
			args["mission_id"], args["lease_id"] = "M-7", "S-7"
		}
		return mustOK(t, codex, "submit_task", args).str("task_id")
	}
	rejected := submit(map[string]any{"target": "claude", "prompt": "echo no lease", "mission_id": "M-7"})
	blocked := submit(map[string]any{"target": "offbot", "prompt": "echo disabled"})
	echo := submit(map[string]any{"target": "claude", "prompt": "echo hi"})
	thought := submit(map[string]any{"target": "claude", "prompt": "thought " + secret})
	perm := submit(map[string]any{"target": "claude", "prompt": "perm-allow-reject"})
	permNone := submit(map[string]any{"target": "claude", "prompt": "perm-allow-only"})

	final := map[string]toolResult{}
	for _, id := range []string{rejected, blocked, echo, thought, perm, permNone} {
		eventually(t, "task "+id+" terminal", 60*time.Second, func() bool {
			final[id] = mustOK(t, codex, "get_task", map[string]any{"task_id": id})
			return model.State(final[id].str("state")).Terminal()
		})
	}
	want := map[string][2]string{
		rejected: {"rejected", "missing_lease_id"}, blocked: {"blocked", "agent_disabled"},
		echo: {"completed", ""}, thought: {"completed", ""}, perm: {"completed", ""}, permNone: {"completed", ""},
	}
	for id, w := range want {
		if final[id].str("state") != w[0] || final[id].str("code") != w[1] {
			t.Errorf("task %s: %s/%s, want %s/%s", id, final[id].str("state"), final[id].str("code"), w[0], w[1])
		}
	}
	if r := final[perm]; r.data["denied_permissions"] != float64(1) || !strings.Contains(r.str("result"), "selected:") {
		t.Errorf("perm-allow-reject: %+v", r.data)
	}
	if r := final[permNone]; r.data["denied_permissions"] != float64(1) || !strings.Contains(r.str("result"), "cancelled") {
		t.Errorf("perm-allow-only: %+v", r.data)
	}
	// Exactly one agent process per authorized task, none for the others.
	if starts := agentStarts(t, agentLog); len(starts) != 4 {
		t.Errorf("%d agent processes started, want 4 (one per authorized task)", len(starts))
	}
	for _, pid := range agentStarts(t, agentLog) {
		if alive(pid) {
			t.Errorf("agent pid %d outlived its task", pid)
		}
	}
	// Thoughts are never kept: the secret is nowhere in the home.
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The prompt carries the secret; the agent's thought is "thinking
		// about <secret>", which must appear nowhere.
		if strings.Contains(string(b), "thinking about "+secret) {
			t.Errorf("thought chunk stored in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each denial is audited with the tool call's title.
	var show model.TaskDetail
	cliJSON(t, home, &show, "tasks", "show", perm)
	if show.DeniedPermissions != 1 {
		t.Errorf("tasks show: denied_permissions %d", show.DeniedPermissions)
	}
	if n := countAudit(t, home, "permission.denied", perm); n != 1 {
		t.Errorf("%d permission.denied audit rows for %s, want 1", n, perm)
	}
}

// countAudit counts audit rows of a kind for a task, reading the database
// directly (as an auditor would).
func countAudit(t *testing.T, home, kind, taskID string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "relay.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM audit_log WHERE kind = ? AND task_id = ?`, kind, taskID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// kill -9 of the daemon while a task is working: after restart the task is
// failed/dispatch_interrupted, its agent (and the agent's own child) is
// gone, and it is never started again.
func TestE2EKill9WhileWorking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agentLog, pidFile := filepath.Join(dir, "agent.log"), filepath.Join(dir, "grandchild.pid")
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	env := []string{"FAKEAGENT_LOG=" + agentLog, "FAKEAGENT_PIDFILE=" + pidFile}
	d := launchDaemonEnv(t, home, env)
	codex := startFacade(t, home, "codex", "--no-autostart")
	id := mustOK(t, codex, "submit_task", map[string]any{"target": "claude", "prompt": "grandchild",
		"mission_id": "M-1", "lease_id": "S-1", "cwd": dir}).str("task_id")
	var grandchild int
	eventually(t, "grandchild started", 60*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		grandchild = dispatchtest.HostPID(string(b))
		return grandchild > 0
	})
	starts := agentStarts(t, agentLog)
	if len(starts) != 1 {
		t.Fatalf("%d agent starts", len(starts))
	}
	d.stop(t, syscall.SIGKILL)

	launchDaemonEnv(t, home, env)
	var show model.TaskDetail
	cliJSON(t, home, &show, "tasks", "show", id)
	if show.State != model.StateFailed || show.Code != model.CodeDispatchInterrupted {
		t.Fatalf("after kill -9: %s/%s, want failed/dispatch_interrupted", show.State, show.Code)
	}
	eventually(t, "agent and its child gone", 10*time.Second, func() bool { return !alive(starts[0]) && !alive(grandchild) })
	time.Sleep(300 * time.Millisecond) // give a wrong re-dispatch the chance to show
	if n := len(agentStarts(t, agentLog)); n != 1 {
		t.Fatalf("the interrupted task's agent was started %d times", n)
	}
	if _, errOut, code := cli(t, home, "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", errOut)
	}
}

func TestE2EProbe(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", "[agents.ghost]\ncommand = [\"/nonexistent/ghost-acp\"]\n"))
	launchDaemon(t, home)
	out, errOut, code := cli(t, home, "agents", "probe", "claude", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "claude") {
		t.Fatalf("probe claude: exit %d\n%s\n%s", code, out, errOut)
	}
	_, errOut, code = cli(t, home, "agents", "probe", "ghost")
	if code == 0 || !strings.Contains(errOut, "spawn") {
		t.Fatalf("probe ghost: exit %d\n%s", code, errOut)
	}
	// With --json, stdout is one JSON document: the agent's entry; the
	// probe's error, which came after it, is on stderr.
	out, errOut, code = cli(t, home, "agents", "probe", "ghost", "--json")
	dec := json.NewDecoder(strings.NewReader(out))
	var entry model.AgentInfo
	if err := dec.Decode(&entry); err != nil || entry.Name != "ghost" || dec.More() || code == 0 || !strings.Contains(errOut, "spawn") {
		t.Fatalf("probe ghost --json: exit %d, decode %v, entry %q, more %v\nstdout %s\nstderr %s", code, err, entry.Name, dec.More(), out, errOut)
	}
	// An unknown agent is the error alone, with a hint to run at a shell.
	_, errOut, code = cli(t, home, "agents", "probe", "nobody")
	if code != 3 || errOut != "relay: unknown_agent: no agent named \"nobody\"\nhint: run `relay agents` to see the known agents\n" {
		t.Fatalf("probe nobody: exit %d\n%s", code, errOut)
	}
	var got struct{ Agents []model.AgentInfo }
	cliJSON(t, home, &got, "agents")
	for _, a := range got.Agents {
		switch a.Name {
		case "claude":
			if !a.WorkedLive || a.WorkedLiveAt == nil || !a.Configured || !a.Enabled {
				t.Errorf("claude after a good probe: %+v", a)
			}
		case "ghost":
			if a.WorkedLive || a.Configured || !strings.Contains(a.WorkedLiveReason, "spawn") {
				t.Errorf("ghost after a failed probe: %+v", a)
			}
		case "codex":
			if a.WorkedLive || a.WorkedLiveAt != nil {
				t.Errorf("codex was never probed: %+v", a)
			}
		}
	}
}

func TestE2EAuditVerifyNamesTheTamperedRow(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	d := launchDaemon(t, home)
	c := startFacade(t, home, "claude", "--no-autostart")
	for i := 0; i < 5; i++ {
		mustOK(t, c, "send_message", map[string]any{"to": "codex", "body": fmt.Sprint("m", i)})
	}
	d.stop(t, syscall.SIGTERM)
	if out, errOut, code := cli(t, home, "audit", "verify"); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("clean chain: exit %d %s %s", code, out, errOut)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := db.QueryRowContext(context.Background(), `SELECT seq FROM audit_log WHERE kind = 'message.stored' ORDER BY seq LIMIT 1 OFFSET 2`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	// The schema refuses updates; someone with the file drops the trigger.
	if _, err := db.Exec(`UPDATE audit_log SET actor = 'gemini' WHERE seq = ?`, seq); err == nil {
		t.Fatal("the audit log accepted an UPDATE")
	}
	if _, err := db.Exec(`DROP TRIGGER audit_log_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit_log SET actor = 'gemini' WHERE seq = ?`, seq); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, errOut, code := cli(t, home, "audit", "verify")
	if code != 6 || !strings.Contains(errOut, fmt.Sprintf("row %d", seq)) {
		t.Fatalf("tampered row %d: exit %d\n%s", seq, code, errOut)
	}
	var rep model.AuditReport
	out, _, _ := cli(t, home, "audit", "verify", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.OK || rep.BadSeq != seq {
		t.Fatalf("--json report %+v (%v)", rep, err)
	}
}

func TestE2EBadConfigIsRefusedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ config, key string }{
		{"[limits]\nmax_dispatch = \"four\"\n", "limits.max_dispatch"},
		{"[limits]\nmax_dispatc = 3\n", "limits.max_dispatc"},
		{"[authority]\ncommand = []\n", "authority.command"},
		{"[storage]\nsynchronous = \"OFF\"\n", "storage.synchronous"},
		// A launcher that fetches the adapter at every start: refused,
		// naming the install command (the message is checked below).
		{"[agents.gemini]\ncommand = [\"npx\", \"@google/gemini-cli\", \"--acp\"]\n", "agents.gemini.command"},
	} {
		home := newHome(t, c.config)
		_, errOut, code := cli(t, home, "daemon")
		if code != 2 || !strings.Contains(errOut, c.key) || !strings.Contains(errOut, "invalid_config") || !strings.Contains(errOut, "hint:") {
			t.Errorf("%q: exit %d\n%s", c.config, code, errOut)
		}
		if strings.Contains(c.config, "npx") && !strings.Contains(errOut, "`npm install -g @google/gemini-cli`") {
			t.Errorf("%q: the refusal does not name the install command:\n%s", c.config, errOut)
		}
		if _, err := os.Stat(filepath.Join(home, "relay.db")); !os.IsNotExist(err) {
			t.Errorf("%q: a database was created despite the bad config", c.config)
		}
		if _, errOut, code := cli(t, home, "mcp", "--as", "claude"); code == 0 || !strings.Contains(errOut, c.key) {
			t.Errorf("mcp with %q: exit %d\n%s", c.config, code, errOut)
		}
	}
}

// An agent's descendant that leaves the agent's session and process group
// (setsid) and drops HAI_RELAY_RUN is killed when the daemon stops
// (SIGTERM) and when it is killed (kill -9): the agent shim, its
// subreaper, kills it on the parent-death signal. The daemon runs its own
// __agent-shim (ownShim).
func TestE2EEscapedDescendantDiesWithTheDaemon(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			agentLog, pidFile := filepath.Join(dir, "agent.log"), filepath.Join(dir, "escaped.pid")
			home := newHome(t, fullConfig(t, "allow-guarded", ""))
			env := []string{"FAKEAGENT_LOG=" + agentLog, "FAKEAGENT_PIDFILE=" + pidFile, ownShim}
			d := launchDaemonEnv(t, home, env)
			codex := startFacade(t, home, "codex", "--no-autostart")
			mustOK(t, codex, "submit_task", map[string]any{"target": "claude", "prompt": "escape-hang",
				"mission_id": "M-1", "lease_id": "S-1", "cwd": dir})
			var escaped int
			eventually(t, "escaped descendant started", 60*time.Second, func() bool {
				b, err := os.ReadFile(pidFile)
				if err != nil {
					return false
				}
				escaped = dispatchtest.HostPID(string(b))
				return escaped > 0
			})
			t.Cleanup(func() {
				if alive(escaped) {
					_ = syscall.Kill(escaped, syscall.SIGKILL)
				}
			})
			if sid, err := unix.Getsid(escaped); err != nil || sid != escaped {
				t.Fatalf("the descendant did not leave the agent's session: sid %d, %v", sid, err)
			}
			starts := agentStarts(t, agentLog)
			d.stop(t, sig)
			eventually(t, "agent and its escaped descendant gone", 10*time.Second, func() bool {
				return !alive(starts[0]) && !alive(escaped)
			})
		})
	}
}

// limits.probe_timeout bounds a probe that names no timeout, from the CLI
// and over the socket API alike (it was parsed and never used: such a
// probe waited the built-in 60 s).
func TestE2EProbeTimeoutFromConfig(t *testing.T) {
	t.Parallel()
	cfg := fmt.Sprintf("[agents.hangs]\ncommand = [%q, \"hang\"]\n\n[limits]\nprobe_timeout = \"2s\"\n", dispatchtest.BuildFakeAgent(t))
	home := newHome(t, cfg)
	launchDaemon(t, home)
	_, errOut, code := cli(t, home, "agents", "probe", "hangs")
	if code == 0 || !strings.Contains(errOut, "no end_turn within 2s") {
		t.Fatalf("relay agents probe hangs: exit %d, want the configured 2s timeout\n%s", code, errOut)
	}
	r := apiDo(t, apiClient(home), "POST", "/v1/operator/agents/hangs/probe", "", nil)
	if !strings.Contains(string(r.body), "no end_turn within 2s") {
		t.Fatalf("probe over the socket API without ?timeout: %d %s", r.status, r.body)
	}
}
