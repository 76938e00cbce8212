package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// relayLogs returns the text of relay.log and every rotated generation.
func relayLogs(t *testing.T, home string) (all string, size int64) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(home, "relay.log*"))
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		size += int64(len(data))
	}
	return b.String(), size
}

// One agent sending megabyte-sized ids: a refused
// ack_messages or reply_to answers with a clipped echo (a few hundred
// bytes, valid UTF-8, marked as cut), the daemon's log grows by a bounded
// line per refusal (and not at all beyond the agent's refusal budget),
// and the daemon's start-up lines survive any number of refusals.
func TestReliabilityNoisyAgentCannotFlushTheLog(t *testing.T) {
	t.Parallel()
	home := newHome(t, "")
	launchDaemon(t, home)
	c := apiClient(home)
	eventually(t, "the start-up line in relay.log", 30*time.Second, func() bool {
		logs, _ := relayLogs(t, home)
		return strings.Contains(logs, "relay daemon ready")
	})

	// Eight ~4 MB echoes: today they rotate relay.log twice, and the
	// start-up line with it.
	const n = 8
	for i := range n {
		// Just under the 4 MiB body bound; the multi-byte rune checks the
		// clip never splits one.
		id := "MSG-" + strings.Repeat("é", (4<<20-200)/2)
		var r apiResp
		want := "not_found" // an id to acknowledge that names no message
		if i%2 == 0 {
			r = apiDo(t, c, "POST", "/v1/inbox/ack", "codex", mustJSON(t, map[string]any{"message_ids": []string{id}}))
		} else {
			// A reply_to that is not a message id is refused before any
			// lookup (Medium 7).
			want = "invalid_args"
			r = apiDo(t, c, "POST", "/v1/messages", "codex", mustJSON(t, map[string]any{"to": "claude", "body": "hi", "reply_to": id}))
		}
		if r.code() != want {
			t.Fatalf("refusal %d: %d %s", i, r.status, clipText(string(r.body), 300))
		}
		msg := r.str("message")
		if len(r.body) > 2048 || !utf8.Valid(r.body) || !strings.Contains(msg, "MSG-éé") || !strings.Contains(msg, "bytes cut") {
			t.Fatalf("refusal %d: a %d-byte answer (valid UTF-8: %v), want under 2 KiB with the id clipped and marked as cut: %s",
				i, len(r.body), utf8.Valid(r.body), clipText(string(r.body), 600))
		}
	}

	// Then many small refusals in a row: past its budget, the agent's
	// refusals are no longer logged line by line.
	const small = 100
	for i := range small {
		r := apiDo(t, c, "POST", "/v1/inbox/ack", "codex", mustJSON(t, map[string]any{"message_ids": []string{fmt.Sprintf("MSG-nope-%d", i)}}))
		if r.code() != "not_found" {
			t.Fatalf("small refusal %d: %d %s", i, r.status, r.body)
		}
	}

	logs, size := relayLogs(t, home)
	if size > 256<<10 {
		t.Errorf("relay.log and its generations hold %d bytes after %d refusals, want under 256 KiB", size, n+small)
	}
	if lines := strings.Count(logs, "api request refused"); lines >= n+small {
		t.Errorf("%d refusal lines logged for %d refusals in a row, want the budget to cut them", lines, n+small)
	}
	if !strings.Contains(logs, "relay daemon ready") {
		t.Errorf("the start-up line is gone after %d refusals", n+small)
	}
	if !strings.Contains(logs, "refusals") || !strings.Contains(logs, "suppressed") {
		t.Errorf("no summary line of suppressed refusal lines:\n%s", clipText(logs, 4000))
	}
	// The daemon still serves the same agent (a budget on log lines, not on
	// requests).
	if r := apiDo(t, c, "POST", "/v1/inbox", "codex", []byte(`{}`)); r.status != 200 {
		t.Fatalf("inbox after the refusals: %d %s", r.status, r.body)
	}
}
