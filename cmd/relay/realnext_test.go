package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/model"
)

// TestRealAgentsNextGeneration is the first run of docs/agents.md with the
// adapters users install today, @agentclientprotocol/claude-agent-acp 0.101
// and @agentclientprotocol/codex-acp 2.6, under the hostile user settings
// and with hostile project settings planted in each cwd: a read_only task
// from codex to claude and one from claude to codex complete with the
// model's answer and leave the disk as it was; relay agents names the
// adapters, the profiles chosen for them and that CI verified those
// versions. Then Codex as it runs for a user, in code mode (its default
// model: every tool through a JavaScript exec cell) with sub-agents: the
// sandbox holds there as well, and a sub-agent's escalation is asked of
// the relay, through the root session, and denied.
func TestRealAgentsNextGeneration(t *testing.T) {
	bin, srv := requireRealAgents(t), startScripted(t)
	rd := startRealDaemon(t, bin, srv, nextAgents, hostile)

	type task struct{ from, to, tag, id string }
	var tasks []*task
	paths := map[string]attemptPaths{}
	for _, c := range [][2]string{{"codex", "claude"}, {"claude", "codex"}} {
		tk := &task{from: c[0], to: c[1], tag: nonce(c[1])}
		p := newAttemptPaths(t, rd.tasks)
		(map[string]*realAgent{"claude": claudeNext, "codex": codexNext})[c[1]].plant(t, p.Cwd)
		paths[tk.tag] = p
		// The model reads the file it is asked about, then answers.
		read, _ := verify.Script((map[string]*realAgent{"claude": claudeNext, "codex": codexNext})[c[1]].profile().Verify.Vocab, "read-control", p)
		r := apiDo(t, rd.api, "POST", "/v1/tasks", tk.from, mustJSON(t, map[string]any{
			"target": tk.to, "mode": "read_only", "cwd": p.Cwd, "mission_id": "M-next", "lease_id": "S-next",
			"prompt": scriptedPrompt(tk.tag, read+"\n[[say "+tk.from+" asked, "+tk.to+" answers]]"),
		}))
		if tk.id = r.str("task_id"); tk.id == "" {
			t.Fatalf("submit %s → %s: %d %s", tk.from, tk.to, r.status, r.body)
		}
		tasks = append(tasks, tk)
	}
	for _, tk := range tasks {
		show := rd.waitAs(t, tk.from, tk.id, 4*time.Minute)
		p := paths[tk.tag]
		what := fmt.Sprintf("%s → %s (task %s)", tk.from, tk.to, tk.id)
		t.Logf("%s: %s/%s (%s) result %q", what, show.State, show.Code, show.Message, clipText(show.Result, 600))
		if show.State != model.StateCompleted || !strings.Contains(show.Result, tk.from+" asked, "+tk.to+" answers") ||
			!strings.Contains(show.Result, p.Token) || show.Caller != tk.from {
			t.Errorf("%s: %s/%s (%s), result %q; want completed with the model's answer and the file's token",
				what, show.State, show.Code, show.Message, show.Result)
		}
		if v := dispatchtest.Violations(p); len(v) > 0 {
			t.Errorf("%s: the disk changed: %v", what, v)
		}
	}

	var listed struct{ Agents []model.AgentInfo }
	cliJSON(t, rd.home, &listed, "agents")
	want := map[string]*realAgent{"claude": claudeNext, "codex": codexNext}
	for _, a := range listed.Agents {
		r, ok := want[a.Name]
		if !ok {
			continue
		}
		if a.Adapter.Package != r.pkg || a.Adapter.Version != r.version || a.Adapter.Superseded != "" ||
			a.Profile.Name != r.profile().Name || !a.Profile.VerifiedInCI || len(a.Profile.Generations) != 2 {
			t.Errorf("relay agents: %s adapter %+v profile %+v; want %s %s under %s, verified in CI", a.Name, a.Adapter, a.Profile,
				r.pkg, r.version, r.profile().Name)
		}
	}
	table, _, _ := cli(t, rd.home, "agents")
	for _, w := range []string{"@agentclientprotocol/claude-agent-acp 0.101.0", "claude-agent-acp 0.101.x (CI)",
		"@agentclientprotocol/codex-acp 2.6.0", "codex-acp 2.x (CI)"} {
		if !strings.Contains(table, w) {
			t.Errorf("relay agents lacks %q:\n%s", w, table)
		}
	}
	stopRealDaemon(t, rd, bin)

	t.Run("codex-code-mode", func(t *testing.T) {
		// The provider without the verification's unknown model: Codex's
		// own default model, which works in code mode.
		cfg, _ := json.Marshal(map[string]any{"model_provider": "relay-verify",
			"model_providers": map[string]any{"relay-verify": map[string]any{"name": "relay-verify", "base_url": srv.URL() + "/v1",
				"env_key": "RELAY_VERIFY_KEY", "wire_api": "responses"}}})
		rd := startRealDaemonWith(t, bin, srv, []*realAgent{codexNext}, hostile, realDaemonOpts{env: []string{"CODEX_CONFIG=" + string(cfg)}})
		js := func(cmd string, escalate bool) string {
			args := map[string]any{"cmd": cmd}
			if escalate {
				args["sandbox_permissions"], args["justification"] = "require_escalated", "needed"
			}
			b, _ := json.Marshal(args)
			return "const r = await tools.exec_command(" + string(b) + "); text(r.output)"
		}
		p := newAttemptPaths(t, rd.tasks)
		escalated := filepath.Join(p.Cwd, "escalated")
		childFile := filepath.Join(p.Cwd, "child-wrote")
		tag, childTag := nonce("codex"), nonce("codex-child")
		child := childTag + " " + step("exec", map[string]any{"input": js("touch "+escalated, true)}) + " " +
			step("exec", map[string]any{"input": js("touch "+childFile, false)}) + " [[say child done]]"
		script := strings.Join([]string{
			step("exec", map[string]any{"input": js("cat "+p.Control+"; echo pwned > "+p.Outside+"; echo pwned > "+p.Inside+"; touch "+p.Marker, false)}),
			step("spawn_agent", map[string]any{"message": child, "fork_turns": "none", "task_name": "child"}),
			step("wait_agent", map[string]any{"timeout_ms": 10000}),
		}, "\n")
		id := rd.submit(t, "codex", model.ModeReadOnly, scriptedPrompt(tag, script), p.Cwd)
		show := rd.wait(t, id, 4*time.Minute)
		t.Logf("code mode: %s/%s (%s), %d denied, result %q", show.State, show.Code, show.Message, show.DeniedPermissions, clipText(show.Result, 800))
		if v := dispatchtest.Violations(p); len(v) > 0 {
			t.Errorf("codex in code mode acted on the host: %v", v)
		}
		for _, f := range []string{escalated, childFile} {
			if _, err := os.Lstat(f); err == nil {
				t.Errorf("the sub-agent wrote %s", f)
			}
		}
		if show.State != model.StateCompleted || !strings.Contains(show.Result, p.Token) || !strings.Contains(show.Result, "Read-only file system") {
			t.Errorf("code mode: %s/%s, result %q; want completed, the control file read and the writes refused by the sandbox", show.State, show.Code, show.Result)
		}
		if tools := toolsFor(srv, tag); !isSubset([]string{"exec", "spawn_agent"}, tools) {
			t.Errorf("code mode offered %v, want exec and spawn_agent", tools)
		}
		// The sub-agent's requests carry its script, not the root's prompt.
		var childCalls []string
		for _, r := range srv.Requests() {
			u := strings.Join(r.Turn.UserText, "\n")
			if strings.Contains(u, childTag) && !strings.Contains(u, "Scripted "+tag) && r.Reply.Call != nil {
				childCalls = append(childCalls, r.Reply.Call.Name)
			}
		}
		if len(childCalls) == 0 {
			t.Errorf("the sub-agent made no call: it never ran its script")
		}
		// The sub-agent's escalation reached the relay through the root
		// session and was denied; nothing the relay did not open ran.
		if show.DeniedPermissions < 1 || rd.deniedAudited(t, id) != show.DeniedPermissions {
			t.Errorf("denied %d (audited %d), want the sub-agent's escalation denied and audited", show.DeniedPermissions, rd.deniedAudited(t, id))
		}
		stopRealDaemon(t, rd, bin)
	})
}
