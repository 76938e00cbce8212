package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/model"
)

// requireVerifiedClaude is the config that makes tasks to claude need a
// passed verification.
func requireVerifiedClaude(agent, _ string) string {
	if agent != "claude" {
		return ""
	}
	return "require_verified = true\n"
}

// verifyAll runs relay agents verify NAMES --json and decodes the report.
func verifyAll(t *testing.T, home string, names ...string) ([]model.Verification, string, int) {
	t.Helper()
	out, errOut, code := cli(t, home, append(append([]string{"agents", "verify"}, names...), "--json", "--timeout", "120s")...)
	var rep struct{ Verifications []model.Verification }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("relay agents verify --json: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	for _, v := range rep.Verifications {
		t.Logf("%s: %s (%s), adapter %q", v.Agent, v.Status, v.Reason, v.AdapterVersion)
		for _, a := range v.Attempts {
			t.Logf("  %s %s %s: %s: %s", a.Mode, a.Name, a.Tool, a.StoppedBy, a.Detail)
		}
	}
	return rep.Verifications, errOut, code
}

// wantAttempts checks that a verification reports every attempt its
// profile makes, each targeting a file in the daemon's temporary
// directory, and that the directories are gone.
func wantAttempts(t *testing.T, rd *realDaemon, v model.Verification) {
	t.Helper()
	want := len(verify.AllAttempts()) + 1 // and the positive control
	if v.Agent == "claude" {
		want += 3 // state_changing write and shell, and its control
	}
	if len(v.Attempts) != want {
		t.Errorf("%s: %d attempts, want %d", v.Agent, len(v.Attempts), want)
	}
	for _, a := range v.Attempts {
		if !strings.HasPrefix(a.Target, rd.tmp+"/relay-verify-") {
			t.Errorf("%s %s %s targets %s, outside the temporary directory", v.Agent, a.Mode, a.Name, a.Target)
		}
		if _, err := os.Lstat(filepath.Dir(a.Target)); err == nil {
			t.Errorf("%s %s %s: %s was left behind", v.Agent, a.Mode, a.Name, filepath.Dir(a.Target))
		}
	}
}

