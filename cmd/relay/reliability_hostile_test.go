package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

// Hostile input, through the socket API (raw HTTP over
// the Unix socket, no facade) and through the facade (raw JSON-RPC lines
// on `relay mcp`'s stdin). Each input gets a clear error code (or is
// stored exactly as sent), the daemon and the facade keep serving, and
// nothing is half-persisted: the task and message counts change by
// exactly what was accepted.
//
// Decisions these tests pin down (docs/reliability.md):
//   - cwd must be a clean absolute path to an existing directory: a
//     relative path or one through `..` is invalid_cwd; a symlink to a
//     directory is accepted and stored resolved (the canonical path, the
//     one the agent runs in and the masks are computed on), a symlink to
//     anything else is invalid_cwd;
//   - artifact URIs must be absolute (a scheme), never data:; they are
//     references the relay never opens, so `..` inside a file: URI is
//     stored verbatim;
//   - a JSON \u0000 inside a string is data and is stored verbatim; a raw
//     NUL byte or invalid UTF-8 makes the document invalid (invalid_args);
//   - SQL metacharacters are data: stored verbatim, nothing else changes.

// hostileCase is one request of the socket API table.
type hostileCase struct {
	name         string
	method, path string
	agent        string
	body         []byte
	code         model.Code // "" means success (200)
	tasks, msgs  int        // rows the request may add
	check        func(t *testing.T, r apiResp)
}

// padTo pads a JSON document with trailing spaces to exactly n bytes.
func padTo(doc string, n int) []byte {
	return append([]byte(doc), bytes.Repeat([]byte(" "), n-len(doc))...)
}

// hostileDirs makes the cwd fixtures: a directory, a symlink to it, a
// symlink to a file and a dangling symlink.
func hostileDirs(t *testing.T) (dir, linkDir, linkFile, dangling string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir()) // dir is the canonical path a linkDir task stores
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(root, "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file.txt")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	linkDir, linkFile, dangling = filepath.Join(root, "link-dir"), filepath.Join(root, "link-file"), filepath.Join(root, "dangling")
	for _, l := range [][2]string{{dir, linkDir}, {file, linkFile}, {filepath.Join(root, "nowhere"), dangling}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	return dir, linkDir, linkFile, dangling
}

