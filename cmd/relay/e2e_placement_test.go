package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// A facade is inside a task because it runs in the task's sandbox, not
// because a walk up /proc found the agent: started under a zombie leader
// (a process whose main thread exited while another runs) and 66 shells
// deep, a facade the task's agent starts is placed in its task, so a loop
// through it, codex → claude → codex, is refused delegation_cycle. The
// same facade launched --as another agent is refused identity_mismatch:
// inside a task an agent speaks only as itself.
func TestE2EPlacementFromTheSandbox(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemonEnv(t, home, append([]string{"FAKEAGENT_LOG=" + filepath.Join(t.TempDir(), "agent.jsonl")}, fastExit...))
	codex := startFacade(t, home, "codex", "--no-autostart")
	cwd := t.TempDir()
	run := func(prompt string) model.Task {
		t.Helper()
		id := mustOK(t, codex, "submit_task", map[string]any{"target": "claude", "prompt": prompt,
			"mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}).str("task_id")
		var end model.Task
		eventually(t, "task "+id+" ended", 120*time.Second, func() bool {
			cliJSON(t, home, &end, "tasks", "show", id)
			return end.State.Terminal()
		})
		return end
	}
	for _, wrap := range []string{"zombie", "deep:66", "zombie,deep:66"} {
		// As itself: placed inside the task, so back to codex is a loop.
		top := run(fmt.Sprintf("delegate-via %s %s %s claude codex echo back", wrap, relayBin, home))
		if top.State != model.StateCompleted || !strings.Contains(top.Result, "rejected delegation_cycle") {
			t.Errorf("%s: the agent's submit back to codex: task %s/%s, answered %q; want its task rejected delegation_cycle",
				wrap, top.State, top.Code, top.Result)
		}
		var list struct{ Tasks []model.Task }
		cliJSON(t, home, &list, "tasks", "list", "--agent", "codex")
		found := false
		for _, c := range list.Tasks {
			if c.ParentTaskID == top.ID {
				found = true
				if c.Code != model.CodeDelegationCycle || c.Caller != "claude" {
					t.Errorf("%s: the task inside %s: %s %s from %s", wrap, top.ID, c.State, c.Code, c.Caller)
				}
			}
		}
		if !found {
			t.Errorf("%s: no task recorded inside %s: the facade was not placed in its task", wrap, top.ID)
		}
	}
	// As another agent: refused, nothing made.
	top := run(fmt.Sprintf("delegate-via zombie,deep:66 %s %s gemini codex echo as someone else", relayBin, home))
	if !strings.Contains(top.Result, "identity_mismatch") {
		t.Errorf("a facade inside claude's task acting as gemini: answered %q, want identity_mismatch", top.Result)
	}
	var list struct{ Tasks []model.Task }
	cliJSON(t, home, &list, "tasks", "list", "--agent", "gemini")
	for _, c := range list.Tasks {
		if c.ParentTaskID == top.ID {
			t.Errorf("a task was made as gemini inside %s: %+v", top.ID, c)
		}
	}
	auditVerify(t, home)
}
