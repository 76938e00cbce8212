package persistence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// trySend stores a message from codex to `to` with body.
func trySend(db *DB, id, to, body string) error {
	_, err := db.CreateMessage(context.Background(), model.Message{ID: id, From: "codex", To: to, Body: body})
	return err
}

// A recipient holds at most InboxMessages unacknowledged messages and
// InboxBytes of their bodies: past either, a message is refused with
// recipient_inbox_full, a hint saying what to do, and nothing stored (no
// row, no audit row); acknowledging makes room again, and other
// recipients are not affected.
func TestInboxQuotaRefusesAndStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{InboxMessages: 3, InboxBytes: 100, InboxSenderShare: NoLimit})
	for i := range 3 {
		if err := trySend(db, seqID("M", i), "claude", "0123456789"); err != nil {
			t.Fatal(err)
		}
	}
	audit := count(t, db, "audit_log", "")
	err := trySend(db, "M-over", "claude", "one too many")
	wantCode(t, err, model.CodeRecipientInboxFull)
	var me *model.Error
	if !errors.As(err, &me) || !strings.Contains(me.Message, "inbox_messages = 3") || !strings.Contains(me.Message, "not stored") ||
		!strings.Contains(me.Hint, "ack_messages") || !strings.Contains(me.Hint, "inbox_messages") {
		t.Errorf("refusal = %+v; want the quota named and a hint to acknowledge or raise it", me)
	}
	if n := count(t, db, "messages", "id = 'M-over'"); n != 0 {
		t.Error("the refused message was stored")
	}
	if n := count(t, db, "audit_log", ""); n != audit {
		t.Errorf("a refused message appended %d audit rows", n-audit)
	}
	// Another recipient has its own quota.
	if err := trySend(db, "M-gemini", "gemini", "hello"); err != nil {
		t.Fatalf("a message to another recipient: %v", err)
	}
	// Reading is not acknowledging: the inbox stays full.
	if _, _, err := db.Inbox(ctx, "claude", true, 10); err != nil {
		t.Fatal(err)
	}
	wantCode(t, trySend(db, "M-over", "claude", "still full"), model.CodeRecipientInboxFull)
	if _, err := db.Ack(ctx, "claude", []string{seqID("M", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := trySend(db, "M-after-ack", "claude", "room again"); err != nil {
		t.Fatalf("after an ack: %v", err)
	}
	// The byte quota: 3 unacknowledged messages of 10 bytes each (30 of
	// 100) after acknowledging two more; 70 bytes fit exactly, 71 do not.
	if _, err := db.Ack(ctx, "claude", []string{seqID("M", 1), seqID("M", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := trySend(db, "M-71", "claude", strings.Repeat("x", 91)); model.ErrorCode(err) != model.CodeRecipientInboxFull ||
		!strings.Contains(err.Error(), "inbox_bytes = 100") {
		t.Errorf("91 bytes on top of 10: %v, want recipient_inbox_full naming inbox_bytes", err)
	}
	if err := trySend(db, "M-90", "claude", strings.Repeat("x", 90)); err != nil {
		t.Errorf("90 bytes on top of 10 (exactly the quota): %v", err)
	}
	if u, err := db.InboxUsage(ctx, "claude"); err != nil || u != (InboxUsage{Messages: 2, Bytes: 100}) {
		t.Errorf("InboxUsage = %+v, %v; want 2 messages, 100 bytes", u, err)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("VerifyAudit = %+v, %v", rep, err)
	}
}

// Concurrent senders cannot overshoot a quota: the check runs in the
// insert's own transaction, on the one writer connection, so exactly the
// quota's worth of messages is stored however many race for the last
// places.
func TestInboxQuotaHoldsUnderConcurrentSenders(t *testing.T) {
	t.Parallel()
	const quota, senders, each = 50, 8, 20
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{InboxMessages: quota, InboxSenderShare: NoLimit})
	var stored, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				err := trySend(db, fmt.Sprintf("M-%d-%d", g, i), "claude", "race")
				switch model.ErrorCode(err) {
				case "":
					stored.Add(1)
				case model.CodeRecipientInboxFull:
					refused.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if stored.Load() != quota || refused.Load() != senders*each-quota {
		t.Errorf("stored %d, refused %d; want exactly %d stored", stored.Load(), refused.Load(), quota)
	}
	if n := count(t, db, "messages", "to_agent = 'claude'"); n != quota {
		t.Errorf("%d messages in the database, want %d", n, quota)
	}
	if st := db.WriterStats(); st.MaxBatch < 2 {
		t.Logf("the writer never grouped two requests (stats %+v): the race was not exercised inside one batch", st)
	}
}

// usageFromRows recomputes every recipient's usage from the messages.
func usageFromRows(t *testing.T, db *DB) map[string]InboxUsage {
	t.Helper()
	rows, err := db.reader.DB.Query(`SELECT to_agent, count(*), sum(length(CAST(body AS BLOB))) FROM messages WHERE state <> 'acked' GROUP BY to_agent`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]InboxUsage{}
	for rows.Next() {
		var a string
		var u InboxUsage
		if err := rows.Scan(&a, &u.Messages, &u.Bytes); err != nil {
			t.Fatal(err)
		}
		out[a] = u
	}
	return out
}

// usageTable reads inbox_usage, leaving out recipients at zero.
func usageTable(t *testing.T, db *DB) map[string]InboxUsage {
	t.Helper()
	rows, err := db.reader.DB.Query(`SELECT agent, messages, bytes FROM inbox_usage`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]InboxUsage{}
	for rows.Next() {
		var a string
		var u InboxUsage
		if err := rows.Scan(&a, &u.Messages, &u.Bytes); err != nil {
			t.Fatal(err)
		}
		if u != (InboxUsage{}) {
			out[a] = u
		}
	}
	return out
}

// inbox_usage equals the aggregate it stands for after any mix of
// sends (multi-byte bodies: bytes, not characters), inbox reads, acks,
// task notices and prunes; and the triggers refuse what would make it
// wrong (an acknowledged message made unacknowledged, a body changed).
func TestInboxUsageFollowsEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Clock: clock, Synchronous: SyncNormal,
		InboxMessages: NoLimit, InboxBytes: NoLimit})
	rng := rand.New(rand.NewPCG(7, 7))
	agents := []string{"claude", "gemini", "cursor"}
	sent := map[string][]string{} // by recipient
	for i := range 200 {
		now.Add(int64(time.Minute))
		to := agents[rng.IntN(len(agents))]
		switch op := rng.IntN(10); {
		case op < 5:
			id := seqID("M", i)
			if err := trySend(db, id, to, strings.Repeat("é", rng.IntN(50))+"x"); err != nil {
				t.Fatal(err)
			}
			sent[to] = append(sent[to], id)
		case op < 7:
			if _, _, err := db.Inbox(ctx, to, rng.IntN(2) == 0, 1+rng.IntN(5)); err != nil {
				t.Fatal(err)
			}
		case op < 9 && len(sent[to]) > 0:
			// Acknowledge a few, some of them again.
			k := 1 + rng.IntN(min(4, len(sent[to])))
			mine := sent[to][:k]
			if _, err := db.Ack(ctx, to, mine); model.ErrorCode(err) != "" && model.ErrorCode(err) != model.CodeNotFound {
				t.Fatal(err) // not_found: some were pruned since
			}
			sent[to] = sent[to][max(0, k-1):]
		default:
			task := newTask(seqID("T", i))
			task.Caller = to
			mustCreate(t, db, task)
			if _, err := db.Transition(ctx, model.Transition{TaskID: task.ID, From: model.StateSubmitted, To: model.StateRejected,
				Trigger: model.TriggerReject, Code: model.CodeMissingLeaseID, NoticeID: seqID("N", i)}); err != nil {
				t.Fatal(err)
			}
		}
		if i%100 == 99 {
			if _, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{AckedMessages: 30 * time.Minute}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want, got := usageFromRows(t, db), usageTable(t, db)
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("inbox_usage = %v\nrecomputed  = %v", got, want)
	}
	if len(want) == 0 {
		t.Fatal("the workload left no unacknowledged message")
	}
	// And inbox_sender_usage, the same split by sender (codex's messages
	// and the relay's notices).
	pairs := func(q string) string {
		rows, err := db.rq.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var a, s string
			var m, b int64
			if err := rows.Scan(&a, &s, &m, &b); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s<-%s:%d/%d", a, s, m, b))
		}
		return strings.Join(out, " ")
	}
	wantPairs := pairs(`SELECT to_agent, from_agent, count(*), sum(octet_length(body)) FROM messages WHERE state <> 'acked' GROUP BY 1, 2 ORDER BY 1, 2`)
	if gotPairs := pairs(`SELECT agent, sender, messages, bytes FROM inbox_sender_usage WHERE messages > 0 ORDER BY 1, 2`); gotPairs != wantPairs || !strings.Contains(wantPairs, "<-relay") {
		t.Errorf("inbox_sender_usage = %s\nrecomputed         = %s", gotPairs, wantPairs)
	}
	// What the triggers rely on is refused.
	for _, q := range []string{
		`UPDATE messages SET from_agent = 'hermes'`,
		`UPDATE messages SET state = 'read' WHERE state = 'acked'`,
		`UPDATE messages SET body = body || 'x'`,
		`UPDATE messages SET to_agent = 'hermes'`,
	} {
		err := db.write(ctx, func(ctx context.Context, w *writeTx) error { _, err := w.ExecContext(ctx, q); return err })
		if err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
}

// The relay's notice to a task's submitter is never refused, since it
// commits with the task's end: with the submitter's inbox full it is the
// short notice (no result), and the result stays on the task.
func TestEndNoticeIsNeverRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{InboxMessages: 2, InboxSenderShare: NoLimit})
	end := func(id string) model.Message {
		t.Helper()
		task := newTask(id) // submitted by codex
		mustCreate(t, db, task)
		for _, tr := range []model.Transition{
			{From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize},
			{From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart},
			{From: model.StateWorking, To: model.StateCompleted, Trigger: model.TriggerComplete,
				Result: &model.TaskResult{Text: "the answer of " + id, StopReason: "end_turn"}, NoticeID: "N-" + id},
		} {
			tr.TaskID = id
			if _, err := db.Transition(ctx, tr); err != nil {
				t.Fatalf("%s %s: %v", id, tr.Trigger, err)
			}
		}
		m, err := db.GetMessage(ctx, "N-"+id)
		if err != nil {
			t.Fatalf("the notice of %s: %v", id, err)
		}
		return m
	}
	if m := end("T-1"); m.Body != model.EndNotice(model.Task{ID: "T-1", State: model.StateCompleted, Result: "the answer of T-1"}) {
		t.Errorf("a notice with room: %q", m.Body)
	}
	end("T-2")
	// codex's inbox is full now (2 notices): other senders are refused,
	// the relay's notices are stored, short.
	if _, err := db.CreateMessage(ctx, model.Message{ID: "M-x", From: "claude", To: "codex", Body: "hi"}); model.ErrorCode(err) != model.CodeRecipientInboxFull {
		t.Fatalf("a message to a full inbox: %v", err)
	}
	m := end("T-3")
	if strings.Contains(m.Body, "the answer") || !strings.Contains(m.Body, "T-3 completed") || !strings.Contains(m.Body, "get_task T-3") {
		t.Errorf("the notice to a full inbox: %q; want the short notice pointing at get_task", m.Body)
	}
	if got, err := db.GetTask(ctx, "T-3"); err != nil || got.Result != "the answer of T-3" {
		t.Errorf("GetTask(T-3) = %q, %v; want the result kept on the task", got.Result, err)
	}
	if u, _ := db.InboxUsage(ctx, "codex"); u.Messages != 3 {
		t.Errorf("codex holds %d messages, want the 3 notices", u.Messages)
	}
}

// Under the free-space reserve, new messages and tasks are refused with
// storage_full and stored nowhere, while the writes that drain the store
// (inbox reads, acks, transitions, prune) go on. (The reserve is set
// above any disk's size here; cmd/relay's
// TestReliabilityStorageFullOnASmallFilesystem fills a real one.)
func TestReserveRefusesNewWritesButNotDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	first := MustOpen(t, path, Options{})
	if err := trySend(first, "M-1", "claude", "before"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, first, newTask("T-1"))
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	db := MustOpen(t, path, Options{MinFreeBytes: 1 << 60})
	err := trySend(db, "M-2", "claude", "refused")
	wantCode(t, err, model.CodeStorageFull)
	var me *model.Error
	if !errors.As(err, &me) || !strings.Contains(me.Message, "min_free_bytes") || !strings.Contains(me.Hint, "relay prune") {
		t.Errorf("refusal = %+v; want the reserve named and relay prune in the hint", me)
	}
	if _, _, err := db.CreateTask(ctx, newTask("T-2")); model.ErrorCode(err) != model.CodeStorageFull {
		t.Errorf("CreateTask under the reserve: %v", err)
	}
	if ms, _, err := db.Inbox(ctx, "claude", true, 10); err != nil || len(ms) != 1 {
		t.Errorf("Inbox under the reserve = %d, %v", len(ms), err)
	}
	if n, err := db.Ack(ctx, "claude", []string{"M-1"}); err != nil || n != 1 {
		t.Errorf("Ack under the reserve = %d, %v", n, err)
	}
	if _, err := db.Transition(ctx, model.Transition{TaskID: "T-1", From: model.StateSubmitted, To: model.StateRejected,
		Trigger: model.TriggerReject, Code: model.CodeMissingLeaseID, NoticeID: "N-1"}); err != nil {
		t.Errorf("Transition under the reserve: %v", err)
	}
	if _, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{AckedMessages: time.Nanosecond}}); err != nil {
		t.Errorf("Prune under the reserve: %v", err)
	}
	if n := count(t, db, "messages", "id = 'M-2'") + count(t, db, "tasks", "id = 'T-2'"); n != 0 {
		t.Error("a refused write was stored")
	}
}

