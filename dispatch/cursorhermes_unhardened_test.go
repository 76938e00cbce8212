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
// not the stand-ins' timidity.

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
		if !pathExists(f) {
			t.Errorf("%s missing: the stand-in should write without asking", f)
		}
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
}

// Hermes without its profile runs the command and the code without
// asking (approvals smart, no HERMES_EXEC_ASK) and writes its memory into
// the user's Hermes home; only the file write asks, and is denied.
func TestHermesUnhardenedActs(t *testing.T) {
	t.Parallel()
	se := newStandInEnv(t, func(o *dispatch.Options) { o.Unhardened = []string{"hermes"} })
	out, r := se.run(t, se.task("hermes", se.hermesScript(), model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	for _, f := range []string{"terminal-ran", "code-ran"} {
		if !pathExists(filepath.Join(se.cwd, f)) {
			t.Errorf("%s missing: the stand-in should run it without asking", f)
		}
	}
	if pathExists(filepath.Join(se.cwd, "inside.txt")) {
		t.Errorf("the write happened: it asks, and the relay denies")
	}
	if b, err := os.ReadFile(filepath.Join(se.agentHome, ".hermes", "memories", "MEMORY.md")); err != nil ||
		!strings.Contains(string(b), "secret plan") {
		t.Errorf("memory in the user's Hermes home: %q, %v", b, err)
	}
	if _, denials, _ := r.snapshot(); len(denials) != 1 || denials[0].ToolCallKind != "edit" {
		t.Errorf("denials %v, want write_file's", denials)
	}
}
