package dispatch_test

import (
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// Every elicitation is declined, form or URL, and recorded as a denial: the
// relay asks no user anything on an agent's behalf.
func TestElicitationsAreDeclined(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, r := e.run(t, e.task("fake", "elicit", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.Text != "elicitation:decline,decline" {
		t.Fatalf("the agent got %q, want both declined", out.Result.Text)
	}
	_, denials, _ := r.snapshot()
	var kinds []string
	for _, d := range denials {
		if d.ToolCallKind == "elicitation" && d.Outcome == "declined" {
			kinds = append(kinds, d.ToolCallTitle)
		}
	}
	if len(kinds) != 2 || !strings.Contains(kinds[0]+kinds[1], "Allow writes outside the sandbox?") ||
		!strings.Contains(kinds[0]+kinds[1], "https://example.invalid/login") {
		t.Fatalf("denials %+v, want the two elicitations", denials)
	}
}

// A session the relay did not open (an agent's own subagent session) is
// refused: told to cancel, its text kept out of the result, its permission
// requests denied like the relay's own session's, and each recorded.
func TestForeignSessionsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, r := e.run(t, e.task("fake", "foreign", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.Text != "root text" || strings.Contains(out.Result.Text, "FOREIGN") {
		t.Fatalf("result %q keeps the foreign session's text", out.Result.Text)
	}
	for _, tc := range out.Result.ToolCalls {
		if tc.ID == "sub-1" {
			t.Errorf("the foreign session's tool call is kept: %+v", tc)
		}
	}
	_, denials, _ := r.snapshot()
	var refused, denied bool
	for _, d := range denials {
		refused = refused || (d.ToolCallKind == "session" && d.Outcome == "refused" && strings.Contains(d.ToolCallTitle, "sess-other"))
		denied = denied || (d.Outcome == "selected" && strings.Contains(d.ToolCallTitle, "[session sess-other not opened by the relay]"))
	}
	if !refused || !denied {
		t.Fatalf("denials %+v, want the session refused and its permission request denied", denials)
	}
	var perm, cancel bool
	for _, ev := range e.events(t, "") {
		perm = perm || (ev["event"] == "permission" && ev["session"] == "sess-other" && ev["outcome"] == "selected:reject")
		cancel = cancel || (ev["event"] == "cancel" && ev["session"] == "sess-other")
	}
	if !perm || !cancel {
		t.Fatalf("the agent saw permission %v, cancel of the foreign session %v", perm, cancel)
	}
}

// A mode change reported for a session the relay did not open is as
// unsafe as one in its own: the run is stopped at once.
func TestForeignSessionModeChangeStopsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("guarded", "foreign-mode", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeAgentUnsafeMode)
	if !strings.Contains(out.Message, `session "sess-other", which the relay did not open, changed its mode`) {
		t.Fatalf("message %q", out.Message)
	}
}

// When every tool call failed (a sandbox that cannot start), the task
// says so beside the agent's text, which is not passed off as an answer.
func TestToolFailuresAreReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("fake", "tools-fail-2", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	f := model.ToolFailuresOf(out.Result.ToolCalls)
	if f == nil || !f.All || len(f.Failed) != 2 || len(f.Denied) != 0 {
		t.Fatalf("tool failures %+v of %+v", f, out.Result.ToolCalls)
	}
	if !strings.Contains(out.Message, "none of the agent's 2 tool calls ran") {
		t.Fatalf("message %q does not say the tools did not run", out.Message)
	}
	out, _ = e.run(t, e.task("fake", "tools-2", model.ModeReadOnly))
	if model.ToolFailuresOf(out.Result.ToolCalls) != nil || out.Message != "" {
		t.Fatalf("tools that ran: %+v, message %q", out.Result.ToolCalls, out.Message)
	}
}
