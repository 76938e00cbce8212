package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The operator's way out works on a disk filled by any caller's means,
// on a real 24 MiB filesystem (a tmpfs the test mounts; skipped, saying
// why, where mounting is not allowed). claude fills it with messages to
// codex until the 16 MiB reserve refuses them (storage_full), then tries
// to grow the audit log instead: 500 tasks/cancel of its ended MCP task,
// 200 retries of that task's submit (one idempotency_key), 300
// connections of one process and a new task. None of that adds more
// than a few rows (before, each cancel wrote a row, past the reserve).
// Then the way out: claude's cancel of its working task answers and is
// audited, the victim codex reads its inbox and get_task through a new
// facade, acknowledges everything, and `relay prune` gives the room back,
// after which sends work again on the same daemon; the audit chain
// verifies.
func TestReliabilityFullDiskWayOut(t *testing.T) {
	t.Parallel()
	const reserve = 16 << 20 // the least the config takes
	fs := mountSmallFS(t, 24<<20)
	home := filepath.Join(fs, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fullConfig(t, "allow-guarded", fmt.Sprintf("[limits]\ninbox_bytes = 0\n\n[storage]\nmin_free_bytes = %d\n", reserve))
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	launchDaemon(t, home)
	c := apiClient(home)
	claude := startRawFacade(t, home, "claude")
	task := func(prompt, key string) map[string]any {
		a := map[string]any{"target": "codex", "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1"}
		if key != "" {
			a["idempotency_key"] = key
		}
		return a
	}
	doneID, _ := claude.submit(true, task("echo before the disk fills", "k-done"))["taskId"].(string)
	if claude.awaitTask(doneID)["status"] != "completed" {
		t.Fatalf("task %s did not complete", doneID)
	}
	hangID, _ := claude.submit(true, task("hang", ""))["taskId"].(string)
	eventually(t, "task "+hangID+" working", 30*time.Second, func() bool { return stateOf(t, c, hangID) == "working" })

	// Fill the disk up to the reserve with messages.
	var ids []string
	var refused apiResp
	for i := 0; i < 200 && refused.status == 0; i++ {
		r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": bigBody(i)}))
		if r.status == 200 {
			ids = append(ids, r.str("message_id"))
		} else {
			refused = r
		}
	}
	if refused.code() != "storage_full" {
		t.Fatalf("filling the disk: HTTP %d %s, want storage_full", refused.status, refused.body)
	}
	t.Logf("storage_full after %d messages of 256 KiB, %d KiB free", len(ids), fsFree(t, fs)>>10)

	// The audit flood: nothing it does changes anything.
	before := auditCount(t, home)
	for i := range 500 {
		if res, e := claude.call("tasks/cancel", map[string]any{"taskId": doneID, "_meta": tasksMeta(true)}); e != nil || res["resultType"] != "complete" {
			t.Fatalf("tasks/cancel %d of an ended task on a full disk: %v %v", i, res, e)
		}
	}
	for i := range 200 {
		if again, _ := claude.submit(true, task("echo before the disk fills", "k-done"))["taskId"].(string); again != doneID {
			t.Fatalf("retry %d on a full disk: task %q, want %s", i, again, doneID)
		}
	}
	for range 300 {
		apiDo(t, c, "POST", "/v1/connections", "claude", mustJSON(t, map[string]any{"kind": "mcp"}))
	}
	if r := apiDo(t, c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{"target": "codex", "prompt": "a new task", "mission_id": "M-1", "lease_id": "S-1", "cwd": home})); r.code() != "storage_full" {
		t.Errorf("a new task on a full disk: HTTP %d %s, want storage_full", r.status, r.body)
	}
	if n := auditCount(t, home) - before; n > 3 {
		t.Errorf("the flood added %d audit rows on a full disk, want at most 3", n)
	}

	// The way out: a cancel, the victim's reads and acknowledgements.
	if res, e := claude.call("tasks/cancel", map[string]any{"taskId": hangID, "_meta": tasksMeta(true)}); e != nil || res["resultType"] != "complete" {
		t.Fatalf("tasks/cancel of a working task on a full disk: %v %v", res, e)
	}
	if st := stateOf(t, c, hangID); st != "canceled" {
		t.Errorf("task %s is %s after its cancel, want canceled", hangID, st)
	}
	if n := countAudit(t, home, "mcp.task.cancel_requested", hangID); n != 1 {
		t.Errorf("the cancel of %s left %d audit rows, want 1", hangID, n)
	}
	codex := startFacade(t, home, "codex")
	in := mustOK(t, codex, "check_inbox", map[string]any{"limit": 5})
	if ms, _ := in.data["messages"].([]any); len(ms) == 0 {
		t.Fatalf("codex's check_inbox on a full disk: %s", in.text)
	}
	if got := mustOK(t, codex, "get_task", map[string]any{"task_id": doneID}); got.str("state") != "completed" {
		t.Errorf("codex's get_task on a full disk: %s", got.text)
	}
	for start := 0; start < len(ids); start += 100 {
		chunk := ids[start:min(start+100, len(ids))]
		mustOK(t, codex, "ack_messages", map[string]any{"message_ids": chunk})
	}
	// relay prune frees the room (acknowledged over a second ago).
	time.Sleep(1100 * time.Millisecond)
	removed := 0
	eventually(t, "relay prune removing the acknowledged messages", 20*time.Second, func() bool {
		removed += pruneJSON(t, home, "--acked-messages", "1s").AckedMessages.Removed
		return removed == len(ids)
	})
	eventually(t, "the space back on the filesystem", 10*time.Second, func() bool { return fsFree(t, fs) > reserve+1<<20 })
	if r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": bigBody(999)})); r.status != 200 {
		t.Fatalf("a send after relay prune: HTTP %d %s", r.status, r.body)
	}
	auditVerify(t, home)
	if out, _, code := cli(t, home, "audit", "verify"); code != 0 || !strings.Contains(strings.ToLower(out), "ok") {
		t.Errorf("relay audit verify: exit %d\n%s", code, out)
	}
}
