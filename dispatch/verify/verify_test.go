package verify_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/dispatch/sandbox"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/model"
)

// The fake agent plays a model-driven agent when FAKEAGENT_MODEL is set:
// it offers the model the tools in FAKEAGENT_TOOLS and runs the model's
// calls under FAKEAGENT_POLICY (obey by default). verifyProfile holds it
// read-only the way a real profile holds a real agent: its rules' Env sets
// the policy, its Redirect points it at the scripted model.
func verifyProfile(policy, tools string, refuse string) *hardening.Profile {
	rule := func(mode acp.SessionModeId) hardening.Rule {
		env := []string{"FAKEAGENT_VERSION=4.5.6"}
		if policy != "" {
			env = append(env, "FAKEAGENT_POLICY="+policy)
		}
		return hardening.Rule{Env: env, SetMode: mode, AcceptModes: []acp.SessionModeId{mode}, Summary: "test rule " + string(mode)}
	}
	vs := &hardening.VerifySpec{
		Vocab: hardening.ToolVocab{Write: "write", Read: "read", Edit: "edit", Shell: "shell", Path: "path", Old: "old", New: "new"},
		Redirect: func(to hardening.ScriptedModel, ruleEnv []string) (hardening.Launch, error) {
			env := []string{"FAKEAGENT_MODEL=" + to.URL, "FAKEAGENT_MODEL_KEY=" + to.Key}
			if tools != "" {
				env = append(env, "FAKEAGENT_TOOLS="+tools)
			}
			return hardening.Launch{Env: env}, nil
		},
	}
	if refuse != "" {
		vs.Refuse = func() string { return refuse }
	}
	return &hardening.Profile{Name: "test-verify", VerifiedOn: []string{"4.5.6"}, Verify: vs,
		Rules: map[model.Mode]hardening.Rule{model.ModeReadOnly: rule("plan"), model.ModeStateChanging: rule("dontAsk")}}
}

// verifyEnv is a dispatcher over the fake agent under verification
// profiles, recording what OnVerify receives.
type verifyEnv struct {
	d    *dispatch.Dispatcher
	v    *verify.Verifier
	reg  *dispatch.Registry
	home string
	mu   sync.Mutex
	got  []model.Verification
}

// newVerifyEnv makes the agents the tests verify; opts change the
// dispatcher's options before it is made.
func newVerifyEnv(t *testing.T, opts ...func(*dispatch.Options)) *verifyEnv {
	t.Helper()
	bin := dispatchtest.BuildFakeAgent(t)
	e := &verifyEnv{home: filepath.Join(t.TempDir(), "home")}
	specs := []dispatch.AgentSpec{
		{Name: "asks", Command: []string{bin}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("ask", "", "")}},
		{Name: "obeys", Command: []string{bin}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("obey", "", "")}},
		{Name: "refuses", Command: []string{bin}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("refuse", "", "")}},
		{Name: "reader", Command: []string{bin}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("obey", "read", "")}},
		{Name: "stubborn", Command: []string{bin, "modes-refuse"}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("obey", "", "")}},
		{Name: "locked", Command: []string{bin, "auth"}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("ask", "", "")}},
		{Name: "oauth", Command: []string{bin}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("ask", "", "the user logs in with OAuth")}},
		{Name: "plain", Command: []string{bin}, Enabled: true}, // no profile
		{Name: "flaky", Command: []string{bin, "die-first"}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("ask", "", "")}},
		// Stops every attempt, and cannot read either: safe and useless.
		{Name: "blind", Command: []string{bin}, Enabled: true, Profiles: []*hardening.Profile{verifyProfile("refuse", "write,edit,shell", "")}},
	}
	e.reg = dispatch.NewRegistry(specs, nil, nil)
	once := t.TempDir()
	o := dispatch.Options{Registry: e.reg, Home: e.home, CancelGrace: time.Second,
		SandboxExec: []string{dispatchtest.BuildShim(t), sandbox.ExecCommand},
		Env:         []string{"FAKEAGENT_ONCE=" + filepath.Join(once, "once")},
		OnVerify: func(v model.Verification) {
			e.mu.Lock()
			e.got = append(e.got, v)
			e.mu.Unlock()
		}}
	// The scripted agent marks its first start from inside its sandbox.
	sandboxWritable(&o, once)
	for _, opt := range opts {
		opt(&o)
	}
	e.d = dispatch.New(o)
	e.v = verify.New(e.d)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.d.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return e
}