// Acknowledging rewrites each message's row, body included (its size
// changes), so one transaction acknowledging 20 MiB of messages would
// take the WAL to 20 MiB at once, which a disk that fills does not have.
// Ack commits in chunks of ackChunkBytes, between which the writer
// checkpoints, and the WAL stays within its usual bound.
func TestAckOfLargeMessagesKeepsTheWALSmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Synchronous: SyncNormal})
	body := strings.Repeat("w", 256<<10)
	h := History{}
	var ids []string
	for i := range 80 {
		ids = append(ids, seqID("M", i))
		h.Messages = append(h.Messages, model.Message{ID: ids[i], From: "codex", To: "claude", Body: body, CreatedAt: t0})
	}
	if err := db.Import(ctx, h); err != nil { // one bulk write
		t.Fatal(err)
	}
	db.truncateWAL(ctx) // the WAL starts empty: what follows is the Ack's
	highWater := watchWAL(t, db)
	n, err := db.Ack(ctx, "claude", ids)
	if err != nil || n != len(ids) {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	t.Logf("WAL high-water %d KiB after acknowledging 20 MiB", highWater()>>10)
	if highWater() > walBound {
		t.Errorf("acknowledging 20 MiB of messages took the WAL to %d KiB, bound %d KiB", highWater()>>10, walBound>>10)
	}
	if u, _ := db.InboxUsage(ctx, "claude"); u != (InboxUsage{}) {
		t.Errorf("usage after acknowledging everything = %+v", u)
	}
	if n := count(t, db, "audit_log", "kind = 'message.acked'"); n != len(ids) {
		t.Errorf("%d message.acked audit rows, want %d", n, len(ids))
	}
}

