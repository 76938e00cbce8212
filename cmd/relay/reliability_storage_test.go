package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/model"
)

// Storage faults: the daemon refuses to start, with a
// clear message and a hint and a non-zero exit, on a home it cannot write,
// a database that is not one, or a database another process holds; and it
// never deletes or rewrites what it cannot use (every file's bytes are
// compared before and after). Then paging: the listings walk any number
// of rows with --limit and --before, with no duplicate and no gap.

// nobody is the uid the read-only cases run the daemon as when the tests
// run as root (root ignores permission bits).
const nobody = 65534

// usedHome returns a home whose daemon ran once and stored a message and
// a task, stopped.
func usedHome(t *testing.T) string {
	t.Helper()
	home := newHome(t, "")
	d := launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	if r := apiDo(t, c, "POST", "/v1/messages", "claude", []byte(`{"to":"codex","body":"keep me"}`)); r.status != 200 {
		t.Fatalf("send: %s", r.body)
	}
	r := apiDo(t, c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{"target": "codex", "prompt": "keep me too", "cwd": home}))
	if r.status != 200 {
		t.Fatalf("submit: %s", r.body)
	}
	taskEnded(t, c, r.str("task_id")) // rejected by its gates, with its notice to claude
	d.stop(t, syscall.SIGTERM)
	return home
}

// refuseStart runs `relay daemon` on home (as uid when non-zero) and
// requires it to exit non-zero within 30 s, naming the problem and a hint.
func refuseStart(t *testing.T, home string, uid int, mention string) (stderr string, took time.Duration) {
	t.Helper()
	cmd := exec.Command(relayBin, "daemon", "--home", home)
	cmd.Env = append(os.Environ(), fastExit...)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the daemon did not refuse to start within 30 s:\n%s", errb.String())
	}
	took = time.Since(t0)
	out := errb.String()
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("the daemon exited 0:\n%s", out)
	}
	if !strings.Contains(out, mention) || !strings.Contains(out, "\nhint: ") || strings.Contains(out, "internal error") {
		t.Fatalf("exit %d; want a message naming %q and a hint:\n%s", cmd.ProcessState.ExitCode(), mention, out)
	}
	return out, took
}

// sameFiles fails unless every file under dir is as before, byte for byte;
// added lists files that may have been added (and nothing else may be).
// The daemon's own lock file (it writes its pid there) and log are not
// data and may change.
func sameFiles(t *testing.T, dir string, before map[string][]byte, added ...string) {
	t.Helper()
	after := fileBytes(t, dir)
	for _, own := range []string{"relay.lock", "relay.log"} {
		delete(before, own)
		delete(after, own)
	}
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			t.Errorf("%s was deleted", name)
		} else if !bytes.Equal(a, b) {
			t.Errorf("%s was rewritten (%d bytes → %d)", name, len(b), len(a))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok && !slices.Contains(added, name) {
			t.Errorf("%s was created", name)
		}
	}
}

