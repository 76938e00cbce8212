package main

import (
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// boundsRows counts what the relay has stored: tasks, messages and audit
// rows, straight from the SQLite file.
func boundsRows(t *testing.T, db *sql.DB) [3]int {
	t.Helper()
	var n [3]int
	for i, table := range []string{"tasks", "messages", "audit_log"} {
		if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n[i]); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// Every field of a request has a bound, checked before anything is stored:
// past it the request is invalid_args naming the
// field and the bound, and no task, message or audit row is written. The
// checks live in the daemon's service (machine), so the socket API and
// the MCP facade (which goes through it) share them; the socket cases run
// every field, the facade cases a few, plus the facade's own refusal of a
// task id too long to send.
func TestReliabilityRequestBounds(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemon(t, home)
	c := apiClient(home)
	db := openRO(t, home)
	cwd := t.TempDir()
	big := strings.Repeat("x", 1<<20) // 1 MiB
	over := func(n int) string { return strings.Repeat("a", n+1) }
	okTask := func() map[string]any {
		return map[string]any{"target": "claude", "prompt": "p", "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}
	}
	okMsg := func() map[string]any { return map[string]any{"to": "claude", "body": "hi"} }
	arts := func(a ...map[string]any) []map[string]any { return a }
	manyArts := make([]map[string]any, model.MaxArtifacts+1)
	for i := range manyArts {
		manyArts[i] = map[string]any{"uri": "file:///r/" + strconv.Itoa(i)}
	}
	manyRefs := make([]string, model.MaxReferenceTaskIDs+1)
	for i := range manyRefs {
		manyRefs[i] = "T-01JZ0000000000000000000000"
	}

	cases := []struct {
		name  string
		tool  string // "submit" or "send"
		field string
		v     any
		want  string // the field and the bound (or shape) the message names
	}{
		{"mission_id 1 MiB", "submit", "mission_id", big, "mission_id is 1048576 bytes; at most 4096"},
		{"mission_id just over", "submit", "mission_id", over(model.MaxAuthorityIDBytes), "mission_id is 4097 bytes; at most 4096"},
		{"lease_id 1 MiB", "submit", "lease_id", big, "lease_id is 1048576 bytes; at most 4096"},
		{"context_id on a task", "submit", "context_id", over(model.MaxContextIDBytes), "context_id is 257 bytes; at most 256"},
		{"idempotency_key", "submit", "idempotency_key", big, "idempotency_key is 1048576 bytes; at most 256"},
		{"cwd", "submit", "cwd", "/" + over(model.MaxCwdBytes), "cwd is 4098 bytes; at most 4096"},
		{"reference_task_ids count", "submit", "reference_task_ids", manyRefs, "reference_task_ids has 65 ids; at most 64"},
		{"reference_task_ids malformed", "submit", "reference_task_ids", []string{"T-1"}, `reference_task_ids[0] "T-1" is not a task id (T- and 26 characters`},
		{"reference_task_ids 1 MiB", "submit", "reference_task_ids", []string{big}, "reference_task_ids[0] \"xxx"},
		{"artifacts count on a task", "submit", "artifacts", manyArts, "artifacts has 65 items; at most 64"},
		{"artifact uri", "submit", "artifacts", arts(map[string]any{"uri": "file:///" + big}), "artifacts[0].uri is 1048584 bytes; at most 4096"},
		{"artifact name", "submit", "artifacts", arts(map[string]any{"uri": "file:///r", "name": big}), "artifacts[0].name is 1048576 bytes; at most 256"},
		{"artifact media_type", "submit", "artifacts", arts(map[string]any{"uri": "file:///r", "media_type": big}), "artifacts[0].media_type is 1048576 bytes; at most 255"},
		{"context_id on a message", "send", "context_id", big, "context_id is 1048576 bytes; at most 256"},
		{"reply_to 1 MiB", "send", "reply_to", big, `reply_to "xxx`},
		{"reply_to malformed", "send", "reply_to", "MSG-1", `reply_to "MSG-1" is not a message id (MSG- and 26 characters`},
		{"artifacts count on a message", "send", "artifacts", manyArts, "artifacts has 65 items; at most 64"},
		{"artifact name on a message", "send", "artifacts", arts(map[string]any{"uri": "file:///r", "name": over(model.MaxArtifactNameBytes)}), "artifacts[0].name is 257 bytes; at most 256"},
	}
	for _, tc := range cases {
		before := boundsRows(t, db)
		req, path := okTask(), "/v1/tasks"
		if tc.tool == "send" {
			req, path = okMsg(), "/v1/messages"
		}
		req[tc.field] = tc.v
		r := apiDo(t, c, "POST", path, "codex", mustJSON(t, req))
		if r.status != 400 || r.code() != "invalid_args" || !strings.Contains(r.str("message"), tc.want) {
			t.Errorf("%s: %d %s, want 400 invalid_args saying %q", tc.name, r.status, clipText(string(r.body), 400), tc.want)
		}
		if len(r.body) > 2048 {
			t.Errorf("%s: a %d-byte answer echoes the value", tc.name, len(r.body))
		}
		if after := boundsRows(t, db); after != before {
			t.Errorf("%s: tasks, messages, audit rows %v → %v; a refused request stores nothing", tc.name, before, after)
		}
	}

	// At its bound a field is accepted; a mission or lease ID within the
	// storage bound but not the gate's shape is stored, audited and then
	// rejected by the missionLease gate, so the attempt is on record.
	at := okTask()
	at["context_id"] = strings.Repeat("c", model.MaxContextIDBytes)
	at["idempotency_key"] = strings.Repeat("k", model.MaxIdempotencyKeyBytes)
	at["mission_id"] = strings.Repeat("m", model.MaxAuthorityIDBytes)
	at["artifacts"] = arts(map[string]any{"uri": "file:///" + strings.Repeat("u", model.MaxArtifactURIBytes-8),
		"name": strings.Repeat("n", model.MaxArtifactNameBytes), "media_type": strings.Repeat("t", model.MaxArtifactMediaTypeBytes)})
	before := boundsRows(t, db)
	r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, at))
	if r.status != 200 {
		t.Fatalf("a task with every field at its bound: %d %s", r.status, clipText(string(r.body), 400))
	}
	id := r.str("task_id")
	if !model.ValidTaskID(id) {
		t.Fatalf("task id %q is not of the shape model.ValidTaskID accepts", id)
	}
	eventually(t, "the task rejected invalid_mission_id", 10*time.Second, func() bool {
		g := apiDo(t, c, "GET", "/v1/tasks/"+id, "codex", nil)
		return g.str("state") == "rejected" && g.code() == "invalid_mission_id"
	})
	if after := boundsRows(t, db); after[0] != before[0]+1 {
		t.Errorf("tasks %d → %d, want the rejected task stored", before[0], after[0])
	}
	// A reference to that task is accepted. It ends blocked (no authority
	// is configured), which leaves its submitter a notice: it must have
	// ended before the facade's refusals are counted below, or its notice
	// could land in the counted window.
	ref := okTask()
	ref["reference_task_ids"] = []string{id}
	if r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, ref)); r.status != 200 {
		t.Errorf("a task referencing %s: %d %s", id, r.status, clipText(string(r.body), 400))
	} else {
		taskEnded(t, c, r.str("task_id"))
	}

	// A lookup by an id the relay never made is not_found, at once and
	// without echoing it: 32 KiB fits the socket's header bound.
	for _, p := range []string{"/v1/tasks/" + strings.Repeat("T", 32<<10), "/v1/tasks/T-1"} {
		g := apiDo(t, c, "GET", p, "codex", nil)
		if g.status != 404 || g.code() != "not_found" || len(g.body) > 2048 {
			t.Errorf("GET %s: %d %s, want a short 404 not_found", clipText(p, 40), g.status, clipText(string(g.body), 300))
		}
	}

	// Through the MCP facade: the same bounds (the daemon's), and a 1 MiB
	// task id in get_task and cancel_task answered not_found by the
	// facade's client without sending it (it answered daemon_unavailable).
	f := startFacade(t, home, "codex")
	before = boundsRows(t, db)
	for _, tc := range []struct {
		tool string
		args map[string]any
		code string
		want string
	}{
		{"submit_task", map[string]any{"target": "claude", "prompt": "p", "context_id": big}, "invalid_args", "context_id is 1048576 bytes; at most 256"},
		{"submit_task", map[string]any{"target": "claude", "prompt": "p", "lease_id": big}, "invalid_args", "lease_id is 1048576 bytes; at most 4096"},
		{"submit_task", map[string]any{"target": "claude", "prompt": "p", "reference_task_ids": []any{"T-1"}}, "invalid_args", "reference_task_ids[0]"},
		{"send_message", map[string]any{"to": "claude", "body": "hi", "reply_to": big}, "invalid_args", "reply_to"},
		{"get_task", map[string]any{"task_id": "T" + big}, "not_found", "no task id is longer than 256"},
		{"cancel_task", map[string]any{"task_id": "T" + big}, "not_found", "no task id is longer than 256"},
		{"get_task", map[string]any{"task_id": "T-1"}, "not_found", `"T-1"`},
	} {
		res := callTool(t, f, tc.tool, tc.args)
		if !res.isError || res.code() != tc.code || !strings.Contains(res.str("message"), tc.want) || len(res.text) > 4096 {
			t.Errorf("%s: isError=%v %s, want %s saying %q", tc.tool, res.isError, clipText(res.text, 400), tc.code, tc.want)
		}
	}
	if after := boundsRows(t, db); after[0] != before[0] || after[1] != before[1] {
		t.Errorf("tasks, messages %v → %v through the facade; refused requests store nothing", before, after)
	}
}

