package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
)

// TestSafeTextEscapesWhatATerminalActsOn: controls, C1, bidi and bytes
// that are not UTF-8 become visible escapes; ordinary text, UTF-8
// included, is kept as it is.
func TestSafeTextEscapesWhatATerminalActsOn(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain ascii, /a/b c":      "plain ascii, /a/b c",
		"héllo 世界 ✓ ½ — «» 🙂":      "héllo 世界 ✓ ½ — «» 🙂",
		"\x1b]0;pwned\x07":         `\x1b]0;pwned\x07`,
		"\x1b[2J\r\n\t\x00\x7f":    `\x1b[2J\r\n\t\x00\x7f`,
		"a\u009b31mb\u0085c":       `a\u009b31mb\u0085c`,
		"\u202a\u202e\u2066\u2069": `\u202a\u202e\u2066\u2069`,
		"\u200e\u200f\u061c":       `\u200e\u200f\u061c`,
		"x\u2028y\u2029z":          `x\u2028y\u2029z`,
		"bad \xff\xc3 utf8":        `bad \xff\xc3 utf8`,
		`back\slash`:               `back\slash`,
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := oneLine("\x1b[2J", 60); got != `\x1b[2J` {
		t.Errorf("oneLine = %q", got)
	}
}

// relay agents without --wide wraps a failure reason under the WHY
// column instead of cutting it: every word is there, and the columns of
// the rows around it stay aligned.
func TestAgentsTableWrapsTheReason(t *testing.T) {
	t.Parallel()
	reason := "spawn /home/someone/.local/share/npm/bin/claude-agent-acp: no such file or directory; " +
		"install it with npm i -g @agentclientprotocol/claude-agent-acp or set [agents.claude] command " +
		strings.Repeat("x", 70)
	as := []model.AgentInfo{
		{Name: "claude", Command: []string{"claude-agent-acp"}, Configured: true, Enabled: true, WorkedLiveReason: reason},
		{Name: "codex", Command: []string{"codex-acp"}, Configured: true, Enabled: true, WorkedLive: true, WorkedLiveReason: "ok"},
	}
	var out bytes.Buffer
	if err := agentTable(&cliIO{stdout: &out}, false, as); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	col := strings.Index(lines[0], "WHY")
	var why []string
	i := 1
	for ; i < len(lines) && !strings.HasPrefix(lines[i], "codex"); i++ {
		if len(lines[i]) <= col || strings.TrimSpace(lines[i][:col]) != "" && i > 1 {
			t.Fatalf("line %d is not under WHY (column %d):\n%s", i, col, out.String())
		}
		why = append(why, lines[i][col:])
	}
	if i == len(lines) || strings.Index(lines[i], "ok") != col {
		t.Fatalf("the next row is not aligned with WHY at column %d:\n%s", col, out.String())
	}
	// Words in order; a word longer than a line is broken.
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), "") }
	if got := strings.Join(why, " "); squeeze(got) != squeeze(reason) || strings.Contains(got, "…") {
		t.Errorf("the reason under WHY is %q, want it whole:\n%s", got, out.String())
	}
	if len(why) < 3 {
		t.Errorf("a reason of %d runes on %d lines, want it wrapped:\n%s", len(reason), len(why), out.String())
	}
	for _, l := range why {
		if n := utf8.RuneCountInString(l); n > 60 {
			t.Errorf("a WHY line of %d runes: %q", n, l)
		}
	}
	// --wide keeps it on the row.
	out.Reset()
	if err := agentTable(&cliIO{stdout: &out}, true, as); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), reason) {
		t.Errorf("--wide does not print the reason whole on its row:\n%s", out.String())
	}
}
