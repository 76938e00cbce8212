package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// rawFacade is `relay mcp` as a subprocess, spoken to line by line.
type rawFacade struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startRawFacade(t *testing.T, home, agent string) *rawFacade {
	t.Helper()
	cmd := exec.Command(relayBin, "mcp", "--as", agent, "--home", home, "--no-autostart")
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
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	return &rawFacade{t: t, in: in, out: bufio.NewReaderSize(out, 1<<20)}
}

// tasksMeta is the _meta of a modern client's request; with tasks, it
// declares the tasks extension, as an interactive Claude Code does.
func tasksMeta(tasks bool) map[string]any {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps}
}

// call sends a request and returns its answer (result or error object).
func (f *rawFacade) call(method string, params map[string]any) (result, rpcErr map[string]any) {
	f.t.Helper()
	f.id++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": f.id, "method": method, "params": params})
	if _, err := f.in.Write(append(b, '\n')); err != nil {
		f.t.Fatal(err)
	}
	line, err := f.out.ReadBytes('\n')
	if err != nil {
		f.t.Fatalf("%s: no answer: %v", method, err)
	}
	var m struct {
		ID     int            `json:"id"`
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.ID != f.id {
		f.t.Fatalf("%s: answer %s (%v)", method, line, err)
	}
	return m.Result, m.Error
}

// submit calls submit_task with the tasks extension declared or not.
func (f *rawFacade) submit(tasks bool, args map[string]any) map[string]any {
	f.t.Helper()
	res, e := f.call("tools/call", map[string]any{"name": "submit_task", "arguments": args, "_meta": tasksMeta(tasks)})
	if e != nil {
		f.t.Fatalf("submit_task: %v", e)
	}
	return res
}

// awaitTask polls tasks/get until the MCP task leaves working.
func (f *rawFacade) awaitTask(id string) map[string]any {
	f.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, e := f.call("tasks/get", map[string]any{"taskId": id, "_meta": tasksMeta(true)})
		if e != nil {
			f.t.Fatalf("tasks/get %s: %v", id, e)
		}
		if res["resultType"] != "complete" || res["taskId"] != id || res["pollIntervalMs"] != float64(1000) {
			f.t.Fatalf("tasks/get %s: %v", id, res)
		}
		if res["status"] != "working" {
			return res
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("task %s still working: %v", id, res)
		}
	}
}

// The MCP tasks extension round trip, through the real facade and daemon:
// a submit_task that declares the extension is answered with a handle
// bound to the relay task, tasks/get answers from the daemon until the
// task ends and then carries get_task's result (a failure too, with
// isError), tasks/cancel cancels the caller's own task, and the audit log
// holds the MCP task's life. A call or a request that does not declare the
// extension gets what it got before, or the extension's error.
func TestMCPTasksRoundTrip(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	claude := startRawFacade(t, home, "claude")

	res, e := claude.call("server/discover", map[string]any{"_meta": tasksMeta(true)})
	if ext, _ := res["capabilities"].(map[string]any)["extensions"].(map[string]any); e != nil || ext["io.modelcontextprotocol/tasks"] == nil {
		t.Fatalf("server/discover: %v %v: want the tasks extension among the capabilities", res, e)
	}
	task := func(prompt string) map[string]any {
		return map[string]any{"target": "codex", "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1"}
	}

	// Completed: the handle, then the result in a turn of the client's own.
	h := claude.submit(true, task("echo the answer is 42"))
	id, _ := h["taskId"].(string)
	if h["resultType"] != "task" || !strings.HasPrefix(id, "T-") || h["status"] != "working" || h["pollIntervalMs"] != float64(1000) ||
		h["createdAt"] == nil || h["lastUpdatedAt"] == nil {
		t.Fatalf("submit_task with the extension: %v, want a task handle", h)
	}
	done := claude.awaitTask(id)
	result, _ := done["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	if done["status"] != "completed" || result["isError"] == true || sc["task_id"] != id || sc["state"] != "completed" ||
		!strings.Contains(fmt.Sprint(sc["result"]), "the answer is 42") {
		t.Fatalf("tasks/get at the end: %v", done)
	}
	// Durable: the MCP task is the relay task, which another facade of the
	// same agent (after a restart) still answers.
	again := startRawFacade(t, home, "claude").awaitTask(id)
	if again["status"] != "completed" {
		t.Errorf("a new facade's tasks/get: %v", again)
	}

	// A failed relay task is a completed MCP task whose result says so.
	failedID := claude.submit(true, task("error"))["taskId"].(string)
	failed := claude.awaitTask(failedID)
	fr, _ := failed["result"].(map[string]any)
	fsc, _ := fr["structuredContent"].(map[string]any)
	if failed["status"] != "completed" || fr["isError"] != true || fsc["state"] != "failed" || fsc["code"] == "" {
		t.Errorf("a failed task: %v", failed)
	}

	// tasks/cancel cancels the submitter's own task, once its agent runs.
	hangID := claude.submit(true, task("hang"))["taskId"].(string)
	if res, e := claude.call("tasks/cancel", map[string]any{"taskId": hangID, "_meta": tasksMeta(true)}); e != nil || res["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v %v", res, e)
	}
	if c := claude.awaitTask(hangID); c["status"] != "cancelled" || c["result"] != nil {
		t.Errorf("a canceled task: %v", c)
	}

	// Refusals: not the extension's call, no such task, not this agent's.
	plain := claude.submit(false, task("echo plain"))
	if plain["resultType"] == "task" || plain["structuredContent"].(map[string]any)["task_id"] == nil {
		t.Errorf("submit_task without the extension: %v, want today's answer", plain)
	}
	if _, e := claude.call("tasks/get", map[string]any{"taskId": id, "_meta": tasksMeta(false)}); e == nil || e["code"] != float64(-32021) {
		t.Errorf("tasks/get without the extension: %v, want -32021", e)
	}
	for _, who := range []*rawFacade{claude, startRawFacade(t, home, "gemini")} {
		missing := "T-01M8TW0Z482RJ20C9E05GWRCWC"
		if who != claude {
			missing = id // claude's task: gemini is neither its caller nor its target
		}
		if _, e := who.call("tasks/get", map[string]any{"taskId": missing, "_meta": tasksMeta(true)}); e == nil || e["code"] != float64(-32602) {
			t.Errorf("tasks/get of %s: %v, want -32602", missing, e)
		}
	}
	if _, e := startRawFacade(t, home, "codex").call("tasks/cancel", map[string]any{"taskId": hangID, "_meta": tasksMeta(true)}); e == nil || e["code"] != float64(-32602) {
		t.Errorf("the target's tasks/cancel: %v, want -32602 (the MCP task is the submitter's)", e)
	}

	// The audit log holds the MCP tasks' life, each step once: the second
	// facade's tasks/get delivered the same end again, which changes nothing.
	for _, c := range []struct {
		kind, task string
		want       int
	}{{"mcp.task.created", id, 1}, {"mcp.task.delivered", id, 1}, {"mcp.task.created", failedID, 1}, {"mcp.task.delivered", failedID, 1},
		{"mcp.task.cancel_requested", hangID, 1}, {"mcp.task.delivered", hangID, 1}} {
		if n := countAudit(t, home, c.kind, c.task); n != c.want {
			t.Errorf("%s rows of %s: %d, want %d", c.kind, c.task, n, c.want)
		}
	}
}