func TestReliabilityHostileSocketAPI(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	d := launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	dir, linkDir, linkFile, dangling := hostileDirs(t)

	// A client that sends one byte a second runs beside the table: the
	// per-connection header deadline must cut it while others are served.
	slow := make(chan error, 1)
	go func() { slow <- slowClient(home) }()

	const max = 4 << 20 // socketapi.DefaultMaxBody: the daemon's body limit
	sqlBody := `x'); DROP TABLE messages; DELETE FROM tasks; --`
	bodyOf := func(want string) func(t *testing.T, r apiResp) {
		return func(t *testing.T, r apiResp) {
			if r.str("body") != want {
				t.Errorf("stored body %q, want %q verbatim", r.str("body"), want)
			}
		}
	}
	send := func(doc string) []byte { return []byte(doc) }
	submit := func(fields string) []byte {
		return []byte(`{"target":"claude","prompt":"x","mission_id":"M-1","lease_id":"S-1"` + fields + `}`)
	}
	cases := []hostileCase{
		{name: "body exactly at the limit", method: "POST", path: "/v1/messages", agent: "claude",
			body: padTo(`{"to":"codex","body":"at the limit"}`, max), msgs: 1},
		{name: "body one byte over the limit", method: "POST", path: "/v1/messages", agent: "claude",
			body: padTo(`{"to":"codex","body":"over the limit"}`, max+1), code: model.CodePayloadTooLarge},
		{name: "10 MB JSON document", method: "POST", path: "/v1/messages", agent: "claude",
			body: []byte(`{"to":"codex","body":"` + strings.Repeat("x", 10<<20) + `"}`), code: model.CodePayloadTooLarge},
		{name: "nesting depth 10000", method: "POST", path: "/v1/messages", agent: "claude",
			body: []byte(`{"to":"codex","body":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`), code: model.CodeInvalidArgs},
		{name: "nesting depth 10000 in an unknown field", method: "POST", path: "/v1/tasks", agent: "claude",
			body: []byte(`{"x":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat("}", 10000) + `}`), code: model.CodeInvalidArgs},
		{name: "invalid UTF-8", method: "POST", path: "/v1/messages", agent: "claude",
			body: send("{\"to\":\"codex\",\"body\":\"bad \xff\xfe utf-8\"}"), code: model.CodeInvalidArgs},
		{name: "invalid UTF-8 in a prompt", method: "POST", path: "/v1/tasks", agent: "claude",
			body: []byte("{\"target\":\"codex\",\"prompt\":\"\xc3\x28\"}"), code: model.CodeInvalidArgs},
		{name: "raw NUL byte", method: "POST", path: "/v1/messages", agent: "claude",
			body: send("{\"to\":\"codex\",\"body\":\"a\x00b\"}"), code: model.CodeInvalidArgs},
		{name: "escaped NUL is data", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"nul\u0000inside"}`), msgs: 1, check: bodyOf("nul\x00inside")},
		{name: "unknown field", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","from":"gemini"}`), code: model.CodeInvalidArgs},
		{name: "unknown field on submit", method: "POST", path: "/v1/tasks", agent: "claude",
			body: submit(`,"sender":"gemini"`), code: model.CodeInvalidArgs},
		{name: "wrong type: array recipient", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":["codex","gemini"],"body":"x"}`), code: model.CodeInvalidArgs},
		{name: "wrong type: number body", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":12}`), code: model.CodeInvalidArgs},
		{name: "wrong type: mode", method: "POST", path: "/v1/tasks", agent: "claude",
			body: submit(`,"mode":5`), code: model.CodeInvalidArgs},
		{name: "wrong type: ack ids", method: "POST", path: "/v1/inbox/ack", agent: "codex",
			body: send(`{"message_ids":"MSG-1"}`), code: model.CodeInvalidArgs},
		{name: "not an object", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`["to","codex"]`), code: model.CodeInvalidArgs},
		{name: "two objects", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"a"}{"to":"codex","body":"b"}`), code: model.CodeInvalidArgs},
		{name: "negative limit", method: "POST", path: "/v1/inbox?limit=-1", agent: "codex", code: model.CodeInvalidArgs},
		{name: "huge limit", method: "POST", path: "/v1/inbox?limit=99999999999999999999999", agent: "codex", code: model.CodeInvalidArgs},
		{name: "limit over the maximum", method: "POST", path: "/v1/inbox?limit=1001", agent: "codex", code: model.CodeInvalidArgs},
		{name: "float limit", method: "GET", path: "/v1/tasks?limit=1.5", agent: "codex", code: model.CodeInvalidArgs},
		{name: "negative operator limit", method: "GET", path: "/v1/operator/tasks?limit=-5", code: model.CodeInvalidArgs},
		{name: "huge operator limit", method: "GET", path: "/v1/operator/messages?limit=1000000000", code: model.CodeInvalidArgs},
		{name: "SQL in a body is stored verbatim", method: "POST", path: "/v1/messages", agent: "claude",
			body: mustJSON(t, map[string]any{"to": "codex", "body": sqlBody, "context_id": `c' OR '1'='1`}), msgs: 1,
			check: func(t *testing.T, r apiResp) {
				if r.str("body") != sqlBody || r.str("context_id") != `c' OR '1'='1` {
					t.Errorf("stored %q / %q", r.str("body"), r.str("context_id"))
				}
			}},
		{name: "SQL in a recipient", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex'--","body":"x"}`), code: model.CodeUnknownAgent},
		{name: "SQL with spaces in a recipient", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex' OR '1'='1","body":"x"}`), code: model.CodeBroadcastNotSupported},
		{name: "SQL in a task id", method: "GET", path: "/v1/tasks/" + url.PathEscape(`T-1' OR '1'='1' --`), agent: "codex", code: model.CodeNotFound},
		// A filter naming no agent is refused before any query; a cursor
		// reaches the store as a bound parameter and matches no row.
		{name: "SQL in an operator filter", method: "GET", path: "/v1/operator/messages?to=" + url.QueryEscape(`codex' OR '1'='1`),
			code: model.CodeUnknownAgent},
		{name: "SQL in an operator cursor", method: "GET", path: "/v1/operator/messages?before=" + url.QueryEscape(`MSG-1' OR '1'='1`),
			code: model.CodeNotFound},
		{name: "SQL in a mission id: persisted, then rejected", method: "POST", path: "/v1/tasks", agent: "claude",
			body:  mustJSON(t, map[string]any{"target": "codex", "prompt": sqlBody, "mission_id": "M-1'; DROP TABLE tasks; --", "lease_id": "S-1", "cwd": dir}),
			tasks: 1, msgs: 1, check: func(t *testing.T, r apiResp) {
				if r = taskEnded(t, c, r.str("task_id")); r.str("state") != "rejected" || r.str("code") != "invalid_mission_id" || r.str("prompt") != sqlBody {
					t.Errorf("task %s", r.body)
				}
			}},
		{name: "SQL in the caller identity", method: "POST", path: "/v1/messages", agent: "claude'--",
			body: send(`{"to":"codex","body":"x"}`), code: model.CodeInvalidArgs},
		{name: "relative cwd", method: "POST", path: "/v1/tasks", agent: "claude",
			body: submit(`,"cwd":"relative/dir"`), code: model.CodeInvalidCwd},
		{name: "cwd through ..", method: "POST", path: "/v1/tasks", agent: "claude",
			body: mustJSON(t, map[string]any{"target": "codex", "prompt": "x", "cwd": dir + "/../" + filepath.Base(dir)}), code: model.CodeInvalidCwd},
		{name: "cwd that does not exist", method: "POST", path: "/v1/tasks", agent: "claude",
			body: mustJSON(t, map[string]any{"target": "codex", "prompt": "x", "cwd": dir + "/missing"}), code: model.CodeInvalidCwd},
		{name: "cwd with a NUL", method: "POST", path: "/v1/tasks", agent: "claude",
			body: mustJSON(t, map[string]any{"target": "codex", "prompt": "x", "cwd": dir + "\x00/etc"}), code: model.CodeInvalidCwd},
		{name: "cwd symlink to a file", method: "POST", path: "/v1/tasks", agent: "claude",
			body: mustJSON(t, map[string]any{"target": "codex", "prompt": "x", "cwd": linkFile}), code: model.CodeInvalidCwd},
		{name: "cwd dangling symlink", method: "POST", path: "/v1/tasks", agent: "claude",
			body: mustJSON(t, map[string]any{"target": "codex", "prompt": "x", "cwd": dangling}), code: model.CodeInvalidCwd},
		{name: "cwd symlink to a directory is stored resolved", method: "POST", path: "/v1/tasks", agent: "claude",
			body:  mustJSON(t, map[string]any{"target": "codex", "prompt": "x", "mission_id": "M-1", "lease_id": "S-1", "cwd": linkDir}),
			tasks: 1, msgs: 1, check: func(t *testing.T, r apiResp) {
				// Persisted, then blocked (no adapter is configured here).
				if r = taskEnded(t, c, r.str("task_id")); r.str("cwd") != dir || r.str("state") != "blocked" {
					t.Errorf("task %s", r.body)
				}
			}},
		{name: "relative artifact URI", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","artifacts":[{"uri":"../../etc/passwd"}]}`), code: model.CodeInvalidArgs},
		{name: "data: artifact URI", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","artifacts":[{"uri":"data:text/plain,secret"}]}`), code: model.CodeInvalidArgs},
		{name: "artifact with content", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","artifacts":[{"uri":"file:///a","content":"secret"}]}`), code: model.CodeInvalidArgs},
		{name: "artifact URI with .. is a reference, stored verbatim", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"dotdot","artifacts":[{"uri":"file:///repo/../../etc/passwd","name":"p"}]}`), msgs: 1,
			check: func(t *testing.T, r apiResp) {
				if !bytes.Contains(r.body, []byte(`"uri":"file:///repo/../../etc/passwd"`)) {
					t.Errorf("artifact not stored verbatim: %s", r.body)
				}
			}},
		{name: "control characters in a task id", method: "GET", path: "/v1/tasks/T-%01%0A%1B%5B2J", agent: "codex", code: model.CodeNotFound},
		{name: "control characters in message ids", method: "POST", path: "/v1/inbox/ack", agent: "codex",
			body: send(`{"message_ids":["MSG-\u0001\n","\u001b[2J"]}`), code: model.CodeNotFound},
		// A name padded with whitespace is malformed, not unknown.
		{name: "control characters in a recipient", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex\n","body":"x"}`), code: model.CodeInvalidArgs},
		{name: "a space before a recipient", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":" codex","body":"x"}`), code: model.CodeInvalidArgs},
		{name: "unclean path", method: "GET", path: "/v1/tasks/../operator/tasks", agent: "codex", code: model.CodeNotFound},
		// One reading only: nothing encoding/json would
		// replace (a lone surrogate) or choose among (a key twice, keys
		// differing only in case), at any depth.
		{name: "lone surrogate in a body", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"\ud800"}`), code: model.CodeInvalidArgs},
		{name: "lone low surrogate in a context id", method: "POST", path: "/v1/tasks", agent: "claude",
			body: submit(`,"cwd":"` + dir + `","context_id":"\udc00"`), code: model.CodeInvalidArgs},
		{name: "high surrogate before a non-low one", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","context_id":"\ud83d\u0041"}`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in an artifact", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","artifacts":[{"uri":"file:///a","name":"\ud800"}]}`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in reference_task_ids", method: "POST", path: "/v1/tasks", agent: "claude",
			body: submit(`,"reference_task_ids":["\udfff"]`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in ack ids", method: "POST", path: "/v1/inbox/ack", agent: "codex",
			body: send(`{"message_ids":["MSG-\ud800"]}`), code: model.CodeInvalidArgs},
		{name: "invalid UTF-8 in an artifact", method: "POST", path: "/v1/messages", agent: "claude",
			body: send("{\"to\":\"codex\",\"body\":\"x\",\"artifacts\":[{\"uri\":\"file:///\xff\"}]}"), code: model.CodeInvalidArgs},
		{name: "duplicate key", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"first","body":"second"}`), code: model.CodeInvalidArgs},
		{name: "duplicate key in an artifact", method: "POST", path: "/v1/messages", agent: "claude",
			body: send(`{"to":"codex","body":"x","artifacts":[{"uri":"file:///a","uri":"file:///b"}]}`), code: model.CodeInvalidArgs},
		{name: "keys differing only in case", method: "POST", path: "/v1/tasks", agent: "claude",
			body: submit(`,"cwd":"` + dir + `","TARGET":"gemini"`), code: model.CodeInvalidArgs},
		{name: "a key matching a field only in case", method: "POST", path: "/v1/tasks", agent: "claude",
			body: []byte(`{"Target":"codex","prompt":"x","mission_id":"M-1","lease_id":"S-1","cwd":"` + dir + `"}`), code: model.CodeInvalidArgs},
	}

	before := countRows(t, c)
	var wantTasks, wantMsgs int
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r0 := countRows(t, c)
			r := apiDo(t, c, tc.method, tc.path, tc.agent, tc.body)
			if tc.code == "" {
				if r.status != http.StatusOK {
					t.Fatalf("status %d %s, want 200", r.status, clipText(string(r.body), 300))
				}
			} else if r.code() != string(tc.code) || r.status != socketapi.Status(tc.code) || r.str("message") == "" || r.str("hint") == "" {
				t.Fatalf("status %d %s, want %d %s with message and hint", r.status, clipText(string(r.body), 300), socketapi.Status(tc.code), tc.code)
			}
			if len(r.body) > 4096 && tc.code != "" {
				t.Errorf("error answer of %d bytes echoes the input", len(r.body))
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			// Nothing half-persisted: exactly what was accepted.
			if r1 := countRows(t, c); r1.tasks-r0.tasks != tc.tasks || r1.msgs-r0.msgs != tc.msgs {
				t.Errorf("rows changed by %d tasks, %d messages; want %d, %d", r1.tasks-r0.tasks, r1.msgs-r0.msgs, tc.tasks, tc.msgs)
			}
			// The daemon keeps serving.
			if v := apiDo(t, c, "GET", "/v1/version", "", nil); v.status != 200 {
				t.Fatalf("daemon stopped serving: %d", v.status)
			}
		})
		wantTasks += tc.tasks
		wantMsgs += tc.msgs
	}

	// A header value with control characters never reaches a handler.
	if status := rawStatus(t, home, "POST /v1/messages HTTP/1.1\r\nHost: relay\r\nX-Relay-Agent: claude\x01\r\nContent-Length: 2\r\n\r\n{}"); status != 400 {
		t.Errorf("control character in the identity header: status %d, want 400", status)
	}
	// One identity per request: a second X-Relay-Agent header, in any
	// spelling, is invalid_args, neither the first nor the last wins.
	r0 := countRows(t, c)
	status, body := rawAnswer(t, home, "POST /v1/messages HTTP/1.1\r\nHost: relay\r\nX-Relay-Agent: claude\r\nx-relay-agent: gemini\r\nContent-Length: 30\r\n\r\n{\"to\":\"codex\",\"body\":\"whose?\"}")
	if status != 400 || !bytes.Contains(body, []byte(`"code":"invalid_args"`)) {
		t.Errorf("two identity headers: %d %s, want 400 invalid_args", status, body)
	}
	if r1 := countRows(t, c); r1 != r0 {
		t.Errorf("two identity headers: rows changed %+v → %+v", r0, r1)
	}

	if err := <-slow; err != nil {
		t.Error(err)
	}
	// The operator's own view agrees, through the CLI.
	if ts, ms := len(allTasks(t, home)), len(allMessages(t, home)); ts != before.tasks+wantTasks || ms != before.msgs+wantMsgs {
		t.Errorf("relay tasks/messages list: %d tasks, %d messages; want %d, %d", ts, ms, before.tasks+wantTasks, before.msgs+wantMsgs)
	}
	auditVerify(t, home)
	if !alive(d.cmd.Process.Pid) {
		t.Fatal("daemon died")
	}
}

