package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/model"
)

// Disk use, the trust round's finding: one facade stored 400 messages of
// 256 KiB for one recipient in 20 s (about 18 GB an hour), and nothing
// was ever deleted. Now a recipient's unacknowledged messages are bounded
// ([limits] inbox_messages, inbox_bytes), what is done with is pruned
// ([retention], relay prune), and a disk that fills keeps room for the
// writes that empty it ([storage] min_free_bytes).

// noQuota is the config of a test whose backlog for one recipient is
// larger than its inbox quota would hold (paging, memory, connections):
// what it tests is not the quota.
const noQuota = "[limits]\ninbox_messages = 0\ninbox_bytes = 0\n"

// bigBody is a message body of the largest default size
// (limits.message_bytes), numbered so that no two are the same.
func bigBody(i int) string {
	head := fmt.Sprintf("%08d ", i)
	return head + strings.Repeat("x", model.DefaultMessageBytes-len(head))
}

// messagesTo counts the messages stored for agent, and their body bytes,
// straight from the database.
func messagesTo(t *testing.T, home, agent string) (n, bytes int64) {
	t.Helper()
	err := openRO(t, home).QueryRow(`SELECT count(*), IFNULL(sum(length(CAST(body AS BLOB))), 0) FROM messages WHERE to_agent = ?`, agent).Scan(&n, &bytes)
	if err != nil {
		t.Fatal(err)
	}
	return n, bytes
}

// The reproduction, through the real facade and daemon: claude sends
// codex, who never reads, message after message of 256 KiB. The
// recipient's byte quota stops it: exactly as many as fit are stored, the
// rest are refused with recipient_inbox_full and a hint, nothing refused
// is stored, and the database stays near the quota's size. A message to
// another recipient still goes through. Once codex reads and acknowledges
// some, as many more fit again. RELAY_LONG=1 runs the full size
// with the default quota (400 messages against 64 MiB: 256 stored); CI a
// 1 MiB quota (6 messages: 4 stored), since a message of 256 KiB takes
// about a second through a facade built with the race detector.
func TestReliabilityInboxQuota(t *testing.T) {
	t.Parallel()
	// The whole quota is one sender's here (inbox_sender_share = 100):
	// this is the recipient's quota; TestReliabilityInboxShare is the
	// senders' shares of it.
	n, quota, cfg := 6, int64(1<<20), "[limits]\ninbox_bytes = 1048576\ninbox_sender_share = 100\n"
	if relayLong() {
		n, quota, cfg = 400, 64<<20, "[limits]\ninbox_sender_share = 100\n"
	}
	home := newHome(t, cfg)
	launchDaemonEnv(t, home, nil)
	claude := startFacade(t, home, "claude")
	fit := int(quota / model.DefaultMessageBytes)
	t0 := time.Now()
	var stored []string
	var refusal toolResult
	for i := range n {
		r := callTool(t, claude, "send_message", map[string]any{"to": "codex", "body": bigBody(i)})
		switch {
		case !r.isError:
			stored = append(stored, r.str("message_id"))
		case r.code() == "recipient_inbox_full":
			if refusal.data == nil {
				refusal = r
			}
		default:
			t.Fatalf("message %d: %s", i, r.text)
		}
	}
	t.Logf("%d messages of 256 KiB sent in %v: %d stored", n, time.Since(t0).Round(time.Millisecond), len(stored))
	if len(stored) != fit {
		t.Fatalf("%d of %d messages of 256 KiB stored under a quota of %d bytes, want %d", len(stored), n, quota, fit)
	}
	if msg, hint := refusal.str("message"), refusal.str("hint"); !strings.Contains(msg, "inbox_bytes") ||
		!strings.Contains(msg, "not stored") || !strings.Contains(hint, "ack_messages") {
		t.Errorf("the refusal does not say why and what to do: %s", refusal.text)
	}
	count, bytes := messagesTo(t, home, "codex")
	if count != int64(fit) || bytes != int64(fit)*model.DefaultMessageBytes {
		t.Errorf("the database holds %d messages (%d bytes) for codex, want the %d accepted", count, bytes, fit)
	}
	var size int64
	for _, f := range []string{"relay.db", "relay.db-wal"} {
		if fi, err := os.Stat(filepath.Join(home, f)); err == nil {
			size += fi.Size()
		}
	}
	if limit := quota + 16<<20; size > limit {
		t.Errorf("the database and its WAL take %d bytes after the refusals, more than the quota and 16 MiB (%d)", size, limit)
	}
	// Another recipient has its own quota.
	mustOK(t, claude, "send_message", map[string]any{"to": "gemini", "body": "still reachable"})
	// codex reads two and acknowledges them: two more fit, not three.
	codex := startFacade(t, home, "codex")
	in := mustOK(t, codex, "check_inbox", map[string]any{"limit": 2})
	var ids []any
	for _, m := range in.data["messages"].([]any) {
		ids = append(ids, m.(map[string]any)["message_id"])
	}
	if len(ids) != 2 {
		t.Fatalf("check_inbox returned %d messages", len(ids))
	}
	mustCode(t, claude, "send_message", map[string]any{"to": "codex", "body": "read is not acknowledged"}, "recipient_inbox_full")
	mustOK(t, codex, "ack_messages", map[string]any{"message_ids": ids})
	for i := range 2 {
		mustOK(t, claude, "send_message", map[string]any{"to": "codex", "body": bigBody(n + i)})
	}
	// Full again, to the byte: not one more byte fits.
	mustCode(t, claude, "send_message", map[string]any{"to": "codex", "body": "x"}, "recipient_inbox_full")
	auditVerify(t, home)
}

