package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// Interop: the relay against the official SDKs, not our own fakes. The
// Node project in interop/ (installed by scripts/test with `npm install`) holds
// an MCP client on @modelcontextprotocol/sdk that drives `relay mcp`, and an
// ACP agent on @agentclientprotocol/sdk 1.x (AgentSideConnection) that the
// relay dispatches. Under CI these tests run, never skip; locally they skip
// only when node is not on PATH.

// interopEnv is what the interop tests need: node and the installed
// interop/ project.
type interopEnv struct {
	node string // absolute path of node
	dir  string // absolute path of interop/
}

// inCI reports whether the tests run under CI (CI=true, as .ci/run is run).
func inCI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// requireInterop returns node and the interop/ project, skipping (locally,
// only when node is missing) or failing with a message that says what to
// do.
func requireInterop(t *testing.T) interopEnv {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if inCI() {
			t.Fatalf("CI=true: the interop tests need node (Node 20) on PATH and it is not there (%v); install it: apt-get install nodejs npm", err)
		}
		t.Skip("skipping the interop tests: node is not on PATH (install Node 20; under CI=true these tests fail instead of skipping)")
	}
	if node, err = filepath.Abs(node); err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatalf("interop/package.json: %v", err)
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatalf("interop/package.json: %v", err)
	}
	for _, dep := range []string{"@modelcontextprotocol/sdk", "@agentclientprotocol/sdk"} {
		want := pkg.Dependencies[dep]
		if want == "" {
			t.Fatalf("interop/package.json does not depend on %s", dep)
		}
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(dep), "package.json"))
		if err != nil {
			t.Fatalf("interop/node_modules is missing or incomplete (%s: %v): run ./scripts/test, which installs interop/, or `cd interop && npm install --no-save`", dep, err)
		}
		var got struct{ Version string }
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("interop/node_modules/%s/package.json: %v", dep, err)
		}
		if got.Version != want {
			t.Fatalf("interop/node_modules has %s %s, package.json pins %s: run `cd interop && npm install --no-save` (./scripts/test does when package-lock.json is newer)", dep, got.Version, want)
		}
	}
	if v := pkg.Dependencies["@agentclientprotocol/sdk"]; !strings.HasPrefix(v, "1.") {
		t.Fatalf("interop pins @agentclientprotocol/sdk %s; the agent needs the 1.x line (AgentSideConnection; 2.x removed it)", v)
	}
	return interopEnv{node: node, dir: dir}
}

// TestInteropMCPClient drives the facade with the official MCP TypeScript
// SDK (interop/mcp-client.mjs) and asserts its report.
func TestInteropMCPClient(t *testing.T) {
	t.Parallel()
	env := requireInterop(t)
	home := newHome(t, fullConfig(t, "allow-guarded", "[limits]\ntask_timeout = \"60s\"\n"))
	launchDaemon(t, home)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.node, filepath.Join(env.dir, "mcp-client.mjs"),
		"--relay", relayBin, "--home", home, "--as", "claude", "--peer", "codex", "--target", "codex", "--cwd", t.TempDir())
	cmd.Dir = env.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	var report struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("mcp-client.mjs: no JSON report (%v; run: %v)\nstdout:\n%s\nstderr:\n%s", err, runErr, stdout.String(), stderr.String())
	}
	seen := map[string]bool{}
	failed := 0
	for _, c := range report.Checks {
		seen[c.Name] = true
		if !c.OK {
			failed++
			t.Errorf("MCP SDK check failed: %s: %s", c.Name, c.Detail)
		}
	}
	if (runErr == nil) != (report.OK && failed == 0) {
		t.Errorf("mcp-client.mjs exit (%v) disagrees with its report (ok=%v, %d failed)\nstderr:\n%s", runErr, report.OK, failed, stderr.String())
	}
	// The report must hold every check that matters, so a client that
	// stopped early cannot pass.
	want := []string{"initialize", "tools/list: exactly the eight tools"}
	for _, tool := range []string{"send_message", "check_inbox", "ack_messages", "submit_task", "get_task", "cancel_task", "list_tasks", "list_agents"} {
		want = append(want,
			"tools/list "+tool+": argument names",
			"tools/list "+tool+": required arguments",
			"tools/list "+tool+": additionalProperties false",
			tool+": valid",
			tool+": invalid (unknown)",
		)
	}
	for _, tool := range []string{"send_message", "check_inbox", "ack_messages", "submit_task", "get_task", "cancel_task", "list_tasks"} {
		want = append(want, tool+": invalid (wrongType)")
	}
	for _, tool := range []string{"send_message", "ack_messages", "submit_task", "get_task", "cancel_task"} {
		want = append(want, tool+": invalid (missing)")
	}
	want = append(want, "cancel_task: canceled by submitter", "send_message: sender fixed at launch", "get_task: wire fields")
	for _, n := range want {
		if !seen[n] {
			t.Errorf("the MCP SDK report lacks the check %q", n)
		}
	}
	if t.Failed() {
		t.Logf("mcp-client.mjs stderr:\n%s", stderr.String())
	}
	t.Logf("official MCP SDK client: %d checks, %d failed", len(report.Checks), failed)
	if _, errOut, code := cli(t, home, "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", errOut)
	}
}

