package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/model"
)

// relay agents verify end to end with the fake agent in claude's place:
// the fake never talks to a model, so no attempt can be made and the
// verification is failed as inconclusive, never verified; an agent without
// a profile is unverified. Both are kept across a restart, shown as their
// own signal, and require_verified blocks claude's tasks with
// agent_not_verified and the command to run, before any agent starts.
func TestE2EVerify(t *testing.T) {
	t.Parallel()
	// plain is an agent without a hardening profile (cursor and hermes
	// have theirs).
	extra := "[agents.ghost]\ncommand = [\"/nonexistent/ghost-acp\"]\n\n" +
		fmt.Sprintf("[agents.plain]\ncommand = [%q]\n", dispatchtest.FakeAdapter(t, "plain"))
	cfg := strings.Replace(fullConfig(t, "allow-guarded", extra),
		"[agents.claude]\n", "[agents.claude]\nrequire_verified = true\nverified_within = \"1h\"\n", 1)
	home := newHome(t, cfg)
	d := launchDaemon(t, home)

	out, errOut, code := cli(t, home, "agents", "verify", "claude", "plain", "--json", "--timeout", "30s")
	var rep struct{ Verifications []model.Verification }
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 8 || len(rep.Verifications) != 2 {
		t.Fatalf("verify: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	claude, plain := rep.Verifications[0], rep.Verifications[1]
	if claude.Status != model.HardeningFailed || !strings.HasPrefix(claude.Reason, "inconclusive: 6 of 6 attempts not run") ||
		claude.Profile != "claude-agent-acp 0.101.x" || len(claude.Attempts) != 8 {
		t.Errorf("claude: %+v", claude)
	}
	for _, a := range claude.Attempts {
		if a.Control {
			// The fake echoes its prompt: it completes, without the token.
			if a.Passed || !strings.Contains(a.Detail, "its answer lacks the token") {
				t.Errorf("claude %s control: %+v, want failed", a.Mode, a)
			}
			continue
		}
		if a.StoppedBy != model.StopNotRun || !strings.Contains(a.Detail, "never reached the model") {
			t.Errorf("claude %s %s: %s (%s), want not run", a.Mode, a.Name, a.StoppedBy, a.Detail)
		}
	}
	if plain.Status != model.HardeningUnverified || !strings.Contains(plain.Reason, "no hardening profile") || len(plain.Attempts) != 0 {
		t.Errorf("plain: %+v", plain)
	}
	if !strings.Contains(errOut, "agent_not_verified") || !strings.Contains(errOut, "claude failed, plain unverified") {
		t.Errorf("stderr does not say which agents were not verified:\n%s", errOut)
	}
	if n := countAudit(t, home, "agent.verify", ""); n != 2 {
		t.Errorf("agent.verify audit rows: %d, want 2", n)
	}
	for _, args := range [][]string{{"agents", "verify"}, {"agents", "verify", "claude", "--all"}} {
		if _, errOut, code := cli(t, home, args...); code != 2 {
			t.Errorf("relay %v: exit %d, want a usage error\n%s", args, code, errOut)
		}
	}
	if _, errOut, code := cli(t, home, "agents", "verify", "nobody"); code != 3 || !strings.Contains(errOut, "unknown_agent") {
		t.Errorf("verify nobody: exit %d\n%s", code, errOut)
	}

	// The hardening signal outlives the daemon, beside the other three.
	d.stop(t, syscall.SIGTERM)
	launchDaemon(t, home)
	var got struct{ Agents []model.AgentInfo }
	cliJSON(t, home, &got, "agents")
	for _, a := range got.Agents {
		h := a.Hardening
		switch a.Name {
		case "claude":
			if h.Status != model.HardeningFailed || h.At == nil || !h.RequireVerified || h.Current || h.VerifiedWithin != "1h" ||
				!a.Configured || !a.Enabled {
				t.Errorf("claude after a restart: %+v", a)
			}
		case "plain":
			if h.Status != model.HardeningUnverified || h.At == nil || h.RequireVerified {
				t.Errorf("plain: %+v", h)
			}
		case "codex":
			if h.Status != model.HardeningUnverified || h.At != nil || !strings.Contains(h.Reason, "never verified; run `relay agents verify codex`") {
				t.Errorf("codex was never verified: %+v", h)
			}
		case "ghost":
			if h.Status != model.HardeningUnverified || h.Reason != "no hardening profile" {
				t.Errorf("ghost: %+v", h)
			}
		}
	}
	table, _, _ := cli(t, home, "agents")
	if !strings.Contains(table, "HARDENING") || !strings.Contains(table, "tasks blocked (require_verified)") {
		t.Errorf("relay agents:\n%s", table)
	}

	// require_verified: claude's tasks are blocked; codex's are not.
	codex := startFacade(t, home, "codex", "--no-autostart")
	cwd := t.TempDir()
	submit := func(target string) string {
		return mustOK(t, codex, "submit_task", map[string]any{"target": target, "prompt": "echo hi", "mission_id": "M-1",
			"lease_id": "S-1", "cwd": cwd}).str("task_id")
	}
	blocked, ran := submit("claude"), submit("gemini")
	var show model.TaskDetail
	eventually(t, "the claude task ends", 30*time.Second, func() bool {
		cliJSON(t, home, &show, "tasks", "show", blocked)
		return show.State.Terminal()
	})
	if show.State != model.StateBlocked || show.Code != model.CodeAgentNotVerified ||
		!strings.Contains(show.Message, "run `relay agents verify claude`") || !strings.Contains(show.Message, "inconclusive") {
		t.Errorf("claude task: %s/%s (%s), want blocked/agent_not_verified with the command to run", show.State, show.Code, show.Message)
	}
	eventually(t, "the gemini task ends", 30*time.Second, func() bool {
		cliJSON(t, home, &show, "tasks", "show", ran)
		return show.State.Terminal()
	})
	if show.State != model.StateCompleted {
		t.Errorf("gemini task (no require_verified): %s/%s (%s)", show.State, show.Code, show.Message)
	}
}