// runnableBy lets uid reach path and run the relay binary: every parent
// directory gets o+x.
func runnableBy(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// chownTree gives dir and everything in it to uid.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// asOwner prepares home so that the daemon runs as its owner without
// root's override of permissions: the current user, or nobody under root.
func asOwner(t *testing.T, home string) int {
	t.Helper()
	if os.Getuid() != 0 {
		return 0
	}
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := probe.Run(); err != nil {
		t.Skipf("running as root, and cannot run a process as uid %d to make permissions apply: %v", nobody, err)
	}
	runnableBy(t, home+"/x", relayBin)
	chownTree(t, home, nobody)
	t.Cleanup(func() { chownTree(t, home, 0) })
	return nobody
}

func TestReliabilityStorageFaults(t *testing.T) {
	t.Parallel()

	t.Run("read-only home", func(t *testing.T) {
		t.Parallel()
		home := usedHome(t)
		uid := asOwner(t, home)
		if err := os.Chmod(home, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(home, 0o700) })
		before := fileBytes(t, home)
		out, _ := refuseStart(t, home, uid, "readonly database")
		sameFiles(t, home, before)
		if fi, _ := os.Stat(home); fi.Mode().Perm() != 0o500 {
			t.Errorf("the daemon changed the read-only home's mode to %v", fi.Mode().Perm())
		}
		t.Logf("read-only home:\n%s", out)
	})

	t.Run("read-only database", func(t *testing.T) {
		t.Parallel()
		home := usedHome(t)
		uid := asOwner(t, home)
		if err := os.Chmod(dbPath(home), 0o400); err != nil {
			t.Fatal(err)
		}
		before := fileBytes(t, home)
		out, _ := refuseStart(t, home, uid, "cannot write to "+dbPath(home))
		// The lock and log files are the daemon's own; the database is not
		// touched.
		sameFiles(t, home, before, "relay.db-wal", "relay.db-shm")
		for _, f := range []string{"relay.db-wal", "relay.db-shm"} {
			if b, err := os.ReadFile(filepath.Join(home, f)); err == nil && f == "relay.db-wal" && len(b) > 0 {
				t.Errorf("%s holds %d bytes written to a read-only database", f, len(b))
			}
		}
		t.Logf("read-only database:\n%s", out)
	})

	t.Run("garbage database", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(6, 6))
		for name, head := range map[string][]byte{
			"random bytes":                 nil,
			"a valid header, then garbage": []byte("SQLite format 3\x00"),
		} {
			home := newHome(t, "")
			garbage := make([]byte, 64<<10)
			for i := range garbage {
				garbage[i] = byte(rng.UintN(256))
			}
			copy(garbage, head)
			if err := os.WriteFile(dbPath(home), garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			before := fileBytes(t, home)
			out, _ := refuseStart(t, home, 0, "not a SQLite database")
			if !strings.Contains(out, "database_corrupt") || !strings.Contains(out, "backup") {
				t.Errorf("%s: want database_corrupt and a hint to restore a backup:\n%s", name, out)
			}
			sameFiles(t, home, before)
			// The operator's commands that open the file refuse it too.
			_, errOut, code := cli(t, home, "audit", "verify")
			if code == 0 || !strings.Contains(errOut, "not a SQLite database") || !strings.Contains(errOut, "hint:") {
				t.Errorf("%s: audit verify: exit %d\n%s", name, code, errOut)
			}
			sameFiles(t, home, before)
			t.Logf("%s:\n%s", name, out)
		}
	})

	t.Run("database held in an exclusive transaction", func(t *testing.T) {
		t.Parallel()
		home := usedHome(t)
		before := fileBytes(t, home)
		db, err := sql.Open("sqlite", "file:"+dbPath(home))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx := context.Background()
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
		out, took := refuseStart(t, home, 0, "database is locked")
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, home, before, "relay.db-wal", "relay.db-shm")
		t.Logf("refused after %v:\n%s", took.Round(time.Millisecond), out)
		// Once the other process lets go, the daemon starts on the same data.
		launchDaemonEnv(t, home, fastExit)
		if ms := allMessages(t, home); len(ms) != 2 || ms[len(ms)-1].Body != "keep me" {
			t.Errorf("messages after the lock was released: %+v", ms)
		}
	})

	t.Run("home locked by another daemon", func(t *testing.T) {
		t.Parallel()
		home := usedHome(t)
		fd, err := unix.Open(filepath.Join(home, "relay.lock"), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		before := fileBytes(t, home)
		refuseStart(t, home, 0, "another relay daemon is running")
		sameFiles(t, home, before)
	})
}

// pageAll walks a listing with `relay <kind> list --limit n --before ID`
// and returns the IDs in the order listed.
func pageAll(t *testing.T, home, kind string, n int) (ids []string, pages int) {
	t.Helper()
	before := ""
	for {
		args := []string{kind, "list", "--limit", fmt.Sprint(n)}
		if before != "" {
			args = append(args, "--before", before)
		}
		var page struct {
			Tasks    []model.Task
			Messages []model.Message
		}
		cliJSON(t, home, &page, args...)
		pages++
		var got []string
		for _, x := range page.Tasks {
			got = append(got, x.ID)
		}
		for _, x := range page.Messages {
			got = append(got, x.ID)
		}
		if len(got) > n {
			t.Fatalf("a page of --limit %d held %d rows", n, len(got))
		}
		ids = append(ids, got...)
		if len(got) < n {
			return ids, pages
		}
		before = got[len(got)-1]
	}
}