// A submitter whose own inbox is full still learns how its task ended:
// the relay's notice is stored anyway (it commits with the task's end),
// in its short form, and get_task has the rest.
func TestReliabilityEndNoticeReachesAFullInbox(t *testing.T) {
	t.Parallel()
	home := newHome(t, "[limits]\ninbox_messages = 2\ninbox_sender_share = 100\n")
	launchDaemonEnv(t, home, nil)
	codex, claude := startFacade(t, home, "codex"), startFacade(t, home, "claude")
	for i := range 2 {
		mustOK(t, codex, "send_message", map[string]any{"to": "claude", "body": fmt.Sprint("filler ", i)})
	}
	mustCode(t, codex, "send_message", map[string]any{"to": "claude", "body": "one too many"}, "recipient_inbox_full")
	// No mission: the task is rejected at once, and its notice is due.
	task := mustOK(t, claude, "submit_task", map[string]any{"target": "codex", "prompt": "anything", "cwd": home})
	id := task.str("task_id")
	final := toolTaskEnded(t, claude, id)
	if final.str("state") != "rejected" || final.str("code") != "missing_mission_id" {
		t.Fatalf("task %s ended %s/%s", id, final.str("state"), final.str("code"))
	}
	var notice map[string]any
	eventually(t, "the notice of "+id, 30*time.Second, func() bool {
		in := mustOK(t, claude, "check_inbox", map[string]any{"unread_only": false, "limit": 10})
		for _, m := range in.data["messages"].([]any) {
			if mm := m.(map[string]any); mm["from"] == "relay" {
				notice = mm
			}
		}
		return notice != nil
	})
	if body, _ := notice["body"].(string); !strings.Contains(body, id) || !strings.Contains(body, "rejected (missing_mission_id)") ||
		!strings.Contains(body, "get_task "+id) {
		t.Errorf("the notice to a full inbox: %q; want the task, its state and code, and get_task", body)
	}
}

// pruneJSON runs relay prune with args and --json.
func pruneJSON(t *testing.T, home string, args ...string) model.PruneReport {
	t.Helper()
	var rep model.PruneReport
	cliJSON(t, home, &rep, append([]string{"prune"}, args...)...)
	return rep
}

