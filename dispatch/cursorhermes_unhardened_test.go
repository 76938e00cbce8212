//go:build relaytest

package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// Without their profiles (the test-only switch), the same scripts make the
// stand-ins act: what the profiles tests show held is the profiles' doing,
// not the stand-ins' timidity. In read_only the relay's sandbox, the layer
// that does not depend on the agent, still stops every effect; in
// state_changing (the cwd writable) the effects inside the cwd land.

// sandboxStopped reports whether a stand-in's tool ran without asking and
// the sandbox stopped its effect (a read-only file system).
func sandboxStopped(ev map[string]any) bool {
	res, _ := ev["result"].(string)
	return ev["asked"] == false && strings.Contains(strings.ToLower(res), "read-only file system")
}

// Cursor without its profile starts in mode agent, reads the user's and
// the project's config, and writes inside and outside the cwd without
// asking (approvalMode allowlist); only the command asks, and the relay
// denies it; its own requests are still declined.
func TestCursorUnhardenedWrites(t *testing.T) {
	t.Parallel()
	se := newStandInEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"cursor"} })
	plant(t, se.cwd, ".cursor/cli.json", `{"permissions":{"allow":[]}}`)
	out, r := se.run(t, se.task("cursor", se.cursorScript(), model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	for _, f := range []string{filepath.Join(se.cwd, "inside.txt"), filepath.Join(se.outside, "outside.txt")} {
		if pathExists(f) {
			t.Errorf("%s exists: the sandbox did not hold read_only", f)
		}
	}
	tried := 0
	for _, ev := range se.events(t, "standin") {
		if ev["tool"] == "Write" {
			if !sandboxStopped(ev) {
				t.Errorf("Write %v: want it tried without asking and stopped by the sandbox", ev)
			}
			tried++
		}
	}
	if tried != 2 {
		t.Errorf("%d writes tried, want 2", tried)
	}
	if pathExists(filepath.Join(se.cwd, "shell-ran")) {
		t.Errorf("the command ran: it asks, and the relay denies")
	}
	if n := se.events(t, "session_new")[0]; n["project_config"] != true || n["approval"] != "allowlist" {
		t.Errorf("unhardened Cursor's config: %v", n)
	}
	_, denials, _ := r.snapshot()
	var kinds []string
	for _, d := range denials {
		kinds = append(kinds, d.ToolCallKind)
	}
	if len(denials) != 3 || strings.Count(strings.Join(kinds, ","), "extension") != 2 {
		t.Errorf("denials %v, want the command's permission request and two cursor/* requests", denials)
	}

	// state_changing: the cwd is writable, and the write inside it lands
	// without asking; outside it the sandbox still holds.
	out, _ = se.run(t, se.task("cursor", se.cursorScript(), model.ModeStateChanging))
	wantOutcome(t, out, model.StateCompleted, "")
	if !pathExists(filepath.Join(se.cwd, "inside.txt")) {
		t.Errorf("state_changing: inside.txt missing: the stand-in should write without asking")
	}
	if pathExists(filepath.Join(se.outside, "outside.txt")) {
		t.Errorf("state_changing: outside.txt exists: the sandbox did not hold outside the cwd")
	}
}

// Hermes without its profile runs the command and the code without
// asking (approvals smart, no HERMES_EXEC_ASK) and writes its memory into
// the user's Hermes home; only the file write asks, and is denied.
func TestHermesUnhardenedActs(t *testing.T) {
	t.Parallel()
	se := newStandInEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"hermes"} })
	out, r := se.run(t, se.task("hermes", se.hermesScript(), model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	for _, f := range []string{"terminal-ran", "code-ran", "inside.txt"} {
		if pathExists(filepath.Join(se.cwd, f)) {
			t.Errorf("%s exists: the sandbox did not hold read_only", f)
		}
	}
	if _, err := os.Stat(filepath.Join(se.agentHome, ".hermes", "memories", "MEMORY.md")); err == nil {
		t.Errorf("the memory reached the user's Hermes home: the sandbox did not hold")
	}
	for _, ev := range se.events(t, "standin") {
		switch ev["tool"] {
		case "memory":
			// Remembered without asking, into the task's own home, which
			// ends with the task: the user's Hermes home is untouched.
			if res, _ := ev["result"].(string); ev["asked"] != false || strings.Contains(res, se.agentHome) {
				t.Errorf("memory %v: want it made without asking, outside the user's home", ev)
			}
		case "terminal", "execute_code":
			if ev["asked"] != false {
				t.Errorf("%v: unhardened Hermes runs it without asking", ev)
			}
		}
	}
	if _, denials, _ := r.snapshot(); len(denials) != 1 || denials[0].ToolCallKind != "edit" {
		t.Errorf("denials %v, want write_file's", denials)
	}

	// state_changing: the command and the code run in the writable cwd
	// without asking.
	out, _ = se.run(t, se.task("hermes", se.hermesScript(), model.ModeStateChanging))
	wantOutcome(t, out, model.StateCompleted, "")
	for _, f := range []string{"terminal-ran", "code-ran"} {
		if !pathExists(filepath.Join(se.cwd, f)) {
			t.Errorf("state_changing: %s missing: the stand-in should run it without asking", f)
		}
	}
}
