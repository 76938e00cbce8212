package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
)

// submitFor submits a task from caller to target over the socket API, with
// a mission and a lease (its gates pass with an allowing authority), and
// returns its id.
func submitFor(t *testing.T, c *http.Client, caller, target, prompt, cwd string) string {
	t.Helper()
	r := apiDo(t, c, "POST", "/v1/tasks", caller, mustJSON(t, map[string]any{
		"target": target, "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
	if r.status != 200 || r.str("task_id") == "" {
		t.Fatalf("submit %q as %s: %d %s", prompt, caller, r.status, r.body)
	}
	return r.str("task_id")
}

// operatorState is a task's state as the operator sees it.
func operatorState(t *testing.T, c *http.Client, id string) string {
	t.Helper()
	return apiDo(t, c, "GET", "/v1/operator/tasks/"+id, "", nil).str("state")
}

// One caller cannot hold every dispatch slot. With the default limits (4
// slots, a caller's share all but one), codex's four hanging tasks take
// three slots and the fourth waits in submitted; gemini's task, submitted
// after them, runs in the free slot and completes while codex's still
// hang (on a relay without a share it waited for the task timeout, 30
// minutes by default). When one of codex's tasks ends, its waiting task
// gets the slot: a caller at its share is held back, never starved.
func TestReliabilityOneCallerCannotHoldEverySlot(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	cwd := t.TempDir()

	var hanging []string
	for range 4 {
		hanging = append(hanging, submitFor(t, c, "codex", "claude", "hang until canceled", cwd))
	}
	for _, id := range hanging[:3] {
		awaitWorking(t, c, id)
	}
	if s := operatorState(t, c, hanging[3]); s != "submitted" {
		t.Fatalf("codex's fourth hanging task is %s, want submitted: codex's share is 3 of 4 slots", s)
	}

	other := submitFor(t, c, "gemini", "claude", "echo served beside the hanging ones", cwd)
	r := taskEnded(t, c, other)
	if r.str("state") != "completed" {
		t.Fatalf("gemini's task ended %s/%s (%s), want completed", r.str("state"), r.str("code"), r.str("message"))
	}
	for _, id := range hanging[:3] {
		if s := operatorState(t, c, id); s != "working" {
			t.Fatalf("codex's task %s is %s after gemini's completed, want still working", id, s)
		}
	}
	if s := operatorState(t, c, hanging[3]); s != "submitted" {
		t.Fatalf("codex's fourth task is %s while codex holds its share, want submitted", s)
	}

	// One of codex's tasks ends: its waiting one takes the slot.
	if r := apiDo(t, c, "POST", "/v1/tasks/"+hanging[0]+"/cancel", "codex", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	awaitWorking(t, c, hanging[3])
	eventually(t, "the canceled task ended", 30*time.Second, func() bool {
		return model.State(operatorState(t, c, hanging[0])) == model.StateCanceled
	})
	auditVerify(t, home)
}

// pidsIn reads the pids a fake agent appended to path, one a line.
func pidsIn(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// Each line is "PID START NS", the pid the agent's sandbox's: the
	// host's is found from it (0 once the process is gone).
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			pids = append(pids, dispatchtest.HostPID(line))
		}
	}
	return pids
}

// An agent that never answers initialize, and one that never answers
// session/new, are killed (their process group with them) once
// limits.start_timeout has passed, not after the task timeout: each task
// ends failed/agent_start_timeout without ever working, and its slot goes
// to the next task, which completes. With the only slot (max_dispatch = 1)
// and the default 30-minute task timeout, the three tasks take a few
// seconds; before the start-up deadline the first held the slot for the
// whole task timeout.
func TestReliabilityAgentThatNeverStartsFreesItsSlot(t *testing.T) {
	t.Parallel()
	agent := dispatchtest.BuildFakeAgent(t)
	const startTimeout = 2 * time.Second
	home := newHome(t, fullConfig(t, "allow-guarded", "[agents.stuck-init]\ncommand = ["+strconv.Quote(agent)+", \"hang-init\"]\n\n"+
		"[agents.stuck-new]\ncommand = ["+strconv.Quote(agent)+", \"hang-new\"]\n\n"+
		"[limits]\nmax_dispatch = 1\nstart_timeout = \"2s\"\n"))
	dir := t.TempDir()
	agentLog, children := filepath.Join(dir, "agent.log"), filepath.Join(dir, "children")
	launchDaemonEnv(t, home, append(fastExit, "FAKEAGENT_LOG="+agentLog, "FAKEAGENT_START_CHILD="+children))
	c := apiClient(home)
	cwd := t.TempDir()

	began := time.Now()
	stuck := []struct{ id, where string }{
		{submitFor(t, c, "codex", "stuck-init", "echo never sent", cwd), "initialize"},
		{submitFor(t, c, "codex", "stuck-new", "echo never sent", cwd), "session/new"},
	}
	next := submitFor(t, c, "codex", "claude", "echo after the stuck ones", cwd)
	if r := taskEnded(t, c, next); r.str("state") != "completed" {
		t.Fatalf("the task after the stuck ones ended %s/%s (%s), want completed", r.str("state"), r.str("code"), r.str("message"))
	}
	took := time.Since(began)
	for _, s := range stuck {
		r := taskEnded(t, c, s.id)
		if r.str("state") != "failed" || r.code() != string(model.CodeAgentStartTimeout) ||
			!strings.Contains(r.str("message"), "had not answered "+s.where) || !strings.Contains(r.str("message"), "start_timeout (2s)") {
			t.Errorf("task stuck at %s: %s/%s (%s), want failed/agent_start_timeout naming %s and the 2s", s.where,
				r.str("state"), r.code(), r.str("message"), s.where)
		}
		var show model.TaskDetail
		cliJSON(t, home, &show, "tasks", "show", s.id)
		for _, ev := range show.Events {
			if ev.To == model.StateWorking {
				t.Errorf("task stuck at %s was working: %+v", s.where, show.Events)
			}
		}
		if b, err := os.ReadFile(filepath.Join(home, "logs", "tasks", s.id+".log")); err != nil || !strings.Contains(string(b), "agent_start_timeout") {
			t.Errorf("task log of the task stuck at %s (%v) does not say agent_start_timeout:\n%s", s.where, err, b)
		}
	}
	if took < 2*startTimeout || took > 2*startTimeout+40*time.Second {
		t.Errorf("the three tasks took %v; the two stuck ones should each hold the slot for the %v deadline", took, startTimeout)
	}
	// Every agent and every child in its process group is gone.
	pids := append(agentStarts(t, agentLog), pidsIn(t, children)...)
	if len(pids) != 6 {
		t.Fatalf("%d agent and child pids recorded, want 3 agents and their 3 children: %v", len(pids), pids)
	}
	for _, pid := range pids {
		eventually(t, "pid "+strconv.Itoa(pid)+" dead", 10*time.Second, func() bool { return !alive(pid) })
	}
	auditVerify(t, home)
}
