package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// Delegation chains with real processes: the daemon runs the fake agent
// (installed as each agent's current adapter, under its profile), which,
// as an agent whose own MCP client has the relay, starts `relay mcp` as
// its child and submits through it. The daemon finds from the facade's
// process that it acts inside the running task: the new task and the
// message it sent carry that parent, the task its chain. A loop, codex →
// gemini → codex, is rejected delegation_cycle before any codex agent
// starts; a chain past max_delegation_depth is rejected
// delegation_too_deep. The authority is asked about every task the relay
// does not refuse itself, with its chain, and never about the refused
// ones, whose refusal and chain are on record: relay tasks show prints
// the chain and relay tasks watch the path. The test's own facade,
// outside every task, is a top-level caller.
func TestE2EDelegationChains(t *testing.T) {
	t.Parallel()
	authLog := filepath.Join(t.TempDir(), "authority.jsonl")
	agentLog := filepath.Join(t.TempDir(), "agent.jsonl")
	home := newHome(t, fullConfig(t, "allow-guarded", "[limits]\nmax_delegation_depth = 2\n"))
	launchDaemonEnv(t, home, append([]string{"FAKEAUTHORITY_LOG=" + authLog, "FAKEAGENT_LOG=" + agentLog}, fastExit...))
	codex := startFacade(t, home, "codex", "--no-autostart")
	cwd := t.TempDir()
	// delegate AS TARGET: the fake agent's facade as AS submits to TARGET.
	delegate := func(as, target, then string) string {
		return fmt.Sprintf("delegate %s %s %s %s %s", relayBin, home, as, target, then)
	}
	top := func(target, prompt string) model.Task {
		id := mustOK(t, codex, "submit_task", map[string]any{"target": target, "prompt": prompt,
			"mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}).str("task_id")
		var end model.Task
		eventually(t, "task "+id+" ended", 90*time.Second, func() bool {
			cliJSON(t, home, &end, "tasks", "show", id)
			return end.State.Terminal()
		})
		return end
	}
	show := func(id string) model.TaskDetail {
		var d model.TaskDetail
		cliJSON(t, home, &d, "tasks", "show", id)
		return d
	}
	// The one task the test's facade did not submit, found by its caller.
	childOf := func(parent model.Task) model.TaskDetail {
		var list struct{ Tasks []model.Task }
		cliJSON(t, home, &list, "tasks", "list", "--agent", parent.Target)
		for _, c := range list.Tasks {
			if c.ParentTaskID == parent.ID {
				return show(c.ID)
			}
		}
		t.Fatalf("no task inside %s among %+v", parent.ID, list.Tasks)
		return model.TaskDetail{}
	}

	// codex → gemini → codex.
	t1 := top("gemini", delegate("gemini", "codex", "echo back to the start"))
	if t1.State != model.StateCompleted || t1.ParentTaskID != "" || len(t1.Chain) != 0 {
		t.Fatalf("the top-level task: %s %s %q, parent %q chain %v", t1.State, t1.Code, t1.Result, t1.ParentTaskID, t1.Chain)
	}
	loop := childOf(t1)
	if !strings.Contains(t1.Result, "delegated "+loop.ID+" rejected delegation_cycle") {
		t.Errorf("the gemini agent was answered %q, want its task %s rejected delegation_cycle", t1.Result, loop.ID)
	}
	if loop.State != model.StateRejected || loop.Code != model.CodeDelegationCycle || loop.Caller != "gemini" || loop.Target != "codex" {
		t.Fatalf("the loop: %s %s %s → %s", loop.State, loop.Code, loop.Caller, loop.Target)
	}
	if len(loop.Chain) != 1 || loop.Chain[0] != (model.Hop{TaskID: t1.ID, Caller: "codex", Target: "gemini"}) {
		t.Errorf("the loop's chain %+v, want [%s codex → gemini]", loop.Chain, t1.ID)
	}
	if last := loop.Verdicts[len(loop.Verdicts)-1]; last.Gate != model.GateDelegation || last.Detail["path"] != "codex → gemini → codex" {
		t.Errorf("the loop's last verdict %+v", last)
	}
	for _, ev := range loop.Events {
		if ev.To != model.StateRejected {
			t.Errorf("the loop moved to %s", ev.To)
		}
	}
	// No codex agent ever started: one agent process ran, gemini's.
	if starts := agentStarts(t, agentLog); len(starts) != 1 {
		t.Errorf("%d agent processes started, want 1 (gemini's)", len(starts))
	}
	if _, err := os.Stat(filepath.Join(home, "logs", "tasks", loop.ID+".log")); err == nil {
		t.Error("the loop has an agent log: something was started for it")
	}
	out, _, code := cli(t, home, "tasks", "show", loop.ID)
	if code != 0 || !strings.Contains(out, "chain     codex → gemini → codex (depth 2)") ||
		!strings.Contains(out, "parent    "+t1.ID) || !strings.Contains(out, "delegation_cycle") {
		t.Errorf("relay tasks show %s:\n%s", loop.ID, out)
	}
	t.Logf("relay tasks show %s:\n%s", loop.ID, out)
	out, _, code = cli(t, home, "tasks", "watch", loop.ID)
	t.Logf("relay tasks watch %s:\n%s", loop.ID, out)
	if code != 0 || !strings.Contains(out, "submitted  codex → gemini → codex") {
		t.Errorf("relay tasks watch %s (exit %d):\n%s", loop.ID, code, out)
	}

	// codex → gemini → claude → opencode: depth 3 with a bound of 2.
	d1 := top("gemini", delegate("gemini", "claude", delegate("claude", "opencode", "echo too deep")))
	d2 := childOf(d1)
	d3 := childOf(d2.Task)
	if d2.State != model.StateCompleted || d2.ParentTaskID != d1.ID ||
		len(d2.Chain) != 1 || d2.Chain[0] != (model.Hop{TaskID: d1.ID, Caller: "codex", Target: "gemini"}) {
		t.Errorf("depth 2: %s %s parent %q chain %+v", d2.State, d2.Code, d2.ParentTaskID, d2.Chain)
	}
	if d3.State != model.StateRejected || d3.Code != model.CodeDelegationTooDeep || d3.Depth() != 3 || d3.Path() != "codex → gemini → claude → opencode" {
		t.Errorf("depth 3: %s %s, depth %d, path %q", d3.State, d3.Code, d3.Depth(), d3.Path())
	}

	// The authority saw each task it was asked about with its chain, and
	// was never asked about the two the relay refused.
	asked := map[string]string{}
	for _, run := range gatestest.ReadFakeLog(t, authLog) {
		req, err := run.Request()
		if err != nil {
			t.Fatalf("authority request %q: %v", run.Stdin, err)
		}
		var path []string
		for _, h := range req.Chain {
			path = append(path, h.TaskID+":"+h.Caller+">"+h.Target)
		}
		asked[req.TaskID] = fmt.Sprintf("parent=%s depth=%d chain=%s", req.ParentTaskID, req.Depth, strings.Join(path, ","))
	}
	want := map[string]string{
		t1.ID: "parent= depth=1 chain=",
		d1.ID: "parent= depth=1 chain=",
		d2.ID: "parent=" + d1.ID + " depth=2 chain=" + d1.ID + ":codex>gemini",
	}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("the authority was asked\n %v\nwant\n %v", asked, want)
	}

	// The messages the agents sent from inside their tasks carry them.
	var msgs struct{ Messages []model.Message }
	cliJSON(t, home, &msgs, "messages", "list", "--from", "gemini")
	parents := map[string]bool{}
	for _, m := range msgs.Messages {
		if strings.HasPrefix(m.Body, "delegating: ") {
			parents[m.ParentTaskID] = true
		}
	}
	if !parents[t1.ID] || !parents[d1.ID] || len(parents) != 2 {
		t.Errorf("gemini's messages were sent inside %v, want %s and %s", parents, t1.ID, d1.ID)
	}
}
