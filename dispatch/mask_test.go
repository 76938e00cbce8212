package dispatch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// Masked names are hidden from the agent in the cwd and every directory
// above it, whether they were there before the start or appear after it;
// everything else is the host's, live; nothing is created on the host.
func TestMasksHidePathsRaceFree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: bubblewrap is needed (scripts/test installs it)")
		}
		t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
	root := t.TempDir()
	cwd := filepath.Join(root, "project", "sub")
	gate := filepath.Join(root, "gate")
	for _, d := range []string{filepath.Join(root, ".plant"), filepath.Join(cwd, ".plant"), gate} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(filepath.Join(cwd, "visible.txt"), "x")
	fake := newEnv(t).bin
	e := newEnv(t, func(o *dispatch.Options) {
		o.Registry = dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "masked", Command: []string{fake}, Enabled: true,
			Profiles: []*hardening.Profile{{Name: "test-masks", VerifiedOn: []string{"1"}, Rules: map[model.Mode]hardening.Rule{
				model.ModeReadOnly: {Masks: []hardening.Mask{{Dir: "{cwd}", Names: []string{".plant", "late"}}},
					SetMode: "default", AcceptModes: []acp.SessionModeId{"default"}, Summary: "masks"}}}}}}, nil, nil)
	})
	task := e.task("masked", "", model.ModeReadOnly)
	task.Cwd = cwd
	paths := []string{filepath.Join(cwd, ".plant"), filepath.Join(root, ".plant"), filepath.Join(cwd, "visible.txt"),
		filepath.Join(cwd, "late"), filepath.Join(root, "project", "late"), filepath.Join(cwd, "after.txt")}
	// Planted once the agent runs; it looks once the gate (a directory
	// bound back, so live) holds "go".
	task.Prompt = "stat " + filepath.Join(gate, "go") + " " + strings.Join(paths, " ")
	r := newRecorder()
	if err := e.d.Dispatch(t.Context(), task, r); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t)
	writeFile(filepath.Join(cwd, "late"), "planted")
	writeFile(filepath.Join(root, "project", "late"), "planted")
	writeFile(filepath.Join(gate, "go"), "")
	out := r.waitFinished(t)
	wantOutcome(t, out, model.StateCompleted, "")
	want := map[string]string{paths[0]: "missing", paths[1]: "missing", paths[2]: "exists", paths[3]: "missing", paths[4]: "missing"}
	for _, f := range strings.Fields(out.Result.Text) {
		p, state, _ := strings.Cut(f, "=")
		if w, ok := want[p]; ok && state != w {
			t.Errorf("the agent sees %s %s, want %s", p, state, w)
		}
	}
	if len(strings.Fields(out.Result.Text)) != len(paths) {
		t.Errorf("the agent answered %q", out.Result.Text)
	}
	for _, d := range []string{filepath.Join(root, "project", ".plant")} {
		if _, err := os.Lstat(d); err == nil {
			t.Errorf("a mask created %s on the host", d)
		}
	}
}