// rowCount counts tasks and messages.
type rowCount struct{ tasks, msgs int }

// countRows counts every task and message through the operator routes,
// paging 1000 at a time.
func countRows(t *testing.T, c *http.Client) rowCount {
	t.Helper()
	var out rowCount
	for _, kind := range []string{"tasks", "messages"} {
		before := ""
		for {
			p := "/v1/operator/" + kind + "?limit=1000"
			if before != "" {
				p += "&before=" + url.QueryEscape(before)
			}
			r := apiDo(t, c, "GET", p, "", nil)
			if r.status != 200 {
				t.Fatalf("GET %s: %d %s", p, r.status, r.body)
			}
			items, _ := r.data[kind].([]any)
			if kind == "tasks" {
				out.tasks += len(items)
			} else {
				out.msgs += len(items)
			}
			if len(items) == 0 {
				break
			}
			last := items[len(items)-1].(map[string]any)
			if kind == "tasks" {
				before = last["task_id"].(string)
			} else {
				before = last["message_id"].(string)
			}
		}
	}
	return out
}

// rawStatus writes one raw request and returns the answer's status.
func rawStatus(t *testing.T, home, req string) int {
	t.Helper()
	status, _ := rawAnswer(t, home, req)
	return status
}

// rawAnswer writes one raw request and returns the answer's status and
// body.
func rawAnswer(t *testing.T, home, req string) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("unix", sockPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body
}

