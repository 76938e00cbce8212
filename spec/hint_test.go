package spec_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// placeholder finds what a reader would take for a blank to fill: a slot
// ({agent}), or a word in capitals that is not one of the names a hint
// may use as they are (ACP, MCP, PATH, ...).
var (
	slotRe      = regexp.MustCompile(`\{[a-z_]+\}`)
	capsWordRe  = regexp.MustCompile(`\b[A-Z][A-Z_]+\b`)
	hintAcronym = []string{"ACP", "MCP", "HAI", "PATH", "JSON", "UTF", "TOML"}
)

func placeholders(hint string) []string {
	found := slotRe.FindAllString(hint, -1)
	for _, w := range capsWordRe.FindAllString(hint, -1) {
		if !slices.Contains(hintAcronym, w) {
			found = append(found, w)
		}
	}
	return found
}

// Every code of the catalogue, as a task that ended with it would carry
// it: the filled hint names the task's agent and id where it speaks of
// them, and leaves no placeholder for the user to fill (no slot, no NAME,
// no ID, no AGENT). An error's default hint (Hint) has none either.
func TestTaskHintsLeaveNoPlaceholder(t *testing.T) {
	t.Parallel()
	const agent, id = "gemini", "T-01KBXZ0000000000000000000A"
	for _, ci := range spec.Catalogue() {
		if ci.Kind == spec.KindTask {
			task := model.Task{ID: id, State: ci.State, Code: ci.Code, Target: agent, Caller: "claude",
				Message: "gemini: refused before any prompt: no profile covers it. The cause is the adapter, not your settings"}
			hints := []string{spec.TaskHint(task)}
			task.Message = "gemini: session mode yolo, which the gemini hardening profile does not accept"
			hints = append(hints, spec.TaskHint(task))
			for _, h := range hints {
				if h == "" {
					t.Errorf("%s: a task that ends with it carries no hint", ci.Code)
				}
				if p := placeholders(h); len(p) > 0 {
					t.Errorf("%s: the task's hint %q leaves %q to fill", ci.Code, h, p)
				}
				if strings.Contains(ci.Hint+causeHints(ci), spec.SlotAgent) && !strings.Contains(h, agent) {
					t.Errorf("%s: the task's hint %q does not name its agent %s", ci.Code, h, agent)
				}
				if strings.Contains(ci.Hint, spec.SlotTask) && !strings.Contains(h, id) {
					t.Errorf("%s: the task's hint %q does not name the task %s", ci.Code, h, id)
				}
			}
		}
		if p := placeholders(spec.Hint(ci.Code)); len(p) > 0 {
			t.Errorf("%s: the default hint %q leaves %q to fill", ci.Code, spec.Hint(ci.Code), p)
		}
		if ci.Kind != spec.KindTask && slotRe.MatchString(ci.Hint+causeHints(ci)) {
			t.Errorf("%s: a %s code's hint has a slot, but no task to fill it from: %q", ci.Code, ci.Kind, ci.Hint)
		}
	}
}

func causeHints(ci spec.CodeInfo) string {
	var b strings.Builder
	for _, c := range ci.Causes {
		b.WriteString(c.Hint)
	}
	return b.String()
}

// A hint never contradicts its message: an agent_unsafe_mode task whose
// message says the adapter is the cause, not the user's settings (an
// adapter generation no profile covers, a mode the adapter does not
// offer), is not told to check its settings; one whose message blames a
// mode the session was put in is.
func TestTaskHintFollowsTheCauseTheMessageNames(t *testing.T) {
	t.Parallel()
	task := func(msg string) model.Task {
		return model.Task{ID: "T-01KBXZ0000000000000000000A", State: model.StateFailed, Code: model.CodeAgentUnsafeMode, Target: "claude", Message: msg}
	}
	for _, msg := range []string{
		"claude: refused before any prompt: no hardening profile covers @agentclientprotocol/claude-agent-acp 0.200.0. The cause is the adapter, not your settings; `relay agents` shows what is installed",
		"claude: the adapter does not offer session mode default, which the claude-0.101 hardening profile does not accept for read_only tasks; the agent was stopped before the prompt was sent (adapter x 1). The cause is the adapter (x 1), not your settings: install a version its profile was verified on",
	} {
		h := spec.TaskHint(task(msg))
		if strings.Contains(h, "settings (") || strings.Contains(strings.ToLower(h), "defaultmode") || !strings.Contains(h, "not your settings") {
			t.Errorf("message %q:\nhint %q contradicts it", msg, h)
		}
		if !strings.Contains(h, "relay agents verify claude") {
			t.Errorf("hint %q: want the verify command for claude", h)
		}
	}
	h := spec.TaskHint(task("claude: session mode bypassPermissions, which the claude-0.101 hardening profile does not accept for read_only tasks; the agent was stopped at once. Check the agent's own settings"))
	if !strings.Contains(h, "claude's own settings") {
		t.Errorf("a mode the settings chose: hint %q, want the settings named", h)
	}
	if got := spec.TaskHint(model.Task{ID: "T-1", State: model.StateCompleted}); got != "" {
		t.Errorf("a completed task: hint %q, want none", got)
	}
}

// A task's hint, filled for the longest agent name and any cause, stays
// within model.MaxTaskHintBytes as JSON encodes it: the listings reserve
// that much for it.
func TestTaskHintsFitTheirReserve(t *testing.T) {
	t.Parallel()
	agent := strings.Repeat("a", 64)
	for _, ci := range spec.Catalogue() {
		if ci.Kind != spec.KindTask {
			continue
		}
		for _, msg := range []string{"", "The cause is the adapter, not your settings"} {
			h := spec.TaskHint(model.Task{ID: "T-01KBXZ0000000000000000000A", Code: ci.Code, Target: agent, Message: msg})
			if n := model.EncodedLen(h); n > model.MaxTaskHintBytes {
				t.Errorf("%s: the hint encodes to %d bytes, over model.MaxTaskHintBytes (%d)", ci.Code, n, model.MaxTaskHintBytes)
			}
		}
	}
}