// dbIDs lists a table's IDs, newest first, straight from the database.
func dbIDs(t *testing.T, home, table string) []string {
	t.Helper()
	db := openRO(t, home)
	rows, err := db.Query(`SELECT id FROM ` + table + ` ORDER BY seq DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// Paging over more rows than one page holds: every row exactly once,
// newest first, for page sizes that do and do not divide the total. CI
// stores 1,200 messages and 250 tasks (each task also leaves its submitter
// a message: 1,450 messages); RELAY_LONG=1 stores 20,000 and 3,000.
func TestReliabilityPaging(t *testing.T) {
	t.Parallel()
	nMsgs, nTasks := sized(1200, 20_000), sized(250, 3000)
	home := newHome(t, noQuota)
	launchDaemonEnv(t, home, fastExit)
	t0 := time.Now()
	seedMessages(t, home, nMsgs, 4, "page")
	// No mission: each task is persisted, audited and rejected at once.
	pipeline(t, home, nTasks, 4, func(ci, i int) (string, string, string) {
		return "gemini", "/v1/tasks", fmt.Sprintf(`{"target":"codex","prompt":"page %d-%d","cwd":%q}`, ci, i, home)
	})
	// A submit answers before its gates run: the rejections, and the
	// notices they leave the submitter, follow. Page once all are stored.
	eventually(t, "every task rejected and its notice stored", 60*time.Second, func() bool {
		return len(dbIDs(t, home, "messages")) == nMsgs+nTasks
	})
	t.Logf("%d messages and %d tasks stored in %v", nMsgs, nTasks, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	for _, tc := range []struct {
		kind, table string
		limits      []int
	}{
		{"messages", "messages", []int{1000, 257}},
		{"tasks", "tasks", []int{1000, 97}},
	} {
		want := dbIDs(t, home, tc.table)
		for _, n := range tc.limits {
			got, pages := pageAll(t, home, tc.kind, n)
			if !slices.Equal(got, want) {
				seen := map[string]int{}
				for _, id := range got {
					seen[id]++
				}
				dups, gaps := 0, 0
				for _, id := range want {
					if seen[id] == 0 {
						gaps++
					}
				}
				for _, k := range seen {
					if k > 1 {
						dups++
					}
				}
				t.Errorf("%s --limit %d: %d rows in %d pages, %d stored: %d duplicates, %d missing", tc.kind, n, len(got), pages, len(want), dups, gaps)
			}
		}
	}
	t.Logf("paged in %v", time.Since(t0).Round(time.Millisecond))
	// Out-of-range limits are refused, with the usage exit code.
	for _, args := range [][]string{{"messages", "list", "--limit", "-1"}, {"tasks", "list", "--limit", "1001"}, {"messages", "list", "--limit", "99999999999999999999"}} {
		if _, errOut, code := cli(t, home, args...); code != 2 || !strings.Contains(errOut, "invalid_args") && !strings.Contains(errOut, "invalid value") {
			t.Errorf("relay %v: exit %d\n%s", args, code, errOut)
		}
	}
}

// fsizeLimit is a file-size limit headroom bytes above the largest file in
// home now.
func fsizeLimit(t *testing.T, home string, headroom int64) uint64 {
	t.Helper()
	var most int64
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			most = max(most, fi.Size())
		}
	}
	return uint64(most + headroom)
}

// TestReliabilityStorageFull stops the running daemon's writes the way a
// full disk does, with a file-size limit (RLIMIT_FSIZE, set on it with
// prlimit(2); the Go runtime ignores SIGXFSZ, so the write fails with EFBIG
// instead of killing it), which runs anywhere without root or a filesystem
// to fill. (A full disk itself, ENOSPC, is SQLITE_FULL:
// persistence/db_test.go TestStorageFullRefusesWritesKeepsReadsAndRecovers.)
// Writes are refused with storage_full and a hint, on the socket API and
// through MCP; reads go on; nothing acknowledged is lost and nothing
// refused is stored; once the limit is lifted (space is back) writes work
// again without a restart.
func TestReliabilityStorageFull(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	d := launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	send := func(body string) apiResp {
		return apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": body}))
	}
	pad := strings.Repeat("x", 3000)
	acked := map[string]string{} // message ID → body
	for i := range 5 {
		body := fmt.Sprintf("before %d %s", i, pad)
		r := send(body)
		if r.status != 200 {
			t.Fatalf("send: %s", r.body)
		}
		acked[r.str("message_id")] = body
	}
	codex := startFacade(t, home, "codex")

	pid := d.cmd.Process.Pid
	var was unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &was); err != nil {
		t.Fatal(err)
	}
	limit := fsizeLimit(t, home, 256<<10)
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: was.Max}, nil); err != nil {
		t.Skipf("cannot set the daemon's file-size limit: %v", err)
	}
	var refused apiResp
	var refusedBodies []string
	for i := range 200 {
		body := fmt.Sprintf("during %d %s", i, pad)
		r := send(body)
		if r.status == 200 {
			acked[r.str("message_id")] = body
			continue
		}
		refused, refusedBodies = r, append(refusedBodies, body)
		break
	}
	if refused.status == 0 {
		t.Fatalf("200 messages of 3 KB were stored under a file-size limit of %d bytes", limit)
	}
	if refused.status != 507 || refused.code() != "storage_full" || refused.str("hint") == "" || !strings.Contains(refused.str("hint"), home) {
		t.Fatalf("a write on a full disk: HTTP %d %s; want 507 storage_full with a hint naming the home\n%s", refused.status, refused.body, d.stderr.String())
	}
	t.Logf("refused at %d bytes: %s", limit, refused.body)
	// Again, and through MCP: the same answer, and the daemon still runs.
	body := "still full " + pad
	if r := send(body); r.code() != "storage_full" {
		t.Fatalf("a second write on a full disk: HTTP %d %s", r.status, r.body)
	}
	refusedBodies = append(refusedBodies, body)
	mustCode(t, codex, "send_message", map[string]any{"to": "claude", "body": "from codex " + pad}, "storage_full")
	refusedBodies = append(refusedBodies, "from codex "+pad)

	// Reads go on: the operator's listing (over the socket) and an MCP
	// listing see every acknowledged message.
	listed := allMessages(t, home)
	if len(listed) != len(acked) {
		t.Errorf("listed %d messages on a full disk, %d were acknowledged", len(listed), len(acked))
	}
	mustOK(t, codex, "list_tasks", map[string]any{})
	// An inbox with unread messages marks them read: a write, refused
	// alike, and nothing is marked.
	mustCode(t, codex, "check_inbox", map[string]any{}, "storage_full")
	if r := apiDo(t, c, "GET", "/v1/agents", "claude", nil); r.status != 200 {
		t.Errorf("list agents on a full disk: HTTP %d %s", r.status, r.body)
	}

	// Space is back: writes work on the same daemon.
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &was, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := fmt.Sprintf("after %d", i)
		r := send(body)
		if r.status != 200 {
			t.Fatalf("a write once there is room again: HTTP %d %s", r.status, r.body)
		}
		acked[r.str("message_id")] = body
	}
	mustOK(t, codex, "send_message", map[string]any{"to": "claude", "body": "codex again"})
	if in := mustOK(t, codex, "check_inbox", map[string]any{"limit": 100}); len(in.data["messages"].([]any)) != len(acked) {
		t.Errorf("codex's inbox holds %d messages once there is room, want the %d sent to it", len(in.data["messages"].([]any)), len(acked))
	}

	// Stopped: exactly the acknowledged messages are stored, none of the
	// refused ones, and the audit chain verifies.
	d.stop(t, syscall.SIGTERM)
	rows, err := openRO(t, home).Query(`SELECT id, body FROM messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]string{}
	for rows.Next() {
		var id, b string
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		stored[id] = b
	}
	for id, b := range acked {
		if stored[id] != b {
			t.Errorf("acknowledged message %s is not stored as sent", id)
		}
	}
	for _, b := range refusedBodies {
		for id, s := range stored {
			if s == b {
				t.Errorf("refused message stored as %s", id)
			}
		}
	}
	if len(stored) != len(acked)+1 { // and codex's last one
		t.Errorf("%d messages stored, want the %d acknowledged", len(stored), len(acked)+1)
	}
	auditVerify(t, home)
}