// X-Relay-Agent must name an agent of this relay: a caller no config names
// is refused unknown_agent on every agent call, and nothing is stored
// under its name.
func TestReliabilityCallerMustBeAKnownAgent(t *testing.T) {
	t.Parallel()
	home := newHome(t, "[agents.my-bot]\ncommand = [\"/bin/true\"]\n")
	launchDaemon(t, home)
	c := apiClient(home)
	db := openRO(t, home)
	count := func() (n int) {
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM messages) + (SELECT count(*) FROM tasks)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	for _, rq := range []struct{ method, path, body string }{
		{"POST", "/v1/messages", `{"to":"claude","body":"hi"}`},
		{"POST", "/v1/tasks", `{"target":"claude","prompt":"p","mission_id":"M-1","lease_id":"S-1","cwd":"/tmp"}`},
		{"POST", "/v1/inbox", `{}`},
		{"GET", "/v1/tasks", ""},
	} {
		var body []byte
		if rq.body != "" {
			body = []byte(rq.body)
		}
		r := apiDo(t, c, rq.method, rq.path, "mallory", body)
		if r.code() != string(model.CodeUnknownAgent) || !strings.Contains(r.str("message"), `"mallory"`) {
			t.Errorf("%s %s as mallory: %d %s, want unknown_agent naming it", rq.method, rq.path, r.status, clipText(string(r.body), 200))
		}
	}
	if n := count(); n != before {
		t.Errorf("%d rows stored for an unknown caller", n-before)
	}
	// A custom agent from config, and a core one, are callers.
	for _, who := range []string{"my-bot", "codex"} {
		if r := apiDo(t, c, "POST", "/v1/messages", who, []byte(`{"to":"claude","body":"hi"}`)); r.str("message_id") == "" {
			t.Errorf("send as %s: %d %s", who, r.status, clipText(string(r.body), 200))
		}
	}
}
