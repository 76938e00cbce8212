package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/mark3labs/mcp-go/client"
)

// Helpers of the reliability tests (reliability_*_test.go): a raw HTTP
// client of the daemon's socket, listings that page through every row,
// and readings of a process's resources from /proc.

// relayLong reports whether the long reliability runs are asked for
// (RELAY_LONG=1): the full sizes the reliability work was measured at,
// instead of CI-sized ones.
func relayLong() bool { return os.Getenv("RELAY_LONG") == "1" }

// sized returns long under RELAY_LONG=1, else short.
func sized(short, long int) int {
	if relayLong() {
		return long
	}
	return short
}

// fastExit is extra environment for the relay processes these tests
// start: a -race build otherwise sleeps a second at every exit (GORACE
// atexit_sleep_ms) to flush reports, which would make each CLI call and
// each daemon stop a second longer. Race reports are still printed and
// still fail the process.
var fastExit = []string{"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}

// apiClient is an HTTP client of the daemon's Unix socket, speaking the
// socket API directly (no facade in between).
func apiClient(home string) *http.Client {
	sock := sockPath(home)
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
			MaxIdleConnsPerHost: 64,
			DisableCompression:  true,
		},
	}
}

// apiResp is one socket API answer.
type apiResp struct {
	status int
	body   []byte
	data   map[string]any
}

func (r apiResp) code() string { s, _ := r.data["code"].(string); return s }

func (r apiResp) str(k string) string { s, _ := r.data[k].(string); return s }

// apiDo sends one request as agent (none when "") and decodes the JSON
// answer; a transport error fails the test.
func apiDo(t testing.TB, c *http.Client, method, path, agent string, body []byte) apiResp {
	t.Helper()
	r, err := apiTry(c, method, path, agent, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func apiTry(c *http.Client, method, path, agent string, body []byte) (apiResp, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://relay"+path, rd)
	if err != nil {
		return apiResp{}, err
	}
	if agent != "" {
		req.Header.Set("X-Relay-Agent", agent)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		return apiResp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return apiResp{}, err
	}
	out := apiResp{status: res.StatusCode, body: b}
	if err := json.Unmarshal(b, &out.data); err != nil {
		return out, fmt.Errorf("answer is not a JSON object (status %d): %q", res.StatusCode, clipText(string(b), 200))
	}
	return out, nil
}

// mustJSON marshals v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// allMessages pages through every message with `relay messages list
// --limit 1000 --before ID`, as an operator would, newest first.
func allMessages(t *testing.T, home string) []model.Message {
	t.Helper()
	var out []model.Message
	before := ""
	for {
		var page struct{ Messages []model.Message }
		args := []string{"messages", "list", "--limit", "1000"}
		if before != "" {
			args = append(args, "--before", before)
		}
		cliJSON(t, home, &page, args...)
		out = append(out, page.Messages...)
		if len(page.Messages) == 0 {
			return out
		}
		before = page.Messages[len(page.Messages)-1].ID
	}
}

// allTasks pages through every task with `relay tasks list`, newest first.
func allTasks(t *testing.T, home string) []model.Task {
	t.Helper()
	var out []model.Task
	before := ""
	for {
		var page struct{ Tasks []model.Task }
		args := []string{"tasks", "list", "--limit", "1000"}
		if before != "" {
			args = append(args, "--before", before)
		}
		cliJSON(t, home, &page, args...)
		out = append(out, page.Tasks...)
		if len(page.Tasks) == 0 {
			return out
		}
		before = page.Tasks[len(page.Tasks)-1].ID
	}
}

// auditVerify fails the test unless `relay audit verify` passes.
func auditVerify(t *testing.T, home string) {
	t.Helper()
	if out, errOut, code := cli(t, home, "audit", "verify"); code != 0 || !strings.Contains(out, "audit chain OK") {
		t.Fatalf("relay audit verify: exit %d\n%s%s", code, out, errOut)
	}
}

// openRO opens the home's database read-only, as an auditor would.
func openRO(t testing.TB, home string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "relay.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// procStatus reads VmRSS (in KiB) and Threads from /proc/<pid>/status.
func procStatus(t testing.TB, pid int) (rssKiB, threads int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "VmRSS":
			rssKiB = n
		case "Threads":
			threads = n
		}
	}
	return rssKiB, threads
}

// fdCount counts the open file descriptors of pid.
func fdCount(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// raiseNoFile raises this process's soft RLIMIT_NOFILE to at least n (up
// to the hard limit) and reports the soft limit in force.
func raiseNoFile(t testing.TB, n uint64) uint64 {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur < n {
		rl.Cur = min(n, rl.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Logf("raise RLIMIT_NOFILE: %v", err)
		}
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	return rl.Cur
}

// fileBytes reads every regular file under dir, by path relative to it.
func fileBytes(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// submitGated submits a task from codex to claude with a mission and a
// lease (so that its gates pass with an allowing authority) over the
// socket API, and returns its id.
func submitGated(t *testing.T, c *http.Client, prompt, cwd string) string {
	t.Helper()
	r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
		"target": "claude", "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
	if r.status != 200 || r.str("task_id") == "" {
		t.Fatalf("submit %q: %d %s", prompt, r.status, r.body)
	}
	return r.str("task_id")
}

// stateOf is a task's state, as its submitter codex sees it.
func stateOf(t *testing.T, c *http.Client, id string) string {
	t.Helper()
	return apiDo(t, c, "GET", "/v1/tasks/"+id, "codex", nil).str("state")
}

// awaitWorking waits for a task of codex's to be working.
func awaitWorking(t *testing.T, c *http.Client, id string) {
	t.Helper()
	eventually(t, "task "+id+" working", 60*time.Second, func() bool { return stateOf(t, c, id) == "working" })
}

// taskEnded reads task id through the operator route until it is in a
// terminal state (a submit answers before the gates run) and returns that
// answer.
func taskEnded(t *testing.T, c *http.Client, id string) apiResp {
	t.Helper()
	var r apiResp
	eventually(t, "task "+id+" ended", 60*time.Second, func() bool {
		r = apiDo(t, c, "GET", "/v1/operator/tasks/"+url.PathEscape(id), "", nil)
		if r.status != 200 {
			t.Fatalf("GET task %s: %d %s", id, r.status, r.body)
		}
		return model.State(r.str("state")).Terminal()
	})
	return r
}

// toolTaskEnded calls get_task until task id is in a terminal state (a
// submit answers before the gates run) and returns that answer.
func toolTaskEnded(t *testing.T, c *client.Client, id string) toolResult {
	t.Helper()
	var final toolResult
	eventually(t, "task "+id+" ended", 60*time.Second, func() bool {
		final = mustOK(t, c, "get_task", map[string]any{"task_id": id})
		return model.State(final.str("state")).Terminal()
	})
	return final
}