// filledHome returns a stopped home whose database holds n messages of
// 2 KB, so that its middle pages are data.
func filledHome(t *testing.T, n int) string {
	t.Helper()
	home := newHome(t, "")
	d := launchDaemonEnv(t, home, fastExit)
	c := apiClient(home)
	pad := strings.Repeat("y", 2000)
	for i := range n {
		if r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{"to": "codex", "body": fmt.Sprint(i, pad)})); r.status != 200 {
			t.Fatalf("send: %s", r.body)
		}
	}
	d.stop(t, syscall.SIGTERM)
	return home
}

// overwritePages writes seeded random bytes over n pages of 4 KiB a third
// of the way into the file at p.
func overwritePages(t *testing.T, p string, n int) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	pages := fi.Size() / 4096
	if pages < int64(3*n) {
		t.Fatalf("%s has %d pages, too few to overwrite %d in the middle", p, pages, n)
	}
	garbage := make([]byte, n*4096)
	rng := rand.New(rand.NewPCG(12, 3))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(garbage, pages/3*4096); err != nil {
		t.Fatal(err)
	}
}

// A corrupt database is refused at start, with database_corrupt, the file
// named and what to do (restore a backup, or salvage with .recover), and
// left as it is. The check (PRAGMA quick_check) runs when the last stop
// was not clean — no stop at all, or the file changed since — and is
// skipped after a clean stop of an untouched file.
func TestReliabilityCorruptDatabase(t *testing.T) {
	t.Parallel()

	t.Run("pages overwritten after a clean stop", func(t *testing.T) {
		t.Parallel()
		home := filledHome(t, 150)
		overwritePages(t, dbPath(home), 4)
		before := fileBytes(t, home)
		out, _ := refuseStart(t, home, 0, dbPath(home))
		for _, want := range []string{"database_corrupt", "backup", ".recover"} {
			if !strings.Contains(out, want) {
				t.Errorf("the refusal does not say %q:\n%s", want, out)
			}
		}
		sameFiles(t, home, before)
		t.Logf("corrupt pages:\n%s", out)
	})

	t.Run("pages overwritten after a crash", func(t *testing.T) {
		t.Parallel()
		home := filledHome(t, 150)
		d := launchDaemonEnv(t, home, fastExit)
		if r := apiDo(t, apiClient(home), "POST", "/v1/messages", "claude", []byte(`{"to":"codex","body":"in the WAL"}`)); r.status != 200 {
			t.Fatalf("send: %s", r.body)
		}
		d.stop(t, syscall.SIGKILL)
		overwritePages(t, dbPath(home), 4)
		before := fileBytes(t, home)
		if len(before["relay.db-wal"]) == 0 {
			t.Fatal("the crash left no WAL")
		}
		out, _ := refuseStart(t, home, 0, dbPath(home))
		if !strings.Contains(out, "database_corrupt") {
			t.Errorf("the refusal is not database_corrupt:\n%s", out)
		}
		// The database and its WAL are as the crash left them: the WAL
		// was read, not copied into the file. (The -shm index is SQLite's
		// scratch space, rebuilt from the WAL by every first reader.)
		after := fileBytes(t, home)
		for _, f := range []string{"relay.db", "relay.db-wal"} {
			if !bytes.Equal(before[f], after[f]) {
				t.Errorf("%s was rewritten", f)
			}
		}
	})

	t.Run("checked after a crash, not after a clean stop", func(t *testing.T) {
		t.Parallel()
		const checked = "checked the database"
		home := filledHome(t, 20)
		d := launchDaemonEnv(t, home, fastExit)
		if strings.Contains(d.stderr.String(), checked) {
			t.Errorf("the database was checked after a clean stop:\n%s", d.stderr.String())
		}
		c := apiClient(home)
		if r := apiDo(t, c, "POST", "/v1/messages", "claude", []byte(`{"to":"codex","body":"before the crash"}`)); r.status != 200 {
			t.Fatalf("send: %s", r.body)
		}
		d.stop(t, syscall.SIGKILL)
		d = launchDaemonEnv(t, home, fastExit)
		if !strings.Contains(d.stderr.String(), checked) {
			t.Errorf("the database was not checked after a crash:\n%s", d.stderr.String())
		}
		if ms := allMessages(t, home); len(ms) != 21 {
			t.Errorf("%d messages after the crash, want 21", len(ms))
		}
		d.stop(t, syscall.SIGTERM)
		// A change to the file after a clean stop (here a harmless one:
		// the same bytes written back) is a reason to check too.
		b, err := os.ReadFile(dbPath(home))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dbPath(home), b, 0o600); err != nil {
			t.Fatal(err)
		}
		d = launchDaemonEnv(t, home, fastExit)
		if !strings.Contains(d.stderr.String(), checked) {
			t.Errorf("the database was not checked after it changed behind a stopped daemon:\n%s", d.stderr.String())
		}
	})
}