// acpRecord is one line of interop/acp-agent.mjs's log.
type acpRecord struct {
	PID   int             `json:"pid"`
	Proc  string          `json:"proc"` // the process, as it names itself (its pid is its sandbox's)
	Seq   int             `json:"seq"`
	Dir   string          `json:"dir"` // recv, sent, note
	Raw   string          `json:"raw"`
	Event string          `json:"event"`
	All   json.RawMessage `json:"-"`
	rpc   rpcMessage      // Raw, parsed (recv and sent)
}

// rpcMessage is a JSON-RPC message as it came over the wire.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (m rpcMessage) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// acpProcess is what one agent process recorded.
type acpProcess struct {
	pid      int
	scenario string
	recs     []acpRecord
}

// sent returns the requests the agent sent with method.
func (p *acpProcess) sent(method string) []acpRecord {
	var out []acpRecord
	for _, r := range p.recs {
		if r.Dir == "sent" && r.rpc.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// recv returns what the agent received with method ("" = responses).
func (p *acpProcess) recv(method string) []acpRecord {
	var out []acpRecord
	for _, r := range p.recs {
		if r.Dir == "recv" && r.rpc.Method == method && (method != "" || r.rpc.isResponse()) {
			out = append(out, r)
		}
	}
	return out
}

// answer returns the client's response to the agent's request req.
func (p *acpProcess) answer(req acpRecord) (acpRecord, bool) {
	for _, r := range p.recv("") {
		if bytes.Equal(compactJSON(r.rpc.ID), compactJSON(req.rpc.ID)) {
			return r, true
		}
	}
	return acpRecord{}, false
}

func (p *acpProcess) note(event string) (acpRecord, bool) {
	for _, r := range p.recs {
		if r.Dir == "note" && r.Event == event {
			return r, true
		}
	}
	return acpRecord{}, false
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}

// readACPLog reads the agent log, grouped by process, keyed by the
// scenario (the first word of the process's prompt).
func readACPLog(t *testing.T, path string) map[string]*acpProcess {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the ACP agent log: %v (did the relay start interop/acp-agent.mjs?)", err)
	}
	// A line still being appended has no newline yet: leave it for the
	// next read.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	byPID := map[string]*acpProcess{}
	var order []string
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r acpRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("ACP agent log line %q: %v", line, err)
		}
		r.All = append(json.RawMessage(nil), line...)
		if r.Dir == "recv" || r.Dir == "sent" {
			if err := json.Unmarshal([]byte(r.Raw), &r.rpc); err != nil {
				t.Fatalf("ACP agent log: %s line is not JSON-RPC: %q: %v", r.Dir, r.Raw, err)
			}
		}
		key := r.Proc + "/" + strconv.Itoa(r.PID)
		p := byPID[key]
		if p == nil {
			p = &acpProcess{pid: r.PID}
			byPID[key] = p
			order = append(order, key)
		}
		p.recs = append(p.recs, r)
		if r.Dir == "note" && r.Event == "prompt" {
			var pr struct{ Scenario string }
			_ = json.Unmarshal(line, &pr)
			p.scenario = pr.Scenario
		}
	}
	out := map[string]*acpProcess{}
	for _, pid := range order {
		p := byPID[pid]
		if p.scenario == "" {
			continue
		}
		if _, dup := out[p.scenario]; dup {
			t.Fatalf("ACP agent log: two processes ran scenario %q (a task dispatched twice?)", p.scenario)
		}
		out[p.scenario] = p
	}
	return out
}