// slowClient sends a request's header one byte a second and reports an
// error unless the daemon cuts the connection within its header deadline
// (socketapi.DefaultReadHeaderTimeout, 5 s) while serving others meanwhile.
func slowClient(home string) error {
	conn, err := net.Dial("unix", sockPath(home))
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		_, _ = io.Copy(io.Discard, conn) // returns when the daemon closes it
	}()
	req := "POST /v1/messages HTTP/1.1\r\nHost: relay\r\nX-Relay-Agent: claude\r\n"
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	c := apiClient(home)
	for i := 0; ; i++ {
		select {
		case <-cut:
			if el := time.Since(start); el > 12*time.Second {
				return fmt.Errorf("slow client cut after %v, want about 5 s", el)
			}
			return nil
		case <-tick.C:
		}
		if i >= 20 {
			return fmt.Errorf("a client sending one byte a second was not cut after %v", time.Since(start))
		}
		if i < len(req) {
			_, _ = conn.Write([]byte{req[i]})
		}
		// Others are served meanwhile.
		t0 := time.Now()
		if r, err := apiTry(c, "GET", "/v1/version", "", nil); err != nil || r.status != 200 {
			return fmt.Errorf("version while a slow client holds a connection: %v %d", err, r.status)
		}
		if el := time.Since(t0); el > 5*time.Second {
			return fmt.Errorf("version took %v while a slow client holds a connection", el)
		}
	}
}

