package verify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
)

// newStandInEnv is a verification env whose cursor and hermes are the fake
// agent's stand-ins, under their real profiles, with a HOME of their own.
func newStandInEnv(t *testing.T, opts ...func(*dispatch.Options)) *verifyEnv {
	t.Helper()
	var reg *dispatch.Registry
	e := newVerifyEnv(t, append([]func(*dispatch.Options){func(o *dispatch.Options) {
		bin := dispatchtest.BuildFakeAgent(t)
		reg = dispatch.NewRegistry([]dispatch.AgentSpec{
			{Name: "cursor", Command: []string{bin, "cursor"}, Enabled: true},
			{Name: "hermes", Command: []string{bin, "hermes"}, Enabled: true},
		}, nil, nil)
		o.Registry = reg
		o.Env = append(o.Env, "HOME="+t.TempDir())
	}}, opts...)...)
	e.reg = reg
	return e
}

// Cursor's model cannot be pointed at a local server: its verification
// starts nothing, lists every attempt and control as not run and why, and
// says which checks it made without the model. Never verified.
func TestVerifyCursorSaysWhatItCannotRun(t *testing.T) {
	t.Parallel()
	e := newStandInEnv(t)
	v := e.verify(t, "cursor")
	if v.Status != model.HardeningUnverified || v.Profile != "cursor-agent 2025+" {
		t.Errorf("status %s profile %q (%s), want unverified under the cursor profile", v.Status, v.Profile, v.Reason)
	}
	if len(v.Attempts) != 5 {
		t.Errorf("%d attempts, want read_only's 4 and its control", len(v.Attempts))
	}
	for _, a := range v.Attempts {
		if a.Mode != model.ModeReadOnly || a.StoppedBy != model.StopNotRun || a.Passed ||
			!strings.Contains(a.Detail, "not verifiable offline: Cursor's model cannot be redirected") {
			t.Errorf("%+v: want not run, not verifiable offline", a)
		}
	}
	for _, w := range []string{"not run: read_only write-outside, read_only write-inside, read_only edit-inside, read_only shell, read_only read-control",
		"checked without the model: the relay's cli-config.json passed", "bubblewrap found"} {
		if !strings.Contains(v.Reason, w) {
			t.Errorf("reason %q lacks %q", v.Reason, w)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "logs", "verify")); err == nil {
		t.Errorf("a session was started")
	}
}

// Hermes takes an OpenAI-compatible base_url: its verification runs
// against the scripted model (chat completions) like the other agents'.
// Under the profile (mode plan) every attempt is refused by the agent and
// the control reads its file.
func TestVerifyHermesAgainstTheScriptedModel(t *testing.T) {
	t.Parallel()
	e := newStandInEnv(t)
	v := e.verify(t, "hermes")
	if v.Status != model.HardeningVerified || v.Profile != "hermes-agent 0.x" || v.AdapterVersion != "0.21.3" {
		t.Errorf("status %s profile %q version %q (%s), want verified", v.Status, v.Profile, v.AdapterVersion, v.Reason)
	}
	for name, stop := range stops(v) {
		if stop != model.StopRefusedByAgent {
			t.Errorf("%s: %s, want refused by the agent (mode plan)", name, stop)
		}
	}
	if ctl := controls(v); len(ctl) != 1 || !ctl["read_only read-control"] {
		t.Errorf("controls %v, want read_only's passed", ctl)
	}
	for _, a := range v.Attempts {
		if !a.Control && !strings.Contains(a.Detail, "blocked: mode plan") {
			t.Errorf("%s: %q", a.Name, a.Detail)
		}
	}
}