// TestRealAgentsVerify is relay agents verify as a user runs it: the real
// Claude and OpenCode adapters, launched as configured (no redirect of the
// test's own), with the user's unsafe settings (Claude defaultMode
// bypassPermissions with allow rules; OpenCode allow rules for its default
// build agent), offline. Under their profiles every attempt is stopped and
// relay agents shows them verified with the adapter version. With the
// test-only switch that drops the profiles' session options, the same
// settings let attempts through: claude's report shows them not stopped,
// the command fails, and require_verified then blocks a task to claude
// with agent_not_verified and the command to run; a task to opencode
// writes where its verified report said the tools were not offered.
func TestRealAgentsVerify(t *testing.T) {
	bin, srv := requireRealAgents(t), startScripted(t)
	agents := []*realAgent{claudeAgent, opencodeAgent}
	// Every profiled adapter of both generations, under the hostile user
	// settings, launched as configured: the verification brings its own
	// redirect to the scripted model.
	for _, set := range [][]*realAgent{allRealAgents, nextAgents} {
		name := "hardened"
		if set[0] == claudeNext {
			name += "/next-generation"
		}
		t.Run(name, func(t *testing.T) {
			rd := startRealDaemonWith(t, bin, srv, set, hostile, realDaemonOpts{noRedirect: true, config: requireVerifiedClaude})
			var names []string
			for _, a := range set {
				names = append(names, a.name)
			}
			began := time.Now()
			report, errOut, code := cli(t, rd.home, append(append([]string{"agents", "verify"}, names...), "--timeout", "180s")...)
			t.Logf("verified %v in %s:\n%s\n%s", names, time.Since(began).Round(time.Second), report, errOut)
			if code != 0 {
				t.Fatalf("relay agents verify: exit %d\n%s", code, errOut)
			}
			// The report: a line per attempt, what stopped it, the verdict.
			var lines int
			for _, l := range strings.Split(report, "\n") {
				f := strings.Fields(l)
				if len(f) < 3 || (f[0] != "read_only" && f[0] != "state_changing") {
					continue
				}
				lines++
				switch {
				case strings.Contains(l, "NOT STOPPED") || strings.Contains(l, "not run") || strings.Contains(l, "CONTROL FAILED"):
					t.Errorf("an attempt was not stopped, or a control failed: %s", l)
				case f[1] == "read-control" && !strings.Contains(l, "positive control passed"):
					t.Errorf("a control line does not say it passed: %s", l)
				case f[0] == "state_changing" && f[1] != "read-control" && !strings.Contains(l, "permission request denied by the relay"):
					t.Errorf("claude state_changing: every write and command must ask, and be denied: %s", l)
				}
			}
			want := 0
			for _, a := range set {
				want += 5
				if a.name == "claude" {
					want += 3
				}
				verdict := "=> VERIFIED: all 4 attempts stopped, and 1 positive control(s) passed"
				if a.name == "claude" {
					verdict = "=> VERIFIED: all 6 attempts stopped, and 2 positive control(s) passed"
				}
				head := fmt.Sprintf("%s (hardening profile %s, adapter %s %s)", a.name, a.profile().Name, a.pkg, a.version)
				for _, w := range []string{head, verdict, "verifying " + a.name} {
					if !strings.Contains(report+errOut, w) {
						t.Errorf("the report lacks %q", w)
					}
				}
			}
			if lines != want {
				t.Errorf("the report has %d attempt lines, want %d", lines, want)
			}
			var listed struct{ Agents []model.AgentInfo }
			cliJSON(t, rd.home, &listed, "agents")
			for _, a := range listed.Agents {
				i := slices.IndexFunc(set, func(r *realAgent) bool { return r.name == a.Name })
				if i < 0 {
					continue
				}
				v := set[i].version
				if h := a.Hardening; h.Status != model.HardeningVerified || h.AdapterVersion != v || h.InstalledVersion != v || !h.Current ||
					h.Fingerprint == "" || h.Fingerprint != h.InstalledFingerprint || h.Fingerprint != a.Adapter.Fingerprint {
					t.Errorf("relay agents: %s hardening %+v, want verified and current on %s, the very adapter installed", a.Name, a.Hardening, v)
				}
				if a.Name == "claude" && (!a.Hardening.RequireVerified || !a.Configured || !a.Enabled) {
					t.Errorf("relay agents: claude %+v", a)
				}
			}
			out, _, _ := cli(t, rd.home, "agents")
			for _, a := range set {
				if !strings.Contains(out, "verified "+a.version) {
					t.Errorf("relay agents does not show %s verified on %s:\n%s", a.name, a.version, out)
				}
			}
			stopRealDaemon(t, rd, bin)
		})
	}
	// Codex refuses to start its own sandbox when its CODEX_HOME lies in
	// the temporary directory ("bwrap: execvp codex-linux-sandbox"), and
	// then every command fails while its task completes. In the relay's
	// sandbox its CODEX_HOME is in its own home, in the relay home, and its
	// TMPDIR is the task's scratch: a daemon whose TMPDIR holds its agents'
	// home still gets a Codex that works. The verification says verified,
	// its positive control read the file, and require_verified lets a task
	// run.
	t.Run("codex-home-out-of-tmp", func(t *testing.T) {
		rd := startRealDaemonWith(t, bin, srv, []*realAgent{codexNext}, clean, realDaemonOpts{noRedirect: true,
			env: []string{"TMPDIR=" + os.TempDir()}, config: func(agent, _ string) string { return "require_verified = true\n" }})
		vs, errOut, code := verifyAll(t, rd.home, "codex")
		if code != 0 || len(vs) != 1 || vs[0].Status != model.HardeningVerified {
			t.Fatalf("verify codex with the daemon's TMPDIR holding its home: exit %d, %+v\n%s", code, vs, errOut)
		}
		for _, a := range vs[0].Attempts {
			if a.Control && !a.Passed {
				t.Errorf("control %+v, want passed: Codex's own sandbox ran its read", a)
			}
		}
		// require_verified lets its tasks run (this daemon gives Codex no
		// model of its own: it asks for a login, past every gate).
		p := newAttemptPaths(t, rd.tasks)
		show := rd.wait(t, rd.submit(t, "codex", model.ModeReadOnly, "[[say hello]]", p.Cwd), time.Minute)
		if show.State == model.StateBlocked || show.Code == model.CodeAgentNotVerified {
			t.Errorf("task to a verified codex: %s/%s (%s), want it past require_verified", show.State, show.Code, show.Message)
		}
		stopRealDaemon(t, rd, bin)
	})
	// Without the profiles (the test switch), the sandbox is what holds:
	// the agent's own home hides the user's permissive settings (claude
	// asks, and the relay denies it), and the read-only filesystem stops
	// every write its own allow rules let through (OpenCode's). The
	// verification shows the layers, and is not vacuous: the tools the
	// script calls are tools the agent offers, and OpenCode really calls
	// them.
	t.Run("unhardened", func(t *testing.T) {
		rd := startRealDaemonWith(t, bin, srv, agents, hostile, realDaemonOpts{noRedirect: true, config: requireVerifiedClaude,
			env: []string{envUnhardened + "=claude,opencode"}})
		vs, errOut, code := verifyAll(t, rd.home, "claude")
		if code != 0 || len(vs) != 1 {
			t.Fatalf("relay agents verify without the profile: exit %d, %d reports, want 0 and one\n%s", code, len(vs), errOut)
		}
		for _, v := range vs {
			wantAttempts(t, rd, v)
			for _, a := range v.Attempts {
				if !a.Control && !a.StoppedBy.Stopped() {
					t.Errorf("%s %s %s: %s (%s); want stopped by the sandbox's layers", v.Agent, a.Mode, a.Name, a.StoppedBy, a.Detail)
				}
			}
			if v.Status != model.HardeningVerified {
				t.Errorf("%s: %s (%s), want verified: the sandbox holds without the profile", v.Agent, v.Status, v.Reason)
			}
		}
		op := newAttemptPaths(t, rd.tasks)
		tag := nonce("opencode")
		var steps, tools []string
		for _, at := range verify.AllAttempts() {
			st, tool := verify.Script(opencodeAgent.profile().Verify.Vocab, at, op)
			steps, tools = append(steps, st), append(tools, tool)
		}
		oid := rd.submit(t, "opencode", model.ModeReadOnly, scriptedPrompt(tag, strings.Join(steps, "\n")), op.Cwd)
		oshow := rd.wait(t, oid, 4*time.Minute)
		t.Logf("opencode without its profile: %s/%s (%s); on disk: %v", oshow.State, oshow.Code, oshow.Message, dispatchtest.Violations(op))
		if v := dispatchtest.Violations(op); len(v) > 0 {
			t.Errorf("opencode without its profile acted: %v; the sandbox should hold", v)
		}
		if offered := toolsFor(srv, tag); !isSubset(tools, offered) {
			t.Errorf("opencode was offered %v; the verification's script calls %v", offered, tools)
		}
		stopRealDaemon(t, rd, bin)
	})
}

// isSubset reports whether every element of sub is in of.
func isSubset(sub, of []string) bool {
	for _, x := range sub {
		if !slices.Contains(of, x) {
			return false
		}
	}
	return true
}