func TestReliabilityConnections(t *testing.T) {
	t.Parallel()
	const n = 1000
	if lim := raiseNoFile(t, 4*n); lim < n+512 {
		t.Skipf("RLIMIT_NOFILE allows %d descriptors; %d connections need more (raise the hard limit)", lim, n)
	}
	home := newHome(t, noQuota)
	d := launchDaemonEnv(t, home, fastExit)
	pid := d.cmd.Process.Pid
	c := apiClient(home)
	apiDo(t, c, "GET", "/v1/version", "", nil)
	fds0 := fdCount(t, pid)
	r0 := countRows(t, c)

	// 1,000 connections at once, each sending one message.
	conns := make([]net.Conn, n)
	for i := range conns {
		conn, err := net.Dial("unix", sockPath(home))
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns[i] = conn
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(120 * time.Second))
			body := fmt.Sprintf(`{"to":"codex","body":"conn-%d"}`, i)
			fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: relay\r\nX-Relay-Agent: claude\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				errs <- fmt.Errorf("conn %d: %v", i, err)
				return
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				errs <- fmt.Errorf("conn %d: status %d", i, res.StatusCode)
			}
		}()
	}
	// Meanwhile one more client is served.
	var slowest time.Duration
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		default:
			t0 := time.Now()
			if r := apiDo(t, c, "GET", "/v1/version", "", nil); r.status != 200 {
				t.Errorf("version under load: %d", r.status)
			}
			slowest = max(slowest, time.Since(t0))
			time.Sleep(50 * time.Millisecond)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if slowest > 10*time.Second {
		t.Errorf("another client waited %v under 1,000 connections", slowest)
	}
	if r1 := countRows(t, c); r1.msgs-r0.msgs != n || r1.tasks != r0.tasks {
		t.Errorf("%d messages stored for %d acknowledged sends", r1.msgs-r0.msgs, n)
	}

	// A client that never reads its answers: pipelined listings fill the
	// socket buffers, the daemon's write to it blocks (until its write
	// deadline), and everyone else is served meanwhile.
	hog, err := net.Dial("unix", sockPath(home))
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /v1/operator/messages?limit=1000 HTTP/1.1\r\nHost: relay\r\n\r\n"
	go func() {
		for i := 0; i < 200; i++ {
			if _, err := io.WriteString(hog, req); err != nil {
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	for i := 0; i < 20; i++ {
		t0 := time.Now()
		r := apiDo(t, c, "POST", "/v1/messages", "gemini", []byte(fmt.Sprintf(`{"to":"codex","body":"beside the hog %d"}`, i)))
		if r.status != 200 {
			t.Fatalf("send beside a client that never reads: %d %s", r.status, r.body)
		}
		if el := time.Since(t0); el > 5*time.Second {
			t.Errorf("send took %v beside a client that never reads", el)
		}
	}
	hog.Close()

	// Connections are released: the daemon's descriptors come back down.
	eventually(t, "the daemon's file descriptors back to their level before the load", 30*time.Second, func() bool {
		return fdCount(t, pid) <= fds0+4
	})
	auditVerify(t, home)
}

// rawMCP drives `relay mcp` with raw JSON-RPC lines, so that tests can
// send what no well-behaved MCP client would.
type rawMCP struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startRawMCP(t *testing.T, home, agent string) *rawMCP {
	t.Helper()
	cmd := exec.Command(relayBin, "mcp", "--as", agent, "--home", home, "--no-autostart")
	cmd.Env = append(os.Environ(), fastExit...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &rawMCP{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	r := m.request(t, `"initialize"`, `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile","version":"0"}}`)
	if r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	m.line(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return m
}

func (m *rawMCP) line(t *testing.T, b []byte) {
	t.Helper()
	if _, err := m.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("write to the facade: %v", err)
	}
}

// read returns the next JSON-RPC message with an id (or a null id).
func (m *rawMCP) read(t *testing.T) map[string]any {
	t.Helper()
	for {
		line, err := m.out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read from the facade: %v", err)
		}
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("facade wrote a non-JSON line: %q", clipText(string(line), 200))
		}
		if _, ok := v["id"]; ok {
			return v
		}
	}
}

// call calls a tool that must succeed and returns its text content (the
// daemon's answer as it came); no answer within a minute fails the test.
// The answer is decoded once, into only what is checked: it may be MiBs.
func (m *rawMCP) call(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	m.id++
	m.line(t, mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": m.id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}}))
	type answer struct {
		line []byte
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		for {
			line, err := m.out.ReadBytes('\n')
			if err != nil || bytes.Contains(line, []byte(`"id":`)) {
				ch <- answer{line, err}
				return
			}
		}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer from the facade within a minute", tool)
	}
	if a.err != nil {
		t.Fatalf("%s: read: %v", tool, a.err)
	}
	var res struct {
		ID     int             `json:"id"`
		Error  json.RawMessage `json:"error"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.line, &res); err != nil || res.ID != m.id || res.Error != nil || res.Result.IsError || len(res.Result.Content) != 1 {
		t.Fatalf("%s: answer %q (%v)", tool, clipText(string(a.line), 300), err)
	}
	return res.Result.Content[0].Text
}

// request sends one request with a fresh id and returns its answer.
func (m *rawMCP) request(t *testing.T, method, params string) map[string]any {
	t.Helper()
	m.id++
	m.line(t, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}`, m.id, method, params)))
	r := m.read(t)
	if id, _ := r["id"].(float64); int(id) != m.id {
		t.Fatalf("answer to id %v, want %d: %v", r["id"], m.id, r)
	}
	return r
}

// tool calls a tool with raw argument bytes and returns the tool result's
// structured content and whether it is a tool error.
func (m *rawMCP) tool(t *testing.T, name string, args []byte) (map[string]any, bool) {
	t.Helper()
	r := m.request(t, `"tools/call"`, `{"name":"`+name+`","arguments":`+string(args)+`}`)
	res, ok := r["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no result: %v", name, clipText(fmt.Sprint(r), 300))
	}
	sc, _ := res["structuredContent"].(map[string]any)
	isErr, _ := res["isError"].(bool)
	return sc, isErr
}