// auditRows returns the data of the audit rows of kind, oldest first.
func auditRows(t *testing.T, home, kind string) []map[string]string {
	t.Helper()
	rows, err := openRO(t, home).Query(`SELECT data FROM audit_log WHERE kind = ? ORDER BY seq`, kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		var s string
		var d map[string]string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// The retention policy on the real daemon: `relay prune` (dry run first,
// then with periods shorter than the config's) removes exactly the
// acknowledged messages and ended tasks, with the ended tasks' agent
// logs, and never a message not acknowledged or a task still working;
// every batch is audited and `relay audit verify` passes after it. At
// start the daemon applies [retention] by itself.
func TestReliabilityRetentionPrunes(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", "[retention]\nacked_messages = \"1s\"\nterminal_tasks = \"1s\"\n"))
	d := launchDaemonEnv(t, home, nil)
	c := apiClient(home)
	cwd := t.TempDir()
	done := submitGated(t, c, "echo done", cwd)
	running := submitGated(t, c, "hang until stopped", cwd)
	taskEnded(t, c, done)
	awaitWorking(t, c, running)
	doneLog := filepath.Join(home, "logs", "tasks", done+".log")
	if _, err := os.Stat(doneLog); err != nil {
		t.Fatalf("the completed task has no agent log: %v", err)
	}
	var ids []string
	for i := range 5 {
		r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": fmt.Sprint("m", i)}))
		if r.status != 200 {
			t.Fatalf("send: %s", r.body)
		}
		ids = append(ids, r.str("message_id"))
	}
	// codex acknowledges three; the other two and done's notice (in
	// codex's inbox too) are left unacknowledged.
	if r := apiDo(t, c, "POST", "/v1/inbox/ack", "codex", mustJSON(t, map[string]any{"message_ids": ids[:3]})); r.status != 200 {
		t.Fatalf("ack: %s", r.body)
	}
	// Dry run with the config's periods, once they have passed.
	var dry model.PruneReport
	eventually(t, "the acknowledgements older than a second", 10*time.Second, func() bool {
		dry = pruneJSON(t, home, "--dry-run")
		return dry.AckedMessages.Removed == 3 && dry.TerminalTasks.Removed == 1
	})
	if n, _ := messagesTo(t, home, "codex"); n != 6 {
		t.Fatalf("after a dry run codex has %d messages, want all 6", n)
	}
	out, _, code := cli(t, home, "prune", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove 3") {
		t.Errorf("relay prune --dry-run: exit %d\n%s", code, out)
	}
	rep := pruneJSON(t, home)
	if rep.AckedMessages.Removed != 3 || rep.TerminalTasks.Removed != 1 || rep.More {
		t.Fatalf("relay prune = %+v", rep)
	}
	left := dbIDs(t, home, "messages")
	for _, id := range ids[:3] {
		if slices.Contains(left, id) {
			t.Errorf("acknowledged message %s was kept", id)
		}
	}
	for _, id := range ids[3:] {
		if !slices.Contains(left, id) {
			t.Errorf("unacknowledged message %s was pruned", id)
		}
	}
	if tasks := dbIDs(t, home, "tasks"); !slices.Equal(tasks, []string{running}) {
		t.Errorf("tasks left %v, want only the working one %s", tasks, running)
	}
	if _, err := os.Stat(doneLog); !os.IsNotExist(err) {
		t.Errorf("the pruned task's agent log is still there: %v", err)
	}
	if s := stateOf(t, c, running); s != "working" {
		t.Errorf("the working task is %s after the prune", s)
	}
	rows := auditRows(t, home, "retention.pruned")
	if len(rows) != 2 || rows[0]["trigger"] != "operator" || rows[1]["ids"] != done {
		t.Errorf("retention.pruned audit rows = %v", rows)
	}
	auditVerify(t, home)
	// Nothing more to remove; the daemon's own pass at its next start
	// prunes what has been acknowledged since.
	if again := pruneJSON(t, home); again.AckedMessages.Removed+again.TerminalTasks.Removed != 0 {
		t.Errorf("a second prune removed %+v", again)
	}
	if r := apiDo(t, c, "POST", "/v1/inbox/ack", "codex", mustJSON(t, map[string]any{"message_ids": ids[3:]})); r.status != 200 {
		t.Fatalf("ack: %s", r.body)
	}
	d.stop(t, syscall.SIGTERM) // the working task fails dispatch_interrupted
	// The policy's cutoff is a whole second (a pass keeps up to a second
	// more than the policy): two seconds on, a second's policy covers
	// both.
	time.Sleep(2 * time.Second)
	launchDaemonEnv(t, home, nil)
	eventually(t, "the start pass", 30*time.Second, func() bool {
		rs := auditRows(t, home, "retention.pruned")
		return len(rs) >= 3 && rs[len(rs)-1]["trigger"] == "start"
	})
	eventually(t, "the interrupted task and the acknowledged messages pruned at start", 30*time.Second, func() bool {
		msgs := dbIDs(t, home, "messages")
		return len(dbIDs(t, home, "tasks")) == 0 && !slices.Contains(msgs, ids[3]) && !slices.Contains(msgs, ids[4])
	})
	auditVerify(t, home)
	// Overrides: a negative period is refused before anything is sent.
	if _, errOut, code := cli(t, home, "prune", "--acked-messages", "-1h"); code != 2 || !strings.Contains(errOut, "negative") {
		t.Errorf("relay prune --acked-messages -1h: exit %d\n%s", code, errOut)
	}
}