// TestInteropACPAgent dispatches tasks to an agent built on the official
// ACP TypeScript SDK (interop/acp-agent.mjs) and asserts, from the raw
// JSON-RPC the agent received, what the relay answered on the wire.
func TestInteropACPAgent(t *testing.T) {
	t.Parallel()
	env := requireInterop(t)
	auth := gatestest.BuildFakeAuthority(t)
	logPath := filepath.Join(t.TempDir(), "acp-agent.jsonl")
	// A custom agent: the SDK's example agent is no adapter a hardening
	// profile was verified on (a claude entry would hold it to claude's).
	config := fmt.Sprintf("[authority]\ncommand = [%q, %q]\ntimeout = \"5s\"\n\n"+
		"[agents.acpsdk]\ncommand = [%q, %q]\n\n"+
		"[limits]\ntask_timeout = \"60s\"\nmax_dispatch = 8\n",
		auth, "allow-guarded", env.node, filepath.Join(env.dir, "acp-agent.mjs"))
	home := newHome(t, config)
	launchDaemonEnv(t, home, []string{"INTEROP_ACP_LOG=" + logPath})
	codex := startFacade(t, home, "codex", "--no-autostart")
	cwd := t.TempDir()

	type want struct {
		result string // a substring of the task's result
		denied int
	}
	scenarios := map[string]want{
		"perm-reject-offered": {"perm-reject-offered: selected:opt-reject-once-2", 1},
		"perm-no-reject":      {"perm-no-reject: cancelled", 1},
		"perm-always":         {"perm-always: cancelled", 1},
		"perm-none":           {"perm-none: cancelled", 1},
		"fs":                  {"fs: fs/read_text_file: error", 0},
		"terminal":            {"terminal: terminal/create: error", 0},
		"echo":                {"echo interop through the official ACP SDK", 0},
	}
	ids := map[string]string{}
	submit := func(scenario string) string {
		prompt := scenario + " interop through the official ACP SDK"
		r := mustOK(t, codex, "submit_task", map[string]any{"target": "acpsdk", "prompt": prompt,
			"mission_id": "M-interop", "lease_id": "S-interop", "cwd": cwd})
		if r.str("task_id") == "" {
			t.Fatalf("submit %s: %+v", scenario, r.data)
		}
		return r.str("task_id")
	}
	for s := range scenarios {
		ids[s] = submit(s)
	}
	hangID := submit("hang")

	// The hang task: working, then canceled by its submitter.
	eventually(t, "hang task working", 60*time.Second, func() bool {
		st := mustOK(t, codex, "get_task", map[string]any{"task_id": hangID}).str("state")
		if model.State(st).Terminal() {
			t.Fatalf("hang task ended %s before it was canceled", st)
		}
		return st == "working"
	})
	// Working means session/prompt was sent; wait until the agent has the
	// prompt, so the cancel meets a running turn.
	eventually(t, "the agent received the hang prompt", 30*time.Second, func() bool {
		_, ok := readACPLog(t, logPath)["hang"]
		return ok
	})
	c := mustOK(t, codex, "cancel_task", map[string]any{"task_id": hangID})
	if c.str("state") != "canceled" || c.str("code") != "canceled_by_submitter" {
		t.Fatalf("cancel_task: %+v", c.data)
	}

	// Every other task ends completed, with the denials counted.
	finals := map[string]toolResult{}
	for s, id := range ids {
		eventually(t, s+" task ends", 60*time.Second, func() bool {
			finals[s] = mustOK(t, codex, "get_task", map[string]any{"task_id": id})
			return model.State(finals[s].str("state")).Terminal()
		})
	}
	for s, w := range scenarios {
		f := finals[s]
		if f.str("state") != "completed" || f.str("stop_reason") != "end_turn" {
			t.Errorf("%s: state %q stop_reason %q code %q (%s), want completed/end_turn", s, f.str("state"), f.str("stop_reason"), f.str("code"), f.str("message"))
		}
		if !strings.Contains(f.str("result"), w.result) {
			t.Errorf("%s: result %q, want it to contain %q", s, f.str("result"), w.result)
		}
		if got := f.data["denied_permissions"]; got != float64(w.denied) {
			t.Errorf("%s: denied_permissions %v, want %d", s, got, w.denied)
		}
	}
	hang := mustOK(t, codex, "get_task", map[string]any{"task_id": hangID})
	if hang.str("state") != "canceled" || hang.str("code") != "canceled_by_submitter" {
		t.Errorf("hang: final %+v", hang.data)
	}
	if hang.data["denied_permissions"] != float64(0) {
		t.Errorf("hang: denied_permissions %v, want 0", hang.data["denied_permissions"])
	}

	// The cancel reached the agent as a session/cancel notification, and
	// the agent's turn ended "cancelled".
	var procs map[string]*acpProcess
	eventually(t, "session/cancel recorded by the agent", 30*time.Second, func() bool {
		procs = readACPLog(t, logPath)
		p := procs["hang"]
		return p != nil && len(p.recv("session/cancel")) > 0
	})
	for s := range scenarios {
		if procs[s] == nil {
			t.Fatalf("no agent process recorded scenario %s; log:\n%s", s, dumpACPLog(logPath))
		}
	}

	// initialize: protocol version 1; clientCapabilities say no fs, no
	// terminal. On the wire a capability may be absent (the ACP schema
	// defaults it to false) or false, never true; the SDK's parsed view
	// must read false.
	for s, p := range procs {
		inits := p.recv("initialize")
		if len(inits) != 1 {
			t.Errorf("%s: %d initialize requests, want 1", s, len(inits))
			continue
		}
		var ip struct {
			ProtocolVersion    int            `json:"protocolVersion"`
			ClientCapabilities map[string]any `json:"clientCapabilities"`
		}
		if err := json.Unmarshal(inits[0].rpc.Params, &ip); err != nil {
			t.Errorf("%s: initialize params: %v", s, err)
			continue
		}
		if ip.ProtocolVersion != 1 {
			t.Errorf("%s: initialize protocolVersion %d, want 1: %s", s, ip.ProtocolVersion, inits[0].Raw)
		}
		caps := ip.ClientCapabilities
		fs, _ := caps["fs"].(map[string]any)
		for name, v := range map[string]any{"fs.readTextFile": fs["readTextFile"], "fs.writeTextFile": fs["writeTextFile"], "terminal": caps["terminal"]} {
			if v != nil && v != false {
				t.Errorf("%s: initialize advertises %s = %v on the wire: %s", s, name, v, inits[0].Raw)
			}
		}
		if _, ok := caps["fs"]; ok && fs == nil {
			t.Errorf("%s: clientCapabilities.fs is not an object: %s", s, inits[0].Raw)
		}
		if s == "echo" {
			t.Logf("initialize on the wire: %s", inits[0].Raw)
		}
		n, ok := p.note("initialize")
		if !ok {
			t.Errorf("%s: the agent's SDK never handled initialize", s)
			continue
		}
		var parsed struct {
			Params struct {
				ClientCapabilities struct {
					Fs struct {
						ReadTextFile  *bool `json:"readTextFile"`
						WriteTextFile *bool `json:"writeTextFile"`
					} `json:"fs"`
					Terminal *bool `json:"terminal"`
				} `json:"clientCapabilities"`
			} `json:"params"`
		}
		_ = json.Unmarshal(n.All, &parsed)
		cc := parsed.Params.ClientCapabilities
		for name, v := range map[string]*bool{"fs.readTextFile": cc.Fs.ReadTextFile, "fs.writeTextFile": cc.Fs.WriteTextFile, "terminal": cc.Terminal} {
			if v == nil || *v {
				t.Errorf("%s: the ACP SDK reads clientCapabilities %s as %v, want false: %s", s, name, v, n.All)
			}
		}
		// session/new carries the task's absolute cwd.
		if news := p.recv("session/new"); len(news) != 1 {
			t.Errorf("%s: %d session/new requests, want 1", s, len(news))
		} else {
			var np struct{ Cwd string }
			_ = json.Unmarshal(news[0].rpc.Params, &np)
			if np.Cwd != cwd {
				t.Errorf("%s: session/new cwd %q, want %q", s, np.Cwd, cwd)
			}
		}
	}

	// Permission answers, exactly as they came over the wire.
	for s := range scenarios {
		if !strings.HasPrefix(s, "perm-") {
			if reqs := procs[s].sent("session/request_permission"); len(reqs) != 0 {
				t.Errorf("%s: asked permission %d times", s, len(reqs))
			}
			continue
		}
		p := procs[s]
		reqs := p.sent("session/request_permission")
		if len(reqs) != 1 {
			t.Errorf("%s: %d permission requests recorded, want 1", s, len(reqs))
			continue
		}
		var rp struct {
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		}
		_ = json.Unmarshal(reqs[0].rpc.Params, &rp)
		rejectOnce := ""
		for _, o := range rp.Options {
			if o.Kind == "reject_once" {
				rejectOnce = o.OptionID
			}
		}
		wantOutcome := map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
		if rejectOnce != "" {
			wantOutcome = map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": rejectOnce}}
		}
		if (rejectOnce != "") != (s == "perm-reject-offered") {
			t.Fatalf("%s: the agent offered %+v; the scenario table is wrong", s, rp.Options)
		}
		ans, ok := p.answer(reqs[0])
		if !ok {
			t.Errorf("%s: no answer to the permission request %s on the wire", s, reqs[0].Raw)
			continue
		}
		if ans.rpc.Error != nil || len(ans.rpc.Result) == 0 {
			t.Errorf("%s: the permission answer is not a result: %s", s, ans.Raw)
			continue
		}
		var got any
		if err := json.Unmarshal(ans.rpc.Result, &got); err != nil {
			t.Errorf("%s: permission result: %v", s, err)
			continue
		}
		if !reflect.DeepEqual(got, wantOutcome) {
			wb, _ := json.Marshal(wantOutcome)
			t.Errorf("%s: the relay answered %s on the wire, want exactly %s (offered %+v)", s, ans.rpc.Result, wb, rp.Options)
		} else {
			t.Logf("%s: wire answer %s", s, compactJSON(ans.rpc.Result))
		}
	}

	// fs and terminal: each attempt got a JSON-RPC error, never a result.
	for s, methods := range map[string][]string{"fs": {"fs/read_text_file", "fs/write_text_file"}, "terminal": {"terminal/create"}} {
		p := procs[s]
		for _, m := range methods {
			reqs := p.sent(m)
			if len(reqs) != 1 {
				t.Errorf("%s: %d %s requests recorded, want 1", s, len(reqs), m)
				continue
			}
			ans, ok := p.answer(reqs[0])
			if !ok {
				t.Errorf("%s: no answer to %s on the wire", s, m)
				continue
			}
			if ans.rpc.Error == nil || ans.rpc.Error.Code == nil || len(ans.rpc.Result) != 0 {
				t.Errorf("%s: %s was answered %s, want a JSON-RPC error", s, m, ans.Raw)
				continue
			}
			t.Logf("%s: %s refused on the wire: %s", s, m, ans.Raw)
		}
	}

	// hang: the cancel notification names the session, and the turn ended
	// with stopReason cancelled.
	p := procs["hang"]
	var sessionID string
	if n, ok := p.note("session_new"); ok {
		var sn struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(n.All, &sn)
		sessionID = sn.SessionID
	}
	cancels := p.recv("session/cancel")
	var cp struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(cancels[0].rpc.Params, &cp)
	if len(cancels[0].rpc.ID) != 0 || sessionID == "" || cp.SessionID != sessionID {
		t.Errorf("hang: session/cancel %s, want a notification for session %q", cancels[0].Raw, sessionID)
	}
	prompts := p.recv("session/prompt")
	if len(prompts) != 1 {
		t.Fatalf("hang: %d session/prompt requests", len(prompts))
	}
	eventually(t, "the hang turn ends cancelled", 30*time.Second, func() bool {
		p = readACPLog(t, logPath)["hang"]
		for _, r := range p.recs {
			if r.Dir == "sent" && r.rpc.isResponse() && bytes.Equal(compactJSON(r.rpc.ID), compactJSON(prompts[0].rpc.ID)) {
				var res struct {
					StopReason string `json:"stopReason"`
				}
				_ = json.Unmarshal(r.rpc.Result, &res)
				if res.StopReason != "cancelled" {
					t.Fatalf("hang: the turn ended %s, want stopReason cancelled", r.Raw)
				}
				return true
			}
		}
		return false
	})

	if _, errOut, code := cli(t, home, "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", errOut)
	}
	if t.Failed() {
		t.Logf("ACP agent log:\n%s", dumpACPLog(logPath))
	}
}

// dumpACPLog returns the agent log for a failure message.
func dumpACPLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
