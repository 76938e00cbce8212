package persistence

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestOpenAppliesPragmasOnEveryConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sync string
		want int // PRAGMA synchronous reads back as a number
	}{{"", 2}, {"NORMAL", 1}, {"full", 2}} {
		t.Run("sync="+tc.sync, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Synchronous: tc.sync, Readers: 3})

			w, err := db.writer.DB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			checkPragmas(t, w, map[string]string{
				"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000",
				"synchronous": strconv.Itoa(tc.want), "query_only": "0",
			})

			// Hold every reader connection at once, so each one is a
			// distinct pooled connection that the DSN configured.
			var conns []*sql.Conn
			for range 3 {
				c, err := db.reader.DB.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			for _, c := range conns {
				checkPragmas(t, c, map[string]string{
					"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000", "query_only": "1",
				})
				if _, err := c.ExecContext(ctx, `DELETE FROM tasks`); err == nil {
					t.Error("a reader connection accepted a write")
				}
				c.Close()
			}
		})
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Open(ctx, filepath.Join(dir, "a.db"), Options{Synchronous: "OFF"}); err == nil {
		t.Error("synchronous OFF accepted")
	}
	if _, err := Open(ctx, "", Options{}); err == nil {
		t.Error("empty path accepted")
	}
	if _, err := Open(ctx, dir, Options{}); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: err = %v", err)
	}
}

func TestOpenOddPath(t *testing.T) {
	t.Parallel()
	// '?' and '#' would end the path in a naive DSN.
	path := filepath.Join(t.TempDir(), "we?ird #dir", "re%lay.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db := MustOpen(t, path, Options{})
	mustCreate(t, db, newTask("T-1"))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at %s: %v", path, err)
	}
}

func TestOpenGarbageFileIsRefusedAndUntouched(t *testing.T) {
	t.Parallel()
	random := make([]byte, 8192)
	rand.Read(random)
	corrupt := append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xA5}, 8192)...)
	for name, content := range map[string][]byte{
		"random":      random,
		"text":        []byte("not a database, just notes\n"),
		"tiny":        []byte("SQL"),
		"header-only": corrupt,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "relay.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(context.Background(), path, Options{})
			if err == nil {
				db.Close()
				t.Fatal("Open accepted a file that is not a SQLite database")
			}
			if !errors.Is(err, ErrNotDatabase) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q should wrap ErrNotDatabase and name the file", err)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, content) {
				t.Fatalf("file changed (read err %v)", rerr)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("Open left files beside the database: %v", names)
			}
		})
	}
}

func TestOpenEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "relay.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db := MustOpen(t, path, Options{})
	mustCreate(t, db, newTask("T-1"))
}

func TestCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "relay.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := db.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := db.GetTask(context.Background(), "T-1"); err == nil {
		t.Error("GetTask after Close succeeded")
	}
}