// Each sender holds at most its share of a recipient's quota: one sender
// that fills its share is refused (recipient_inbox_full, naming the share
// and what to do), while another sender's messages and the relay's
// notices are still stored; the recipient's total quota still holds; and
// InboxShares names the senders at their share.
func TestInboxSenderShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 10 messages and 1,000 bytes a recipient; a share of 30%: 3 messages
	// and 300 bytes a sender.
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{InboxMessages: 10, InboxBytes: 1000, InboxSenderShare: 30})
	send := func(id, from, body string) error {
		_, err := db.CreateMessage(ctx, model.Message{ID: id, From: from, To: "gemini", Body: body})
		return err
	}
	for i := range 3 {
		if err := send(seqID("C", i), "claude", "x"); err != nil {
			t.Fatal(err)
		}
	}
	err := send("C-over", "claude", "x")
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.CodeRecipientInboxFull || !strings.Contains(me.Message, "claude's share") ||
		!strings.Contains(me.Message, "inbox_sender_share") || !strings.Contains(me.Hint, "other senders still can") {
		t.Fatalf("claude's fourth message: %v, want recipient_inbox_full naming its share", err)
	}
	if n := count(t, db, "messages", "id = 'C-over'"); n != 0 {
		t.Errorf("the refused message was stored")
	}
	// Bytes: codex may hold 300 bytes, not 301.
	if err := send("X-0", "codex", strings.Repeat("b", 300)); err != nil {
		t.Fatal(err)
	}
	if err := send("X-1", "codex", "b"); model.ErrorCode(err) != model.CodeRecipientInboxFull {
		t.Fatalf("codex past its byte share: %v", err)
	}
	// Others are not shut out: a third sender, and the relay, which has
	// no share.
	for i := range 3 {
		if err := send(seqID("O", i), "cursor", "o"); err != nil {
			t.Fatalf("another sender, with claude and codex at their share: %v", err)
		}
	}
	for i := range 5 {
		if err := send(seqID("R", i), model.RelayAgent, "r"); err != nil && i < 1 {
			t.Fatalf("the relay past a share: %v", err)
		}
	}
	// The total still holds: 10 messages.
	if u, _ := db.InboxUsage(ctx, "gemini"); u.Messages != 10 {
		t.Errorf("gemini holds %d unacknowledged messages, want the quota's 10", u.Messages)
	}
	got, err := db.InboxShares(ctx, "gemini")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, fmt.Sprintf("%s:%d/%d", s.From, s.Messages, s.Bytes))
		if s.To != "gemini" || s.ShareMessages != 3 || s.ShareBytes != 300 {
			t.Errorf("share %+v, want of gemini, 3 messages and 300 bytes", s)
		}
	}
	if strings.Join(names, " ") != "claude:3/3 codex:1/300 cursor:3/3 relay:3/3" {
		t.Errorf("InboxShares(gemini) = %v", names)
	}
	// Acknowledging claude's messages gives claude its share back.
	if _, err := db.Ack(ctx, "gemini", []string{"C-0000"}); err != nil {
		t.Fatal(err)
	}
	if err := send("C-again", "claude", "x"); err != nil {
		t.Fatalf("claude after one of its messages was acknowledged: %v", err)
	}
	if err := send("C-over-again", "claude", "x"); model.ErrorCode(err) != model.CodeRecipientInboxFull {
		t.Fatalf("claude at its share again: %v", err)
	}
	if none, err := db.InboxShares(ctx, "claude"); err != nil || len(none) != 0 {
		t.Errorf("InboxShares(claude) = %v, %v; want none", none, err)
	}
}
