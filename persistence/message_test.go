package persistence

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// send stores a message from → to or fails the test.
func send(t testing.TB, db *DB, id, from, to string) model.Message {
	t.Helper()
	m, err := db.CreateMessage(context.Background(), model.Message{ID: id, From: from, To: to, Body: "body of " + id})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCreateMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	in := model.Message{ID: "m-1", From: "codex", To: "claude", Body: "hello \xff", ContextID: "c-1",
		ReplyTo: "m-0", Artifacts: []model.Artifact{{URI: "file:///x"}}, CreatedAt: t0,
		State: model.MessageAcked} // ignored: a new message is stored
	got, err := db.CreateMessage(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != model.MessageStored || got.ReadAt != nil || !got.CreatedAt.Equal(t0) {
		t.Errorf("created = %+v", got)
	}
	list, err := db.ListMessages(ctx, model.MessageFilter{})
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], got) {
		t.Fatalf("ListMessages = %+v, %v; want %+v", list, err, got)
	}
	if count(t, db, "audit_log", "kind = 'message.stored' AND message_id = 'm-1' AND actor = 'codex'") != 1 {
		t.Error("no message.stored audit row")
	}
	_, err = db.CreateMessage(ctx, in)
	wantCode(t, err, model.CodeInvalidArgs)
	for _, bad := range []model.Message{{From: "a", To: "b"}, {ID: "x", To: "b"}, {ID: "x", From: "a"}} {
		_, err := db.CreateMessage(ctx, bad)
		wantCode(t, err, model.CodeInvalidArgs)
	}
	if n := count(t, db, "messages", ""); n != 1 {
		t.Errorf("messages = %d, want 1", n)
	}
}

func TestInboxReadsAndCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	db := MustOpen(t, t.TempDir()+"/relay.db", Options{Clock: func() time.Time { return now }})
	for i := range 5 {
		send(t, db, seqID("m", i), "codex", "claude")
	}
	send(t, db, "other", "codex", "gemini")

	// First call: the 2 oldest, now read; 3 unread remain.
	got, unread, err := db.Inbox(ctx, "claude", true, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(messageIDs(got), []string{"m-0000", "m-0001"}) || unread != 3 {
		t.Fatalf("Inbox = %v, unread %d", messageIDs(got), unread)
	}
	for _, m := range got {
		if m.State != model.MessageRead || m.ReadAt == nil || !m.ReadAt.Equal(now) {
			t.Errorf("returned message not read: %+v", m)
		}
	}
	// One audit row for the call, naming both messages.
	if n := count(t, db, "audit_log", "kind = 'message.read' AND actor = 'claude'"); n != 1 {
		t.Errorf("message.read rows = %d, want 1", n)
	}
	if n := count(t, db, "audit_log", `kind = 'message.read' AND json_extract(data, '$.message_ids') = 'm-0000,m-0001'
		AND json_extract(data, '$.count') = '2' AND message_id = ''`); n != 1 {
		t.Errorf("the message.read row does not name m-0000 and m-0001")
	}

	// unread_only skips what was read.
	got, unread, _ = db.Inbox(ctx, "claude", true, 0)
	if !slices.Equal(messageIDs(got), []string{"m-0002", "m-0003", "m-0004"}) || unread != 0 {
		t.Fatalf("second Inbox = %v, unread %d", messageIDs(got), unread)
	}
	got, unread, _ = db.Inbox(ctx, "claude", true, 0)
	if len(got) != 0 || unread != 0 {
		t.Fatalf("third Inbox = %v, unread %d", messageIDs(got), unread)
	}
	reads := count(t, db, "audit_log", "kind = 'message.read'")

	// Without unread_only: every message not acked, oldest first, and
	// already-read messages are not read (or audited) again.
	if n, err := db.Ack(ctx, "claude", []string{"m-0001"}); err != nil || n != 1 {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	send(t, db, "m-new", "gemini", "claude")
	got, unread, _ = db.Inbox(ctx, "claude", false, 0)
	if !slices.Equal(messageIDs(got), []string{"m-0000", "m-0002", "m-0003", "m-0004", "m-new"}) || unread != 0 {
		t.Fatalf("all Inbox = %v, unread %d", messageIDs(got), unread)
	}
	if n := count(t, db, "audit_log", "kind = 'message.read'"); n != reads+1 {
		t.Errorf("message.read rows = %d, want %d", n, reads+1)
	}

	// Another agent's inbox is untouched.
	if n := count(t, db, "messages", "id = 'other' AND state = 'stored'"); n != 1 {
		t.Error("gemini's message changed")
	}
	if _, _, err := db.Inbox(ctx, "", true, 0); model.ErrorCode(err) != model.CodeInvalidArgs {
		t.Errorf("empty recipient: %v", err)
	}
}

func TestAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	send(t, db, "a", "codex", "claude")
	send(t, db, "b", "codex", "claude")
	send(t, db, "c", "codex", "claude")
	send(t, db, "g", "codex", "gemini")
	if _, _, err := db.Inbox(ctx, "claude", true, 1); err != nil { // a becomes read
		t.Fatal(err)
	}
	audits := count(t, db, "audit_log", "")

	// One id that is not claude's (it is gemini's) or does not exist:
	// not_found, naming it, and nothing changes.
	for _, ids := range [][]string{{"a", "g"}, {"b", "zzz"}} {
		_, err := db.Ack(ctx, "claude", ids)
		wantCode(t, err, model.CodeNotFound)
		if !strings.Contains(err.Error(), `"`+ids[1]+`"`) {
			t.Errorf("error %q does not name %s", err, ids[1])
		}
	}
	if count(t, db, "messages", "state = 'acked'") != 0 || count(t, db, "audit_log", "") != audits {
		t.Fatal("a refused ack changed something")
	}

	// Ack a read and a stored message (duplicates collapse).
	n, err := db.Ack(ctx, "claude", []string{"a", "b", "a"})
	if err != nil || n != 2 {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	// Acking again changes nothing and counts nothing.
	if n, err := db.Ack(ctx, "claude", []string{"a", "b"}); err != nil || n != 0 {
		t.Fatalf("second Ack = %d, %v", n, err)
	}
	list, _ := db.ListMessages(ctx, model.MessageFilter{To: "claude"})
	for _, m := range list {
		switch m.ID {
		case "a", "b":
			if m.State != model.MessageAcked || m.AckedAt == nil || m.ReadAt == nil {
				t.Errorf("%s = %+v, want acked with read_at and acked_at", m.ID, m)
			}
		case "c":
			if m.State != model.MessageStored {
				t.Errorf("c = %s", m.State)
			}
		}
	}
	if n := count(t, db, "audit_log", "kind = 'message.acked' AND actor = 'claude'"); n != 2 {
		t.Errorf("message.acked rows = %d, want 2", n)
	}
	// The unread count no longer includes b, acked without being read.
	if _, unread, _ := db.Inbox(ctx, "claude", true, 0); unread != 0 {
		t.Errorf("unread = %d", unread)
	}
	if _, err := db.Ack(ctx, "claude", nil); model.ErrorCode(err) != model.CodeInvalidArgs {
		t.Errorf("empty ack: %v", err)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

func TestListMessagesFiltersAndCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	for i := range 30 {
		from, to := "codex", "claude"
		if i%3 == 0 {
			from, to = "claude", "gemini"
		}
		send(t, db, seqID("m", i), from, to)
	}
	if _, _, err := db.Inbox(ctx, "claude", true, 5); err != nil {
		t.Fatal(err)
	}

	var all []string
	before := ""
	for {
		page, err := db.ListMessages(ctx, model.MessageFilter{Limit: 4, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, messageIDs(page)...)
		before = page[len(page)-1].ID
	}
	if len(all) != 30 || all[0] != "m-0029" || all[29] != "m-0000" {
		t.Errorf("walk = %v", all)
	}
	if got, _ := db.ListMessages(ctx, model.MessageFilter{From: "claude"}); len(got) != 10 {
		t.Errorf("from claude = %d", len(got))
	}
	if got, _ := db.ListMessages(ctx, model.MessageFilter{To: "claude", UnreadOnly: true}); len(got) != 15 {
		t.Errorf("unread to claude = %d, want 15", len(got))
	}
	if got, _ := db.ListMessages(ctx, model.MessageFilter{To: "gemini", Before: "m-0010"}); !slices.Equal(messageIDs(got),
		[]string{"m-0009", "m-0006", "m-0003", "m-0000"}) {
		t.Errorf("to gemini before m-0010 = %v", messageIDs(got))
	}
	_, err := db.ListMessages(ctx, model.MessageFilter{Before: "nope"})
	wantCode(t, err, model.CodeNotFound)
}

// TestConcurrentInboxReadsEachMessageOnce: inbox calls racing for one
// recipient never hand out the same unread message twice.
func TestConcurrentInboxReadsEachMessageOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	const total = 60
	for i := range total {
		send(t, db, seqID("m", i), "codex", "claude")
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for {
				got, _, err := db.Inbox(ctx, "claude", true, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, m := range got {
					seen[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != total {
		t.Errorf("%d distinct messages read, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s handed out %d times", id, n)
		}
	}
	var audited int
	if err := db.reader.DB.QueryRowContext(ctx, `SELECT COALESCE(SUM(CAST(json_extract(data, '$.count') AS INTEGER)), 0)
		FROM audit_log WHERE kind = 'message.read'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != total {
		t.Errorf("message.read rows count %d messages, want %d", audited, total)
	}
}

func TestGetMessage(t *testing.T) {
	t.Parallel()
	db := MustOpenTemp(t)
	ctx := context.Background()
	m, err := db.CreateMessage(ctx, model.Message{ID: "MSG-get", From: "claude", To: "codex", Body: "hello", ContextID: "C-1", State: model.MessageStored})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.GetMessage(ctx, m.ID)
	if err != nil || got.ID != m.ID || got.Body != "hello" || got.ContextID != "C-1" || got.From != "claude" {
		t.Fatalf("GetMessage = %+v, %v", got, err)
	}
	if _, err := db.GetMessage(ctx, "MSG-nope"); model.ErrorCode(err) != model.CodeNotFound {
		t.Fatalf("missing message: %v, want not_found", err)
	}
}
