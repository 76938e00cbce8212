package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// answerLen is the length of the answer the daemon sends for items
// (json.Marshal of the route's body, plus its newline).
func answerLen(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b) + 1
}

// TestInboxPageIsBoundedInBytes: an inbox page stops before the message
// that would take its encoded answer past the bound, always holds the
// oldest message, and marks read exactly the messages it returns (one audit
// row naming them); unread counts the rest. Messages of '<', which Go's
// encoder escapes to 6 bytes each, are measured as encoded, not as stored.
func TestInboxPageIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const bound = 16 << 10
	now := time.Date(2026, 2, 2, 0, 0, 0, 123456789, time.UTC)
	db := MustOpen(t, t.TempDir()+"/relay.db", Options{AnswerBytes: bound, Clock: func() time.Time { return now }})
	// Bodies of 1,000 '<' (about 6.2 KB encoded, 1 KB stored): two fit in a
	// page, three do not. The sixth is larger than the bound on its own.
	var ids []string
	for i := range 6 {
		body := strings.Repeat("<", 1000)
		if i == 5 {
			body = strings.Repeat("&", 3000)
		}
		m, err := db.CreateMessage(ctx, model.Message{ID: seqID("m", i), From: "codex", To: "claude", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	// The first call is unread_only=false: it reads the same page, and
	// marks read what it returns and nothing after it.
	want := [][]string{ids[0:2], ids[2:4], ids[4:5], ids[5:6], {}}
	left := len(ids)
	for call, w := range want {
		got, unread, err := db.Inbox(ctx, "claude", call > 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(messageIDs(got), w) {
			t.Fatalf("call %d: page %v, want %v", call, messageIDs(got), w)
		}
		left -= len(w)
		if unread != left {
			t.Errorf("call %d: unread %d, want %d", call, unread, left)
		}
		if n := answerLen(t, model.Inbox{Messages: got, Unread: unread}); n > bound && len(got) > 1 {
			t.Errorf("call %d: a page of %d messages encodes to %d bytes, over %d", call, len(got), n, bound)
		}
		if n := count(t, db, "messages", "to_agent = 'claude' AND state = 'stored'"); n != left {
			t.Errorf("call %d: %d messages still stored, want %d", call, n, left)
		}
		if len(w) > 0 {
			if n := count(t, db, "audit_log", `kind = 'message.read' AND json_extract(data, '$.message_ids') = ?`,
				strings.Join(w, ",")); n != 1 {
				t.Errorf("call %d: no message.read row naming exactly %v", call, w)
			}
		}
	}
	if n := count(t, db, "audit_log", "kind = 'message.read'"); n != 4 {
		t.Errorf("%d message.read rows, want 4 (one per page)", n)
	}
	// With everything read, unread_only=false pages through read messages
	// the same way, marking nothing.
	got, unread, err := db.Inbox(ctx, "claude", false, 50)
	if err != nil || !slices.Equal(messageIDs(got), ids[0:2]) || unread != 0 {
		t.Fatalf("all: %v unread %d, %v", messageIDs(got), unread, err)
	}
}

// TestListingsAreBoundedInBytes: the operator's message list and the task
// lists stop before the item that would take their answer past the bound;
// paging with Before until a page is empty visits every item once.
func TestListingsAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const bound = 16 << 10
	db := MustOpen(t, t.TempDir()+"/relay.db", Options{AnswerBytes: bound})
	for i := range 7 {
		if _, err := db.CreateMessage(ctx, model.Message{ID: seqID("m", i), From: "codex", To: "claude",
			Body: strings.Repeat("<", 1000)}); err != nil {
			t.Fatal(err)
		}
		task := newTask(seqID("t", i))
		task.Prompt = strings.Repeat(">", 1000)
		task.Caller, task.Target = "codex", "claude"
		mustCreate(t, db, task)
	}
	seen := map[string]int{}
	pages := 0
	for before := ""; ; pages++ {
		ms, err := db.ListMessages(ctx, model.MessageFilter{To: "claude", Limit: 1000, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		if n := answerLen(t, map[string]any{"messages": ms}); n > bound {
			t.Errorf("a page of %d messages encodes to %d bytes, over %d", len(ms), n, bound)
		}
		for _, m := range ms {
			seen[m.ID]++
		}
		before = ms[len(ms)-1].ID
	}
	if len(seen) != 7 || pages != 4 {
		t.Errorf("messages: %d distinct in %d pages, want 7 in 4: %v", len(seen), pages, seen)
	}

	for _, f := range []model.TaskFilter{{}, {Visible: "claude"}, {Agent: "codex"}} {
		seen := map[string]int{}
		pages := 0
		for before := ""; ; pages++ {
			f.Limit, f.Before = 1000, before
			ts, err := db.ListTasks(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) == 0 {
				break
			}
			if n := answerLen(t, map[string]any{"tasks": ts}); n > bound {
				t.Errorf("%+v: a page of %d tasks encodes to %d bytes, over %d", f, len(ts), n, bound)
			}
			for _, task := range ts {
				seen[task.ID]++
			}
			before = ts[len(ts)-1].ID
		}
		if len(seen) != 7 || pages < 3 {
			t.Errorf("%+v: %d distinct tasks in %d pages, want 7 in at least 3: %v", f, len(seen), pages, fmt.Sprint(seen))
		}
	}
}
