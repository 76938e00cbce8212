package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// Bounded answers.

// TestReliabilityInboxPagesFitTheWire is a lost-answer case seen in use,
// scaled down: messages whose bodies are limits.message_bytes of '<' (each
// escaped to 6 bytes by Go's JSON encoder, about 1.5 MB a message) and one
// more, read through the real facade with check_inbox's defaults. Every
// answer comes back, within model.AnswerBytes; each message is delivered
// exactly once, and unread counts down to 0. The case seen had 45 such
// messages, 70 MB in one answer, over the client's 64 MiB read bound: the
// answer never came back, and all 46 messages were marked read anyway. Six
// are enough, at a seventh of the cost: without the fix their first answer
// is 9 MB, four times the bound, and this test fails; with it, the pages
// are cut the same way from the second message on.
func TestReliabilityInboxPagesFitTheWire(t *testing.T) {
	t.Parallel()
	const (
		limit = 262144 // limits.message_bytes, default
		nbig  = 6
		total = nbig + 1
	)
	home := newHome(t, "")
	launchDaemon(t, home)
	// The messages go in over the socket API, pipelined (sending is not
	// what is tested); '<' is written raw, as a client may.
	big := strings.Repeat("<", limit)
	pipeline(t, home, total, 2, func(ci, i int) (string, string, string) {
		b := big
		if ci == 0 && i == 0 {
			b = "the last one & small <3"
		}
		return "claude", "/v1/messages", `{"to":"codex","body":"` + b + `"}`
	})
	db := openRO(t, home)
	sent := map[string]bool{}
	var bodies int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE to_agent = 'codex' AND body = ?`, big).Scan(&bodies); err != nil || bodies != nbig {
		t.Fatalf("%d messages of %d '<' stored, want %d (%v)", bodies, limit, nbig, err)
	}
	ids, err := db.Query(`SELECT id FROM messages WHERE to_agent = 'codex'`)
	if err != nil {
		t.Fatal(err)
	}
	for ids.Next() {
		var id string
		if err := ids.Scan(&id); err != nil {
			t.Fatal(err)
		}
		sent[id] = true
	}
	ids.Close()
	if len(sent) != total {
		t.Fatalf("%d messages stored for %d sends", len(sent), total)
	}

	// The reader is the real facade, spoken to over stdio line by line.
	reader := startRawMCP(t, home, "codex")
	got := map[string]int{}
	calls := 0
	for left := total; ; {
		calls++
		if calls > 2*total {
			t.Fatalf("still not done after %d check_inbox calls: %d of %d delivered", calls-1, len(got), total)
		}
		// check_inbox with its defaults (unread_only true, limit 50). No
		// answer here is the lost answer described above.
		text := reader.call(t, "check_inbox", map[string]any{})
		if n := len(text); n > model.AnswerBytes {
			t.Errorf("call %d: the answer is %d bytes, over the bound %d", calls, n, model.AnswerBytes)
		}
		var page model.Inbox
		if err := json.Unmarshal([]byte(text), &page); err != nil {
			t.Fatalf("call %d: %v: %s", calls, err, clipText(text, 300))
		}
		for _, m := range page.Messages {
			got[m.ID]++
			if !sent[m.ID] || m.State != model.MessageRead {
				t.Errorf("call %d: message %s (state %s) was not sent, or is not read", calls, m.ID, m.State)
			}
		}
		left -= len(page.Messages)
		if page.Unread != left {
			t.Errorf("call %d: %d messages returned, unread=%d, want %d", calls, len(page.Messages), page.Unread, left)
		}
		if len(page.Messages) == 0 {
			if left != 0 {
				t.Fatalf("call %d: an empty page with %d messages never delivered", calls, left)
			}
			break
		}
	}
	for id := range sent {
		if got[id] != 1 {
			t.Errorf("message %s delivered %d times, want exactly once", id, got[id])
		}
	}
	t.Logf("%d messages in %d check_inbox answers", total, calls)

	// Every message is read, and only once: one message.read audit row
	// per page, naming each message once.
	var stored int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE to_agent = 'codex' AND state <> 'read'`).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("%d of codex's messages not read (%v)", stored, err)
	}
	rows, err := db.Query(`SELECT data FROM audit_log WHERE kind = 'message.read'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	audited := map[string]int{}
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		var d map[string]string
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatalf("audit data %q: %v", data, err)
		}
		for id := range strings.SplitSeq(d["message_ids"], ",") {
			audited[id]++
		}
	}
	for id := range sent {
		if audited[id] != 1 {
			t.Errorf("message %s audited as read %d times", id, audited[id])
		}
	}
	if len(audited) != total {
		t.Errorf("%d messages audited as read, want %d: %s", len(audited), total, fmt.Sprint(audited))
	}
	auditVerify(t, home)
}
