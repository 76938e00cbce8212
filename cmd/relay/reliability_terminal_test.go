package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// hostileText holds what a client or an agent could store to take over the
// operator's terminal: an OSC title change ending in BEL, a clear screen,
// a carriage return (overwrites the line), C1 CSI, and bidi overrides and
// isolates (reorder what is shown).
const hostileText = "A\x1b]0;pwned\x07B\x1b[2JC\rD\u009b31mE\u202eF\u2066G\x7fH"

// rawControl returns the first character of s a terminal would act on
// rather than show: a C0 control other than newline, DEL, a C1 control, a
// bidi override or isolate, or a byte that is not UTF-8.
func rawControl(s string) (string, bool) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Sprintf("byte %#x at %d", s[i], i), true
		case r == '\n':
		case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return fmt.Sprintf("%U at %d", r, i), true
		}
	}
	return "", false
}

// TestReliabilityCLIEscapesControlCharacters: text a client or an agent
// stored (a message body, a task's context_id, cwd, mission_id and result,
// a verdict, an agent's command) reaches the operator's terminal with every
// control character, C1 control and bidi override shown as an escape
// (\x1b, \u202e), never raw, in every command that prints it; --json keeps
// the exact text.
func TestReliabilityCLIEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	auth := gatestest.BuildFakeAuthority(t)
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[authority]\ncommand = [%q, \"allow-guarded\"]\ntimeout = \"5s\"\n\n", auth)
	for _, n := range []string{"claude", "codex"} {
		fmt.Fprintf(&cfg, "[agents.%s]\ncommand = [%q]\n\n", n, dispatchtest.FakeAdapter(t, n))
	}
	// An agent whose command does not exist: `relay agents` shows the
	// command and why it is not configured, both naming it.
	fmt.Fprintf(&cfg, "[agents.evil]\ncommand = [\"/nonexistent/%s\"]\n", tomlEscape(hostileText))
	home := newHome(t, cfg.String())
	launchDaemon(t, home)
	c := apiClient(home)

	cwd := filepath.Join(t.TempDir(), "cwd\x1b[2J\u202e\rX")
	if err := os.Mkdir(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	if r := apiDo(t, c, "POST", "/v1/messages", "claude", mustJSON(t, map[string]any{
		"to": "codex", "body": hostileText, "context_id": hostileText})); r.status != 200 {
		t.Fatalf("send: %s", r.body)
	}
	r := apiDo(t, c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{
		"target": "codex", "prompt": "echo " + hostileText, "context_id": hostileText, "cwd": cwd,
		"mission_id": "M-1", "lease_id": "S-1"}))
	done := r.str("task_id")
	r = apiDo(t, c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{
		"target": "codex", "prompt": "echo x", "cwd": cwd, "mission_id": "M" + hostileText, "lease_id": "S-1"}))
	rejected := r.str("task_id")
	if done == "" || rejected == "" {
		t.Fatalf("submit: %s", r.body)
	}
	for _, id := range []string{done, rejected} {
		eventually(t, "task "+id+" terminal", 60*time.Second, func() bool {
			var d model.TaskDetail
			cliJSON(t, home, &d, "tasks", "show", id)
			return d.State.Terminal()
		})
	}

	for _, args := range [][]string{
		{"messages", "list"}, {"tasks", "list"}, {"tasks", "show", done}, {"tasks", "show", rejected}, {"agents"},
	} {
		out, errOut, code := cli(t, home, args...)
		if code != 0 {
			t.Fatalf("relay %v: exit %d\n%s", args, code, errOut)
		}
		for what, s := range map[string]string{"stdout": out, "stderr": errOut} {
			if at, bad := rawControl(s); bad {
				t.Errorf("relay %v: raw control character in %s (%s):\n%q", args, what, at, s)
			}
		}
		// The hostile text is there, escaped, where the command shows it.
		if args[0] != "tasks" || args[1] != "list" {
			if !strings.Contains(out, `\x1b`) {
				t.Errorf("relay %v: no visible \\x1b escape:\n%s", args, out)
			}
		}
		if args[0] == "tasks" && args[1] == "show" && args[2] == done {
			for _, want := range []string{`A\x1b]0;pwned\x07B\x1b[2JC\rD\u009b31mE\u202eF\u2066G\x7fH`, `cwd\x1b[2J\u202e\rX`} {
				if !strings.Contains(out, want) {
					t.Errorf("relay tasks show: %q not shown:\n%s", want, out)
				}
			}
		}
	}
	// An error message is escaped too (here it quotes the operator's own
	// argument).
	if _, errOut, code := cli(t, home, "tasks", "show", "T-\x1b[2J\u202e"); code == 0 {
		t.Error("tasks show of a hostile id succeeded")
	} else if at, bad := rawControl(errOut); bad {
		t.Errorf("relay tasks show: raw control character in the error (%s):\n%q", at, errOut)
	}

	// --json keeps the exact text.
	var d model.TaskDetail
	cliJSON(t, home, &d, "tasks", "show", done)
	if d.ContextID != hostileText || d.Cwd != cwd || !strings.Contains(d.Result, hostileText) {
		t.Errorf("tasks show --json: context_id %q, cwd %q, result %q", d.ContextID, d.Cwd, d.Result)
	}
	var ms struct{ Messages []model.Message }
	cliJSON(t, home, &ms, "messages", "list", "--from", "claude")
	if len(ms.Messages) != 1 || ms.Messages[0].Body != hostileText || ms.Messages[0].ContextID != hostileText {
		t.Errorf("messages list --json: %+v", ms.Messages)
	}
}

// tomlEscape writes s as the inside of a TOML basic string, every control
// and non-ASCII character as \uXXXX.
func tomlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r >= 0x7f || r == '"' || r == '\\' {
			fmt.Fprintf(&b, `\u%04X`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