// TestReopenKeepsData checks that data is on disk after Close, not only in
// the WAL of a live connection.
func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, db, newTask("T-1"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = MustOpen(t, path, Options{})
	if _, err := db.GetTask(ctx, "T-1"); err != nil {
		t.Fatal(err)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

// TestTwoHandlesWriteConcurrently opens the file twice, as two processes
// would, and writes from both at once: BEGIN IMMEDIATE plus busy_timeout
// must serialize them without a single SQLITE_BUSY, and the audit chain,
// whose head each transaction reads under the write lock, must stay whole.
func TestTwoHandlesWriteConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	a := MustOpen(t, path, Options{})
	b := MustOpen(t, path, Options{})
	var wg sync.WaitGroup
	for h, db := range []*DB{a, b} {
		for g := range 2 {
			wg.Go(func() {
				for i := range 50 {
					id := seqID("T", h*1000+g*100+i)
					if _, _, err := db.CreateTask(ctx, newTask(id)); err != nil {
						t.Errorf("CreateTask(%s): %v", id, err)
						return
					}
					if _, err := db.Transition(ctx, model.Transition{TaskID: id, From: model.StateSubmitted,
						To: model.StateAuthorized, Trigger: model.TriggerAuthorize}); err != nil {
						t.Errorf("Transition(%s): %v", id, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := count(t, a, "tasks", ""); n != 200 {
		t.Errorf("tasks = %d, want 200", n)
	}
	rep, err := b.VerifyAudit(ctx)
	if err != nil || !rep.OK || rep.Rows != 400 {
		t.Fatalf("VerifyAudit = %+v, %v; want OK with 400 rows", rep, err)
	}
}

// checkPragmas reads each pragma on one connection and compares it.
func checkPragmas(t *testing.T, c *sql.Conn, want map[string]string) {
	t.Helper()
	for name, v := range want {
		var got string
		if err := c.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", name, err)
		}
		if !strings.EqualFold(got, v) {
			t.Errorf("PRAGMA %s = %s, want %s", name, got, v)
		}
	}
}

// The database and its WAL and SHM files are owner-only whatever the
// umask: they hold every message, prompt and the audit log. A database a
// looser umask left wider is narrowed at open.
func TestOpenMakesTheFilesOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o002) // a permissive umask; not parallel: the umask is process-wide
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "relay.db")
	db := MustOpen(t, path, Options{})
	if err := db.Audit(context.Background(), model.AuditEvent{At: time.Now(), Kind: "test"}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s is %v, want 0600", when, filepath.Base(p), st.Mode().Perm())
			}
		}
	}
	check("new database")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o664); err != nil {
		t.Fatal(err)
	}
	db = MustOpen(t, path, Options{})
	if err := db.Audit(context.Background(), model.AuditEvent{At: time.Now(), Kind: "test"}); err != nil {
		t.Fatal(err)
	}
	check("reopened after a chmod 0664")
}

// setMaxPages caps the database at n pages on the writer's connection: a
// write that needs one more page fails with SQLITE_FULL, the code SQLite
// gives a write that met a full disk (ENOSPC).
func setMaxPages(t *testing.T, db *DB, n int64) {
	t.Helper()
	if _, err := db.writer.ExecContext(context.Background(), fmt.Sprintf("PRAGMA max_page_count = %d", n)); err != nil {
		t.Fatal(err)
	}
}

// TestStorageFullRefusesWritesKeepsReadsAndRecovers fills the database:
// the write that finds no room is refused with storage_full and a hint,
// nothing of it is stored, everything acknowledged before is read back,
// and once there is room again writes work without reopening.
func TestStorageFullRefusesWritesKeepsReadsAndRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	task := mustCreate(t, db, newTask("T-kept"))
	var pages int64
	if err := db.writer.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	setMaxPages(t, db, pages+4)
	body := strings.Repeat("a body that needs room. ", 80)
	var kept []string
	var full error
	for i := range 1000 {
		m, err := db.CreateMessage(ctx, model.Message{ID: seqID("M", i), From: "codex", To: "claude", Body: body})
		if err != nil {
			full = err
			break
		}
		kept = append(kept, m.ID)
	}
	if full == nil {
		t.Fatal("1,000 messages fitted in a database capped at 4 more pages")
	}
	wantCode(t, full, model.CodeStorageFull)
	var me *model.Error
	if errors.As(full, &me) && (!strings.Contains(me.Hint, db.Path()) || !strings.Contains(me.Message, "not stored")) {
		t.Errorf("storage_full error %+v: want a message saying nothing was stored and a hint naming the file", me)
	}
	if len(kept) == 0 {
		t.Fatal("not one message fitted; the test cap is too tight")
	}
	// The refused write left nothing; what was acknowledged reads back.
	ms, err := db.ListMessages(ctx, model.MessageFilter{Limit: model.MaxPageSize})
	if err != nil {
		t.Fatalf("a read while the disk is full: %v", err)
	}
	if got := messageIDs(ms); len(got) != len(kept) {
		t.Errorf("listed %d messages, %d were acknowledged", len(got), len(kept))
	}
	if _, err := db.GetTask(ctx, task.ID); err != nil {
		t.Errorf("a read while the disk is full: %v", err)
	}
	// Room again: the same write goes through, on the same handle.
	setMaxPages(t, db, 1<<30)
	if _, err := db.CreateMessage(ctx, model.Message{ID: "M-after", From: "codex", To: "claude", Body: body}); err != nil {
		t.Fatalf("a write once there is room again: %v", err)
	}
	if n := count(t, db, "messages", ""); n != len(kept)+1 {
		t.Errorf("%d messages stored, want the %d acknowledged", n, len(kept)+1)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("VerifyAudit = %+v, %v", rep, err)
	}
}

// TestOpenCheckRefusesACorruptDatabaseUntouched: with Check, a database
// whose pages were overwritten is refused with ErrCorrupt naming the file,
// and nothing is changed or left beside it; a sound one opens.
func TestOpenCheckRefusesACorruptDatabaseUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := db.CreateMessage(ctx, model.Message{ID: seqID("M", i), From: "codex", To: "claude", Body: strings.Repeat("b", 2000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sound, err := Open(ctx, path, Options{Check: true})
	if err != nil {
		t.Fatalf("Check refused a sound database: %v", err)
	}
	if err := sound.Close(); err != nil {
		t.Fatal(err)
	}

	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	middle := len(content) / 4096 / 2 * 4096
	for i := middle; i < middle+4*4096; i++ {
		content[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, path, Options{Check: true})
	if err == nil {
		db.Close()
		t.Fatal("Open with Check accepted a database with 4 pages overwritten")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should wrap ErrCorrupt and name the file", err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, content) {
		t.Errorf("the corrupt file changed (read err %v)", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the check left files beside the database: %v", names)
	}
}