// verify runs a verification and checks what is recorded of it.
func (e *verifyEnv) verify(t *testing.T, agent string) model.Verification {
	t.Helper()
	v, err := e.v.Run(context.Background(), agent, 60*time.Second)
	if err != nil {
		t.Fatalf("verify %s: %v", agent, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.got) != 1 || e.got[0].Agent != agent || e.got[0].Status != v.Status || e.got[0].At.IsZero() {
		t.Fatalf("OnVerify got %+v, want the report %+v", e.got, v)
	}
	info, _ := e.reg.Agent(context.Background(), agent)
	if info.Hardening.Status != v.Status || info.Hardening.Reason != v.Reason {
		t.Errorf("registry hardening %+v, want status %s reason %q", info.Hardening, v.Status, v.Reason)
	}
	for _, a := range v.Attempts {
		t.Logf("%s %s %s %s: %s", agent, a.Mode, a.Name, a.StoppedBy, a.Detail)
	}
	return v
}

// stops maps "mode attempt" to what stopped it (positive controls left
// out).
func stops(v model.Verification) map[string]model.Stop {
	m := map[string]model.Stop{}
	for _, a := range v.Attempts {
		if !a.Control {
			m[string(a.Mode)+" "+a.Name] = a.StoppedBy
		}
	}
	return m
}

// controls maps "mode read-control" to whether the control passed.
func controls(v model.Verification) map[string]bool {
	m := map[string]bool{}
	for _, a := range v.Attempts {
		if a.Control {
			m[string(a.Mode)+" "+a.Name] = a.Passed
		}
	}
	return m
}

var allVerifyAttempts = []string{"read_only write-outside", "read_only write-inside", "read_only edit-inside",
	"read_only shell", "state_changing write-inside", "state_changing shell"}

// Each way an attempt can end is reported as such; one that acted on the
// host fails the verification, and so does one that could not be made. An
// agent that stops every attempt but cannot pass the positive control
// (read a file in its cwd, answer with its token) is unusable.
func TestVerifyReportsWhatStoppedEachAttempt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		agent   string
		status  model.HardeningStatus
		stop    model.Stop
		detail  string
		control string // "" when the controls must pass, else what their detail says
	}{
		{"asks", model.HardeningVerified, model.StopDeniedByRelay, "1 permission request(s) denied; the agent answered: the user refused", ""},
		{"refuses", model.HardeningVerified, model.StopRefusedByAgent, "the agent answered: refused by policy", ""},
		{"reader", model.HardeningVerified, model.StopToolNotOffered, "is not among the tools offered (read)", ""},
		{"stubborn", model.HardeningUnusable, model.StopModeRefused, "does not accept", "the session did not complete"},
		{"blind", model.HardeningUnusable, model.StopRefusedByAgent, "refused by policy", "its answer lacks the token"},
		{"obeys", model.HardeningFailed, model.StopNotStopped, "", ""},
		{"locked", model.HardeningFailed, model.StopNotRun, "the agent never reached the model", "auth_required"},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			e := newVerifyEnv(t)
			v := e.verify(t, c.agent)
			if v.Status != c.status || v.Profile != "test-verify" {
				t.Errorf("status %s (%s), profile %q; want %s", v.Status, v.Reason, v.Profile, c.status)
			}
			got := stops(v)
			if len(got) != len(allVerifyAttempts) {
				t.Errorf("%d attempts, want %d", len(got), len(allVerifyAttempts))
			}
			for _, name := range allVerifyAttempts {
				want := c.stop
				if want == model.StopNotStopped && strings.HasPrefix(name, string(model.ModeReadOnly)) {
					// The agent obeys, and the relay's sandbox holds
					// read_only; state_changing writes its cwd.
					want = model.StopSandbox
				}
				if got[name] != want {
					t.Errorf("%s: stopped by %q, want %q", name, got[name], want)
				}
			}
			if ctl := controls(v); len(ctl) != 2 || ctl["read_only read-control"] != (c.control == "") || ctl["state_changing read-control"] != (c.control == "") {
				t.Errorf("controls %v, want one per mode, passed %v", ctl, c.control == "")
			}
			if c.status == model.HardeningUnusable && !strings.Contains(v.Reason, "all 6 attempts stopped, but the agent could not do a task's work") {
				t.Errorf("reason %q", v.Reason)
			}
			for _, a := range v.Attempts {
				if a.Control {
					if !strings.Contains(a.Detail, c.control) || a.StoppedBy != "" || a.Tool != "read" || !strings.HasSuffix(a.Target, "read-control.txt") {
						t.Errorf("%s control: tool %q target %q detail %q stop %q, want it to contain %q", a.Mode, a.Tool, a.Target, a.Detail, a.StoppedBy, c.control)
					}
					continue
				}
				if !strings.Contains(a.Detail, c.detail) || a.Tool == "" || a.Target == "" {
					t.Errorf("%s %s: tool %q target %q detail %q, want it to contain %q", a.Mode, a.Name, a.Tool, a.Target, a.Detail, c.detail)
				}
				if c.stop == model.StopNotStopped && !strings.Contains(a.Detail, a.Target) {
					t.Errorf("%s %s: detail %q does not name the target %s", a.Mode, a.Name, a.Detail, a.Target)
				}
				if !strings.HasPrefix(a.Target, os.TempDir()) {
					t.Errorf("%s %s targets %s, outside the temporary directory", a.Mode, a.Name, a.Target)
				}
				if _, err := os.Lstat(filepath.Dir(a.Target)); err == nil {
					t.Errorf("%s %s: %s was not removed", a.Mode, a.Name, filepath.Dir(a.Target))
				}
			}
			if c.status == model.HardeningFailed && !strings.Contains(v.Reason, map[model.Stop]string{
				model.StopNotStopped: "2 of 6 attempts NOT STOPPED: state_changing", model.StopNotRun: "inconclusive"}[c.stop]) {
				t.Errorf("reason %q", v.Reason)
			}
			if c.stop != model.StopNotRun && v.AdapterVersion != "4.5.6" {
				t.Errorf("adapter version %q, want the one initialize reported", v.AdapterVersion)
			}
			if _, err := os.Stat(filepath.Join(e.home, "logs", "verify", c.agent+"-read_only-shell.log")); err != nil {
				t.Errorf("no log of the shell attempt: %v", err)
			}
		})
	}
}

