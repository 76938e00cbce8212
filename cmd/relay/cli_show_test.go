package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/model"
)

// `relay tasks show` puts the authority adapter's run in the table (its
// exit status and stderr, not only in --json), cuts long cells unless
// --wide, and ends with what to do about the code. Listings filtered by
// an agent that does not exist say so instead of printing an empty table.
func TestCLIOperatorCommands(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "crash", ""))
	launchDaemonEnv(t, home, fastExit)
	task, _ := submitAndWait(t, home, "claude", "echo crash", t.TempDir())
	if task.State != model.StateBlocked || task.Code != model.CodeAuthorityUnavailable {
		t.Fatalf("task %s/%s, want blocked/authority_unavailable", task.State, task.Code)
	}
	gateRow := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " gate ") && strings.Contains(l, "authority") {
				return l
			}
		}
		t.Fatalf("no authority gate row in:\n%s", out)
		return ""
	}
	out, errOut, code := cli(t, home, "tasks", "show", task.ID)
	if code != 0 {
		t.Fatalf("tasks show: exit %d\n%s", code, errOut)
	}
	if row := gateRow(out); !strings.HasSuffix(row, "…") {
		t.Errorf("without --wide the long detail is not cut: %q", row)
	}
	if !strings.Contains(out, "hint      `relay tasks show "+task.ID+"` shows the adapter's exit status and stderr") {
		t.Errorf("tasks show does not end with the code's hint:\n%s", out)
	}
	out, _, _ = cli(t, home, "tasks", "show", task.ID, "--wide")
	row := gateRow(out)
	for _, want := range []string{"authority_unavailable", "exit 2", "stderr: panic: fakeauthority: crash requested"} {
		if !strings.Contains(row, want) {
			t.Errorf("tasks show --wide: the authority row lacks %q:\n%s", want, row)
		}
	}

	for _, args := range [][]string{
		{"tasks", "list", "--agent", "nobody"},
		{"tasks", "list", "--agent", "nobody", "--json"},
		{"messages", "list", "--to", "nobody"},
		{"messages", "list", "--from", "nobody"},
	} {
		out, errOut, code := cli(t, home, args...)
		if code != 3 || !strings.Contains(out+errOut, "unknown_agent") || !strings.Contains(out+errOut, "run `relay agents`") {
			t.Errorf("relay %q: exit %d\n%s%s\nwant unknown_agent (exit 3) with a CLI hint", args, code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, home, "tasks", "list", "--agent", "claude"); code != 0 {
		t.Errorf("tasks list --agent claude: exit %d\n%s", code, errOut)
	}
}

// The acpDenial line of `relay tasks show` gives the hardening rule of
// the task's own mode: a read_only task's does not print the
// state_changing rule, nor a state_changing task's the read_only one.
// --json keeps the verdict as the gate wrote it.
func TestCLIShowACPDenialForTheTaskMode(t *testing.T) {
	t.Parallel()
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "claude", Command: []string{"claude-agent-acp"}, Enabled: true}},
		func(string) (string, error) { return "/nonexistent/claude-agent-acp", nil }, time.Now)
	info, ok := reg.Agent(context.Background(), "claude")
	if !ok || info.Profile.Name == "" {
		t.Fatalf("claude has no hardening profile: %+v", info.Profile)
	}
	rules := map[model.Mode]string{}
	for _, m := range model.AllModes() {
		rules[m] = info.Profile.Modes[m]
	}
	for _, mode := range model.AllModes() {
		// The gate describes the rule of the task's mode (and a verdict
		// stored before it did is cut to it when shown).
		v := gates.ACPDenial(model.DispatchPolicy{DeniesAllPermissions: true}, info, true, mode)
		v.Gate, v.At = model.GateACPDenial, time.Now()
		d := model.TaskDetail{Task: model.Task{ID: "T-1", State: model.StateWorking, Mode: mode, Target: "claude", CreatedAt: v.At},
			Verdicts: []model.Verdict{v}}
		var out strings.Builder
		if err := printTask(&out, t.TempDir(), d, true); err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "acpDenial") {
				line = l
			}
		}
		for _, m := range model.AllModes() {
			if has := strings.Contains(line, rules[m]); has != (m == mode) {
				t.Errorf("a %s task's acpDenial line has the %s rule: %v, want %v\n%s", mode, m, has, m == mode, line)
			}
		}
		if !strings.Contains(line, "pass: permissions denied") || !strings.Contains(line, "hardening profile "+info.Profile.Name) {
			t.Errorf("a %s task's acpDenial line lost the rest of the verdict:\n%s", mode, line)
		}
	}
}
