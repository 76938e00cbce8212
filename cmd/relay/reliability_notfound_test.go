package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// No existence oracle: through the real socket API and the
// real `relay mcp`, a task or message id that exists but belongs to other
// agents is answered byte for byte like an id that does not exist (the
// ids swapped), and neither answer writes an audit row. A task may
// reference any task id: another agent's is accepted exactly like one that
// does not exist.
func TestReliabilityNotYoursIsNotFound(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	db := openRO(t, home)
	cwd := t.TempDir()

	// claude's task to codex, and claude's message to codex: gemini is in
	// neither.
	task := apiDo(t, c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{
		"target": "codex", "prompt": "p", "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
	msg := apiDo(t, c, "POST", "/v1/messages", "claude", []byte(`{"to":"codex","body":"private"}`))
	taskID, msgID := task.str("task_id"), msg.str("message_id")
	if taskID == "" || msgID == "" {
		t.Fatalf("setup: %s / %s", task.body, msg.body)
	}
	// Ids of the same shape that name nothing: the last character changed.
	ghost := func(id string) string {
		for _, c := range "0123456789ABCDEFGHJKMNPQRSTVWXYZ" {
			if g := id[:len(id)-1] + string(c); g != id {
				return g
			}
		}
		return ""
	}
	ghostTask, ghostMsg := ghost(taskID), ghost(msgID)
	if !model.ValidTaskID(ghostTask) || !model.ValidMessageID(ghostMsg) {
		t.Fatalf("ghost ids %q %q are not of the relay's shape", ghostTask, ghostMsg)
	}
	swap := func(b []byte) []byte { // a ghost's answer as it would read for the real ids
		b = bytes.ReplaceAll(b, []byte(ghostTask), []byte(taskID))
		return bytes.ReplaceAll(b, []byte(ghostMsg), []byte(msgID))
	}
	m := startRawMCP(t, home, "gemini")
	if sc, isErr := m.tool(t, "list_agents", []byte(`{}`)); isErr { // the facade's connection is audited by now
		t.Fatalf("list_agents: %v", sc)
	}
	audit := func() int { return boundsRows(t, db)[2] }

	for _, rq := range []struct {
		name, method, path string
		body               func(task, msg string) []byte
	}{
		{"GET /v1/tasks/{id}", "GET", "/v1/tasks/%s", nil},
		{"POST /v1/tasks/{id}/cancel", "POST", "/v1/tasks/%s/cancel", nil},
		{"reply_to", "POST", "/v1/messages", func(_, msg string) []byte {
			return []byte(`{"to":"codex","body":"re","reply_to":"` + msg + `"}`)
		}},
		{"ack", "POST", "/v1/inbox/ack", func(_, msg string) []byte { return []byte(`{"message_ids":["` + msg + `"]}`) }},
	} {
		do := func(task, msg string) apiResp {
			path := rq.path
			if strings.Contains(path, "%s") {
				path = fmt.Sprintf(path, task)
			}
			var body []byte
			if rq.body != nil {
				body = rq.body(task, msg)
			}
			a0 := audit()
			r := apiDo(t, c, rq.method, path, "gemini", body)
			if n := audit() - a0; n != 0 {
				t.Errorf("%s: %d audit rows written", rq.name, n)
			}
			return r
		}
		theirs, none := do(taskID, msgID), do(ghostTask, ghostMsg)
		if theirs.code() != string(model.CodeNotFound) || theirs.status != none.status || !bytes.Equal(theirs.body, swap(none.body)) {
			t.Errorf("socket API %s: another agent's id answers %d %s\nan id that does not exist %d %s",
				rq.name, theirs.status, theirs.body, none.status, none.body)
		}
	}

	for _, tc := range []struct {
		tool string
		args func(task, msg string) string
	}{
		{"get_task", func(task, _ string) string { return `{"task_id":"` + task + `"}` }},
		{"cancel_task", func(task, _ string) string { return `{"task_id":"` + task + `"}` }},
		{"send_message", func(_, msg string) string { return `{"to":"codex","body":"re","reply_to":"` + msg + `"}` }},
		{"ack_messages", func(_, msg string) string { return `{"message_ids":["` + msg + `"]}` }},
	} {
		do := func(task, msg string) []byte {
			a0 := audit()
			sc, isErr := m.tool(t, tc.tool, []byte(tc.args(task, msg)))
			if !isErr {
				t.Errorf("%s: not a tool error: %v", tc.tool, sc)
			}
			if n := audit() - a0; n != 0 {
				t.Errorf("%s: %d audit rows written", tc.tool, n)
			}
			b, _ := json.Marshal(sc)
			return b
		}
		theirs, none := do(taskID, msgID), do(ghostTask, ghostMsg)
		if !bytes.Contains(theirs, []byte(`"code":"not_found"`)) || !bytes.Equal(theirs, swap(none)) {
			t.Errorf("relay mcp %s: another agent's id answers %s\nan id that does not exist %s", tc.tool, theirs, none)
		}
	}

	// References are stored as given, whoever's task they name.
	for _, ref := range []string{taskID, ghostTask} {
		sc, isErr := m.tool(t, "submit_task", mustJSON(t, map[string]any{"target": "codex", "prompt": "p",
			"mission_id": "M-1", "lease_id": "S-1", "cwd": cwd, "reference_task_ids": []string{ref}}))
		if isErr {
			t.Fatalf("submit_task referencing %s: %v", ref, sc)
		}
		r := apiDo(t, c, "GET", "/v1/tasks/"+sc["task_id"].(string), "gemini", nil)
		got, _ := r.data["reference_task_ids"].([]any)
		if r.str("task_id") != sc["task_id"] || len(got) != 1 || got[0] != ref {
			t.Errorf("task referencing %s: %s", ref, r.body)
		}
	}
	auditVerify(t, home)
}
