package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// A task that ends with a code carries a hint wherever it is shown, as an
// error does: get_task, the MCP tasks extension's result, `relay tasks
// show` and its --json, `relay tasks list --json`. The hint names the
// task's agent and the task itself where it speaks of them; nothing is
// left for the user to fill in (no NAME, no ID, no {slot}).
func TestEndedTaskCarriesItsHint(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	claude := startRawFacade(t, home, "claude")

	id, _ := claude.submit(true, map[string]any{"target": "gemini", "prompt": "crash", "mission_id": "M-1", "lease_id": "S-1"})["taskId"].(string)
	done := claude.awaitTask(id)
	wantHint := func(where string, hint any) {
		t.Helper()
		h, _ := hint.(string)
		placeholder := regexp.MustCompile(`\bNAME\b|\bID\b|\bAGENT\b|\{[a-z_]+\}`)
		if !strings.Contains(h, "relay agents probe gemini") || !strings.Contains(h, "relay tasks show "+id) || placeholder.MatchString(h) {
			t.Errorf("%s: hint %q, want agent_crashed's with gemini and %s filled in", where, h, id)
		}
	}
	result, _ := done["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	if sc["code"] != string(model.CodeAgentCrashed) {
		t.Fatalf("the task: %v, want agent_crashed", done)
	}
	wantHint("tasks/get", sc["hint"])

	got, e := claude.call("tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": id}})
	if e != nil {
		t.Fatalf("get_task: %v", e)
	}
	sc, _ = got["structuredContent"].(map[string]any)
	wantHint("get_task", sc["hint"])

	var show model.TaskDetail
	cliJSON(t, home, &show, "tasks", "show", id)
	wantHint("relay tasks show --json", show.Hint)
	var list struct{ Tasks []model.Task }
	cliJSON(t, home, &list, "tasks", "list")
	if len(list.Tasks) != 1 {
		t.Fatalf("tasks list: %+v", list)
	}
	wantHint("relay tasks list --json", list.Tasks[0].Hint)
	out, errOut, code := cli(t, home, "tasks", "show", id)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "hint ") {
			line = strings.TrimSpace(strings.TrimPrefix(l, "hint "))
		}
	}
	if code != 0 {
		t.Fatalf("tasks show: exit %d\n%s", code, errOut)
	}
	wantHint("relay tasks show", line)
}