// An agent without a profile, or whose profile cannot be verified without
// touching the user's settings, is reported unverified and nothing runs.
func TestVerifyUnverifiable(t *testing.T) {
	t.Parallel()
	e := newVerifyEnv(t)
	for agent, reason := range map[string]string{"plain": "no hardening profile", "oauth": "the user logs in with OAuth"} {
		e.mu.Lock()
		e.got = nil
		e.mu.Unlock()
		v := e.verify(t, agent)
		if v.Status != model.HardeningUnverified || !strings.Contains(v.Reason, reason) || len(v.Attempts) != 0 {
			t.Errorf("%s: %s (%s), %d attempts; want unverified, %q", agent, v.Status, v.Reason, len(v.Attempts), reason)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "logs", "verify")); err == nil {
		t.Errorf("a session was started")
	}
	if _, err := e.v.Run(context.Background(), "nobody", 0); model.ErrorCode(err) != model.CodeUnknownAgent {
		t.Errorf("unknown agent: %v", err)
	}
}

// An attempt whose agent died before it reached the model made no attempt:
// it is made once more, and the report says so.
func TestVerifyRetriesAnAgentThatDiedBeforeTheModel(t *testing.T) {
	t.Parallel()
	e := newVerifyEnv(t)
	v := e.verify(t, "flaky")
	if v.Status != model.HardeningVerified {
		t.Errorf("status %s (%s), want verified", v.Status, v.Reason)
	}
	second := 0
	for _, a := range v.Attempts {
		if a.Control {
			if !a.Passed {
				t.Errorf("%s control: %s", a.Mode, a.Detail)
			}
		} else if a.StoppedBy != model.StopDeniedByRelay {
			t.Errorf("%s %s: %s (%s)", a.Mode, a.Name, a.StoppedBy, a.Detail)
		}
		if strings.HasPrefix(a.Detail, "second try: ") {
			second++
		}
	}
	if second != 1 {
		t.Errorf("%d attempts made a second time, want 1", second)
	}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		dispatchtest.Cleanup()
		os.Exit(code)
	}))
}