// auditCount counts the whole audit log of home.
func auditCount(t *testing.T, home string) int {
	t.Helper()
	var n int
	if err := openRO(t, home).QueryRow(`SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A call that changes nothing writes no audit row, through the real facade
// and daemon: 2,000 tasks/cancel of an ended MCP task, 200 retries of an
// extension submit with one idempotency_key (one task's rows, one
// mcp.task.created), and tasks/get of a plain task, by its target or its
// caller, which never was an MCP task (no mcp.task.delivered). Before, each
// cancel wrote an mcp.task.cancel_requested row (2,000 calls, 2,000 rows),
// each retry an mcp.task.created, and the target's read a delivery.
func TestMCPTasksAuditPerEffect(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	claude := startRawFacade(t, home, "claude")
	args := map[string]any{"target": "codex", "prompt": "echo once", "mission_id": "M-1", "lease_id": "S-1", "idempotency_key": "k-1"}

	id, _ := claude.submit(true, args)["taskId"].(string)
	if done := claude.awaitTask(id); done["status"] != "completed" {
		t.Fatalf("task %s: %v", id, done)
	}
	settled := auditCount(t, home)
	for i := 1; i < 200; i++ {
		if again, _ := claude.submit(true, args)["taskId"].(string); again != id {
			t.Fatalf("retry %d: task %q, want %s", i, again, id)
		}
	}
	if n := auditCount(t, home) - settled; n != 0 {
		t.Errorf("199 idempotent retries added %d audit rows, want 0", n)
	}
	if n := countAudit(t, home, "mcp.task.created", id); n != 1 {
		t.Errorf("mcp.task.created rows of %s: %d, want 1", id, n)
	}

	before := auditCount(t, home)
	for i := range 2000 {
		if res, e := claude.call("tasks/cancel", map[string]any{"taskId": id, "_meta": tasksMeta(true)}); e != nil || res["resultType"] != "complete" {
			t.Fatalf("tasks/cancel %d of an ended task: %v %v", i, res, e)
		}
	}
	if n := auditCount(t, home) - before; n > 3 {
		t.Errorf("2,000 tasks/cancel of an ended task added %d audit rows, want at most 3", n)
	}
	if n := countAudit(t, home, "mcp.task.cancel_requested", id); n != 0 {
		t.Errorf("mcp.task.cancel_requested rows of the ended %s: %d, want 0", id, n)
	}

	// A plain task: its target's tasks/get is a read, and so is its
	// caller's, since no handle was ever given for it.
	plain := claude.submit(false, map[string]any{"target": "codex", "prompt": "echo plain", "mission_id": "M-1", "lease_id": "S-1"})
	plainID, _ := plain["structuredContent"].(map[string]any)["task_id"].(string)
	if claude.awaitTask(plainID)["status"] != "completed" {
		t.Fatalf("plain task %s did not complete", plainID)
	}
	if res := startRawFacade(t, home, "codex").awaitTask(plainID); res["status"] != "completed" {
		t.Fatalf("the target's tasks/get: %v", res)
	}
	if n := countAudit(t, home, "mcp.task.delivered", plainID); n != 0 {
		t.Errorf("mcp.task.delivered rows of the plain task %s: %d, want 0", plainID, n)
	}
	auditVerify(t, home)
}