// mountSmallFS mounts a tmpfs of size bytes at a new directory and returns
// it; it is unmounted at cleanup, after everything registered later. It
// skips the test where mounting is not allowed (not root, or no
// CAP_SYS_ADMIN in this namespace): TestReliabilityStorageFull then
// still covers storage_full, with a file-size limit.
func mountSmallFS(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if os.Geteuid() == 0 || os.Getenv("CI") != "" {
			// As root, and in CI, the test must run: a skip would hide
			// that the full-disk guarantees went untested.
			t.Fatalf("cannot mount a %d-byte tmpfs as uid %d (CI=%q): %v", size, os.Geteuid(), os.Getenv("CI"), err)
		}
		t.Skipf("cannot mount a %d-byte tmpfs here (%v): storage_full on a real full filesystem is not tested; "+
			"TestReliabilityStorageFull covers it with a file-size limit", size, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fsFree is what the filesystem holding dir has free.
func fsFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fillUp writes a file in dir until the filesystem has no room left, and
// returns its path.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{'f'}, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	// The last partial pages too.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return p
}

// readsAnswer fails unless the daemon answers reads: the operator's
// listing, an agent's listing of tasks and of agents.
func readsAnswer(t *testing.T, c *http.Client, home string) {
	t.Helper()
	for _, r := range []struct{ path, agent string }{
		{"/v1/operator/messages?limit=3", ""}, {"/v1/tasks", "claude"}, {"/v1/agents", "claude"},
	} {
		if got := apiDo(t, c, "GET", r.path, r.agent, nil); got.status != 200 {
			t.Errorf("GET %s on a full disk: HTTP %d %s", r.path, got.status, got.body)
		}
	}
	if _, _, code := cli(t, home, "tasks", "list"); code != 0 {
		t.Errorf("relay tasks list on a full disk: exit %d", code)
	}
}

// storage_full on a real filesystem that fills: a 40 MiB tmpfs holds the
// home, and another program's file takes all but 20 MiB of it. The daemon
// keeps 16 MiB free ([storage] min_free_bytes, the least it takes):
// sending 256 KiB messages ends in storage_full with a hint, while there
// is room left for what empties the disk. Then reads answer, the
// recipient acknowledges everything (the writes that drain the store
// still work), and `relay prune` removes the messages and gives the space
// back to the filesystem, after which sends work again on the same
// daemon. Then, with the reserve off, the other program takes the disk to
// the last byte: writes fail storage_full (SQLite's own SQLITE_FULL),
// reads still answer, and once its file is removed writes work again,
// without a restart. Nothing refused is stored, every accepted message
// is, and the database passes SQLite's integrity check and `relay audit
// verify`.
func TestReliabilityStorageFullOnASmallFilesystem(t *testing.T) {
	t.Parallel()
	const reserve = 16 << 20 // the least the config takes
	fs := mountSmallFS(t, 40<<20)
	home := filepath.Join(fs, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[limits]\ninbox_bytes = 0\n\n[storage]\nmin_free_bytes = %d\n", reserve)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(fs, "other")
	if err := os.WriteFile(other, bytes.Repeat([]byte{'o'}, int(fsFree(t, fs)-20<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := launchDaemonEnv(t, home, nil)
	c := apiClient(home)
	accepted := map[string]string{}
	send := func(i int) apiResp {
		body := bigBody(i)
		r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": body}))
		if r.status == 200 {
			accepted[r.str("message_id")] = body
		}
		return r
	}
	var refused apiResp
	i := 0
	for ; i < 400 && refused.status == 0; i++ {
		if r := send(i); r.status != 200 {
			refused = r
		}
	}
	if refused.code() != "storage_full" || refused.status != 507 || !strings.Contains(refused.str("hint"), "relay prune") ||
		!strings.Contains(refused.str("message"), "min_free_bytes") {
		t.Fatalf("filling a 32 MiB disk: message %d got HTTP %d %s; want 507 storage_full under the reserve, with relay prune in the hint",
			i, refused.status, refused.body)
	}
	t.Logf("refused after %d messages with %d KiB free: %s", len(accepted), fsFree(t, fs)>>10, refused.str("message"))
	if free := fsFree(t, fs); free < reserve/2 {
		t.Errorf("only %d bytes free when the reserve of %d refused the first write", free, reserve)
	}
	// Reads answer; the writes that drain the store work.
	readsAnswer(t, c, home)
	var ids []string
	for id := range accepted {
		ids = append(ids, id)
	}
	if r := apiDo(t, c, "POST", "/v1/inbox/ack", "codex", mustJSON(t, map[string]any{"message_ids": ids})); r.status != 200 {
		t.Fatalf("acknowledging on the full disk: HTTP %d %s", r.status, r.body)
	}
	// No send is checked between the acks and the prune: the acks rewrite
	// pages, and the checkpoint after them leaves free pages inside the
	// database, which the reserve rightly counts as room, or not, by
	// timing (a check here failed twice in CI-like runs).
	// relay prune frees the room at once, with a period shorter than the
	// config's (acknowledged over a second ago).
	time.Sleep(1100 * time.Millisecond)
	var rep model.PruneReport
	eventually(t, "relay prune removing the acknowledged messages", 10*time.Second, func() bool {
		r := pruneJSON(t, home, "--acked-messages", "1s")
		rep.AckedMessages.Removed += r.AckedMessages.Removed
		rep.ReclaimedBytes += r.ReclaimedBytes
		return rep.AckedMessages.Removed == len(accepted)
	})
	if rep.ReclaimedBytes < int64(len(accepted))*model.DefaultMessageBytes*9/10 {
		t.Errorf("relay prune gave back %d bytes for %d messages of 256 KiB", rep.ReclaimedBytes, len(accepted))
	}
	eventually(t, "the space back on the filesystem", 10*time.Second, func() bool { return fsFree(t, fs) > reserve+1<<20 })
	for j := range 3 {
		if r := send(i + 1 + j); r.status != 200 {
			t.Fatalf("a send after relay prune: HTTP %d %s", r.status, r.body)
		}
	}

	// Without the reserve, another program that takes the rest of the
	// disk makes SQLite itself find no room (ENOSPC). (With it, sends
	// would be refused before SQLite tried, as above.)
	d.stop(t, syscall.SIGTERM)
	cfg = "[limits]\ninbox_bytes = 0\n\n[storage]\nmin_free_bytes = 0\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d = launchDaemonEnv(t, home, nil)
	filler := fillUp(t, fs)
	defer os.Remove(other)
	var hard apiResp
	for j := range 50 {
		if r := send(i + 10 + j); r.status != 200 {
			hard = r
			break
		}
	}
	if hard.code() != "storage_full" || !strings.Contains(hard.str("message"), "disk is full") {
		t.Fatalf("a send on a disk filled to the last byte: HTTP %d %s", hard.status, hard.body)
	}
	readsAnswer(t, c, home)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, "writes once the other program's file is gone", 10*time.Second, func() bool {
		return send(i+100).status == 200
	})

	d.stop(t, syscall.SIGTERM)
	rows, err := openRO(t, home).Query(`SELECT id, body FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]bool{}
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
		if want, ok := accepted[id]; !ok || want != body {
			t.Errorf("message %s is stored but was not accepted as sent", id)
		}
	}
	for id := range accepted {
		if !stored[id] && !slices.Contains(ids, id) { // the pruned ones are gone on purpose
			t.Errorf("accepted message %s is not stored", id)
		}
	}
	var check string
	if err := openRO(t, home).QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
	auditVerify(t, home)
}

// One sender cannot fill another agent's inbox for everyone: the real
// daemon with the default quota (1,000 messages, a share of 25% a
// sender). claude sends gemini 1,001 one-byte messages: its share, 250,
// is stored and the rest refused with recipient_inbox_full naming the
// share; codex's message to gemini is still stored, and so is the relay's
// notice of a task gemini submits, in full; gemini's check_inbox and
// `relay messages list` name claude as at its share. Before the shares,
// claude's first 1,000 were stored and codex's message refused.
func TestReliabilityInboxShare(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemonEnv(t, home, nil)
	c := apiClient(home)
	stored, refused := 0, apiResp{}
	for i := range 1001 {
		r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "gemini", "body": "x"}))
		switch {
		case r.status < 300:
			stored++
		case r.code() == "recipient_inbox_full":
			refused = r
		default:
			t.Fatalf("message %d: %d %s", i, r.status, r.body)
		}
	}
	if stored != 250 {
		t.Errorf("claude stored %d of 1,001 messages to gemini, want its share, 250", stored)
	}
	if !strings.Contains(refused.str("message"), "claude's share") || !strings.Contains(refused.str("hint"), "other senders still can") {
		t.Errorf("the refusal does not name the share: %s", refused.body)
	}
	if r := apiDo(t, c, "POST", "/v1/messages", "codex", mustJSON(t, map[string]any{"to": "gemini", "body": "from codex"})); r.status >= 300 {
		t.Fatalf("codex's message to gemini after claude's 1,001: %d %s", r.status, r.body)
	}
	// The relay's notice: gemini's task without a mission is rejected at
	// once, and its notice (the full one) reaches gemini.
	gemini := startFacade(t, home, "gemini")
	id := mustOK(t, gemini, "submit_task", map[string]any{"target": "codex", "prompt": "anything", "cwd": home}).str("task_id")
	toolTaskEnded(t, gemini, id)
	eventually(t, "the notice of "+id, 30*time.Second, func() bool {
		var n int
		_ = openRO(t, home).QueryRow(`SELECT count(*) FROM messages WHERE from_agent = 'relay' AND to_agent = 'gemini' AND body LIKE '%' || ? || '%'`, id).Scan(&n)
		return n == 1
	})
	in := mustOK(t, gemini, "check_inbox", map[string]any{"limit": 1})
	over, _ := in.data["over_share"].([]any)
	if len(over) != 1 || over[0].(map[string]any)["from"] != "claude" || over[0].(map[string]any)["messages"] != float64(250) ||
		over[0].(map[string]any)["share_messages"] != float64(250) {
		t.Errorf("gemini's check_inbox: over_share %v, want claude at 250 of 250", in.data["over_share"])
	}
	var list struct {
		OverShare []model.InboxShare `json:"over_share"`
	}
	cliJSON(t, home, &list, "messages", "list", "--to", "gemini", "--limit", "1")
	if len(list.OverShare) != 1 || list.OverShare[0].From != "claude" || list.OverShare[0].To != "gemini" {
		t.Errorf("relay messages list --json: over_share %+v, want claude → gemini", list.OverShare)
	}
	if out, _, code := cli(t, home, "messages", "list", "--limit", "1"); code != 0 || !strings.Contains(out, "over share: claude has 250 unacknowledged messages") {
		t.Errorf("relay messages list (exit %d) does not name claude as at its share:\n%s", code, out)
	}
	if n, _ := messagesTo(t, home, "gemini"); n != 252 {
		t.Errorf("gemini holds %d messages, want claude's 250, codex's and the notice", n)
	}
	auditVerify(t, home)
}

// The audit log has a retention of its own that keeps the chain
// verifiable: through the real daemon, `relay prune --audit 1s` cuts the
// rows stamped over a second ago behind a checkpoint (recorded in the
// chain as audit.checkpoint), `relay audit verify` passes and says so,
// the rows written since are kept, and the chain still verifies after
// more writes and a restart.
func TestReliabilityAuditRetention(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	d := launchDaemonEnv(t, home, nil)
	c := apiClient(home)
	for i := range 20 {
		apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": fmt.Sprint("old ", i)}))
	}
	before := auditCount(t, home)
	// The cutoff is a whole second (now − 1s, truncated): 2.1 s after the
	// last write, every row written is before it.
	time.Sleep(2100 * time.Millisecond)
	dry := pruneJSON(t, home, "--dry-run", "--audit", "1s")
	if dry.Audit.Removed < 20 || auditCount(t, home) != before {
		t.Fatalf("dry run: %+v, and %d rows left of %d", dry.Audit, auditCount(t, home), before)
	}
	rep := pruneJSON(t, home, "--audit", "1s")
	if rep.Audit.Removed < 20 || rep.Audit.Removed > before {
		t.Fatalf("relay prune --audit 1s cut %d rows of %d", rep.Audit.Removed, before)
	}
	if n := len(auditRows(t, home, "audit.checkpoint")); n < 1 {
		t.Errorf("no audit.checkpoint row in the chain")
	}
	out, _, code := cli(t, home, "audit", "verify")
	if code != 0 || !strings.Contains(out, "audit chain OK") || !strings.Contains(out, "were cut by the audit retention") {
		t.Fatalf("relay audit verify after the cut: exit %d\n%s", code, out)
	}
	for i := range 5 {
		apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": fmt.Sprint("new ", i)}))
	}
	d.stop(t, syscall.SIGTERM)
	launchDaemonEnv(t, home, nil)
	auditVerify(t, home)
}