func TestReliabilityHostileFacade(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	m := startRawMCP(t, home, "claude")
	dir, linkDir, linkFile, _ := hostileDirs(t)
	before := countRows(t, c)
	var wantTasks, wantMsgs int
	const limit = 262144 // limits.message_bytes, default
	sqlBody := `'); DROP TABLE messages; --`

	type mcpCase struct {
		name        string
		tool        string
		args        []byte
		code        model.Code // "" means success
		tasks, msgs int
		check       func(t *testing.T, sc map[string]any)
	}
	js := func(v any) []byte { return mustJSON(t, v) }
	cases := []mcpCase{
		{name: "body at message_bytes", tool: "send_message", args: js(map[string]any{"to": "codex", "body": strings.Repeat("a", limit)}), msgs: 1},
		{name: "body over message_bytes", tool: "send_message", args: js(map[string]any{"to": "codex", "body": strings.Repeat("a", limit+1)}), code: model.CodePayloadTooLarge},
		{name: "10 MB body", tool: "send_message", args: js(map[string]any{"to": "codex", "body": strings.Repeat("b", 10<<20)}), code: model.CodePayloadTooLarge},
		{name: "prompt over message_bytes", tool: "submit_task", args: js(map[string]any{"target": "codex", "prompt": strings.Repeat("p", limit+1)}), code: model.CodePayloadTooLarge},
		{name: "nesting 1000 in an argument", tool: "send_message", args: []byte(`{"to":"codex","body":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`), code: model.CodeInvalidArgs},
		{name: "invalid UTF-8", tool: "send_message", args: []byte("{\"to\":\"codex\",\"body\":\"\xff\xfe\"}"), code: model.CodeInvalidArgs},
		{name: "escaped NUL is data", tool: "send_message", args: []byte(`{"to":"codex","body":"a\u0000b"}`), msgs: 1,
			check: func(t *testing.T, sc map[string]any) {
				if sc["body"] != "a\x00b" {
					t.Errorf("body %q", sc["body"])
				}
			}},
		{name: "unknown argument", tool: "send_message", args: []byte(`{"to":"codex","body":"x","from":"gemini"}`), code: model.CodeInvalidArgs},
		{name: "duplicate argument", tool: "send_message", args: []byte(`{"to":"codex","to":"gemini","body":"x"}`), code: model.CodeInvalidArgs},
		{name: "wrong type", tool: "send_message", args: []byte(`{"to":"codex","body":{"text":"x"}}`), code: model.CodeInvalidArgs},
		{name: "wrong type in ids", tool: "ack_messages", args: []byte(`{"message_ids":[1,2]}`), code: model.CodeInvalidArgs},
		{name: "negative limit", tool: "check_inbox", args: []byte(`{"limit":-1}`), code: model.CodeInvalidArgs},
		{name: "huge limit", tool: "check_inbox", args: []byte(`{"limit":1e300}`), code: model.CodeInvalidArgs},
		{name: "limit with 100 digits", tool: "list_tasks", args: []byte(`{"limit":` + strings.Repeat("9", 100) + `}`), code: model.CodeInvalidArgs},
		{name: "fractional limit", tool: "list_tasks", args: []byte(`{"limit":2.5}`), code: model.CodeInvalidArgs},
		{name: "SQL stored verbatim", tool: "send_message", args: js(map[string]any{"to": "codex", "body": sqlBody, "context_id": "x' OR 1=1 --"}), msgs: 1,
			check: func(t *testing.T, sc map[string]any) {
				if sc["body"] != sqlBody || sc["context_id"] != "x' OR 1=1 --" {
					t.Errorf("stored %v", sc)
				}
			}},
		{name: "SQL in a task id", tool: "get_task", args: js(map[string]any{"task_id": "T-1' OR '1'='1"}), code: model.CodeNotFound},
		{name: "relative cwd", tool: "submit_task", args: js(map[string]any{"target": "codex", "prompt": "x", "cwd": "sub/dir"}), code: model.CodeInvalidCwd},
		{name: "cwd through ..", tool: "submit_task", args: js(map[string]any{"target": "codex", "prompt": "x", "cwd": dir + "/.."}), code: model.CodeInvalidCwd},
		{name: "cwd symlink to a file", tool: "submit_task", args: js(map[string]any{"target": "codex", "prompt": "x", "cwd": linkFile}), code: model.CodeInvalidCwd},
		{name: "cwd symlink to a directory", tool: "submit_task", args: js(map[string]any{"target": "codex", "prompt": "x", "mission_id": "M-1", "lease_id": "S-1", "cwd": linkDir}),
			tasks: 1, msgs: 1, check: func(t *testing.T, sc map[string]any) {
				if sc["cwd"] != nil && sc["cwd"] != dir { // get_task shows no cwd; the operator view does
					t.Errorf("cwd %v", sc["cwd"])
				}
				id, _ := sc["task_id"].(string)
				if r := taskEnded(t, c, id); r.str("cwd") != dir || r.str("state") != "blocked" { // no adapter here
					t.Errorf("task %s", r.body)
				}
			}},
		{name: "relative artifact URI", tool: "send_message", args: []byte(`{"to":"codex","body":"x","artifacts":[{"uri":"./notes.md"}]}`), code: model.CodeInvalidArgs},
		{name: "control characters in a task id", tool: "cancel_task", args: []byte(`{"task_id":"T-\u0001\n\u001b[2J"}`), code: model.CodeNotFound},
		{name: "control characters in message ids", tool: "ack_messages", args: []byte(`{"message_ids":["\u0000","MSG-\r\n"]}`), code: model.CodeNotFound},
		// One reading only, in every argument, nested ones
		// included.
		{name: "lone surrogate in a body", tool: "send_message", args: []byte(`{"to":"codex","body":"\ud800"}`), code: model.CodeInvalidArgs},
		{name: "lone low surrogate in a prompt", tool: "submit_task", args: []byte(`{"target":"codex","prompt":"\udc00"}`), code: model.CodeInvalidArgs},
		{name: "high surrogate before a non-low one", tool: "send_message", args: []byte(`{"to":"codex","body":"x\ud83d\u0041"}`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in an artifact", tool: "send_message", args: []byte(`{"to":"codex","body":"x","artifacts":[{"uri":"file:///a","media_type":"\ud800"}]}`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in reference_task_ids", tool: "submit_task", args: []byte(`{"target":"codex","prompt":"x","reference_task_ids":["\ud800"]}`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in message ids", tool: "ack_messages", args: []byte(`{"message_ids":["\udc00"]}`), code: model.CodeInvalidArgs},
		{name: "lone surrogate in a task id", tool: "get_task", args: []byte(`{"task_id":"T-\ud800"}`), code: model.CodeInvalidArgs},
		{name: "invalid UTF-8 in an artifact", tool: "send_message", args: []byte("{\"to\":\"codex\",\"body\":\"x\",\"artifacts\":[{\"uri\":\"file:///\xc3\x28\"}]}"), code: model.CodeInvalidArgs},
		{name: "duplicate key in an artifact", tool: "send_message", args: []byte(`{"to":"codex","body":"x","artifacts":[{"uri":"file:///a","uri":"file:///b"}]}`), code: model.CodeInvalidArgs},
		{name: "keys differing only in case in an artifact", tool: "submit_task", args: []byte(`{"target":"codex","prompt":"x","artifacts":[{"uri":"file:///a","URI":"file:///b"}]}`), code: model.CodeInvalidArgs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r0 := countRows(t, c)
			sc, isErr := m.tool(t, tc.tool, tc.args)
			if tc.code == "" {
				if isErr {
					t.Fatalf("tool error %v", sc)
				}
			} else if !isErr || sc["code"] != string(tc.code) || sc["message"] == "" || sc["hint"] == "" {
				t.Fatalf("isError=%v %v, want %s", isErr, clipText(fmt.Sprint(sc), 300), tc.code)
			}
			if tc.check != nil {
				tc.check(t, sc)
			}
			if r1 := countRows(t, c); r1.tasks-r0.tasks != tc.tasks || r1.msgs-r0.msgs != tc.msgs {
				t.Errorf("rows changed by %d tasks, %d messages; want %d, %d", r1.tasks-r0.tasks, r1.msgs-r0.msgs, tc.tasks, tc.msgs)
			}
			if sc, isErr := m.tool(t, "list_agents", []byte(`{}`)); isErr {
				t.Fatalf("facade stopped serving: %v", sc)
			}
		})
		wantTasks += tc.tasks
		wantMsgs += tc.msgs
	}

	// Frames that are not JSON-RPC at all get a JSON-RPC parse error (or,
	// for a number no float64 holds, mcp-go's invalid request); the facade
	// goes on serving.
	for name, frame := range map[string]string{
		"limit beyond float64": `{"jsonrpc":"2.0","id":904,"method":"tools/call","params":{"name":"check_inbox","arguments":{"limit":1e309}}}`,
		"nesting depth 10000": `{"jsonrpc":"2.0","id":900,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"codex","body":` +
			strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}}`,
		"raw NUL byte":  "{\"jsonrpc\":\"2.0\",\"id\":901,\"method\":\"tools/call\",\"params\":{\"name\":\"send_message\",\"arguments\":{\"to\":\"codex\",\"body\":\"a\x00b\"}}}",
		"not JSON":      `{"jsonrpc":"2.0","id":902,` + "\x01\x02",
		"truncated 1MB": `{"jsonrpc":"2.0","id":903,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"codex","body":"` + strings.Repeat("z", 1<<20),
		// One reading of the frame too: a second name, a
		// name in other case or a second arguments would pick what runs.
		"tool name twice":         `{"jsonrpc":"2.0","id":905,"method":"tools/call","params":{"name":"list_agents","name":"send_message","arguments":{"to":"codex","body":"smuggled"}}}`,
		"tool name in other case": `{"jsonrpc":"2.0","id":906,"method":"tools/call","params":{"name":"list_agents","NAME":"send_message","arguments":{"to":"codex","body":"smuggled"}}}`,
		"arguments twice":         `{"jsonrpc":"2.0","id":907,"method":"tools/call","params":{"name":"send_message","arguments":{"to":"codex","body":"\ud800"},"arguments":{"to":"codex","body":"smuggled"}}}`,
		"method twice":            `{"jsonrpc":"2.0","id":908,"method":"tools/list","method":"tools/call","params":{"name":"send_message","arguments":{"to":"codex","body":"smuggled"}}}`,
	} {
		r0 := countRows(t, c)
		m.line(t, []byte(frame))
		r := m.read(t)
		e, _ := r["error"].(map[string]any)
		if code, _ := e["code"].(float64); code != -32700 && code != -32600 {
			t.Errorf("%s: answer %v, want a JSON-RPC parse error (-32700) or invalid request (-32600)", name, clipText(fmt.Sprint(r), 300))
		}
		if sc, isErr := m.tool(t, "list_agents", []byte(`{}`)); isErr {
			t.Fatalf("%s: facade stopped serving: %v", name, sc)
		}
		if r1 := countRows(t, c); r1 != r0 {
			t.Errorf("%s: rows changed %+v → %+v", name, r0, r1)
		}
	}
	// The operator's own view agrees, through the CLI.
	if ts, ms := len(allTasks(t, home)), len(allMessages(t, home)); ts != before.tasks+wantTasks || ms != before.msgs+wantMsgs {
		t.Errorf("relay tasks/messages list: %d tasks, %d messages; want %d, %d", ts, ms, before.tasks+wantTasks, before.msgs+wantMsgs)
	}
	auditVerify(t, home)
}
