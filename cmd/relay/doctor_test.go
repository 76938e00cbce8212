package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// relayEnv runs the relay with args and exactly env, and returns its
// stdout, stderr and exit code.
func relayEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(relayBin, args...)
	cmd.Env = env
	return runRelay(t, cmd)
}

// runRelay runs a relay command and returns its stdout, stderr and exit
// code.
func runRelay(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// pathWithout returns a PATH of one directory holding links to the
// programs the tests run through PATH but bwrap, and the directory.
func pathWithout(t *testing.T, drop string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"sh", "env", "node", "sleep", "cat", "ls"} {
		if p == drop {
			continue
		}
		if full, err := exec.LookPath(p); err == nil {
			if err := os.Symlink(full, filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// relay doctor, on a home whose daemon runs with everything a task
// needs: every check passes, and --json says the same.
func TestDoctorAllClear(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	out, errOut, code := cli(t, home, "doctor")
	if code != 0 || !strings.Contains(out, "ok   sandbox") || !strings.Contains(out, "ok   authority") ||
		!strings.Contains(out, "agent claude") || !strings.Contains(out, "ok   daemon") {
		t.Fatalf("relay doctor: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep struct {
		Checks   []check
		Blocking int
	}
	cliJSON(t, home, &rep, "doctor")
	if rep.Blocking != 0 || len(rep.Checks) < 8 {
		t.Errorf("relay doctor --json: %+v", rep)
	}
	// Each agent says what holds read_only for it: Codex, which runs a
	// sandbox of its own, without Landlock.
	var listed struct{ Agents []model.AgentInfo }
	cliJSON(t, home, &listed, "agents")
	for _, a := range listed.Agents {
		want := "bubblewrap"
		if a.Name == "codex" {
			want = "bubblewrap (Landlock left out"
		}
		if a.Sandbox.Problem != "" || !strings.HasPrefix(a.Sandbox.Layers, want) || a.Name != "codex" && strings.Contains(a.Sandbox.Layers, "left out") {
			t.Errorf("relay agents --json: %s's sandbox is %+v, want layers %q…", a.Name, a.Sandbox, want)
		}
	}
}

// Without bubblewrap, relay doctor says so, with what to install, and
// exits non-zero; no authority is a failure too. And a daemon started
// without bubblewrap runs no task of any agent: each fails
// agent_sandbox_unavailable, whose hint says what to install.
func TestDoctorAndTasksWithoutBubblewrap(t *testing.T) {
	t.Parallel()
	noBwrap := pathWithout(t, "bwrap")
	env := append(os.Environ(), fastExit...)
	env = append(env, "PATH="+noBwrap)

	bare := newHome(t, "")
	out, errOut, code := relayEnv(t, env, "doctor", "--home", bare)
	if code == 0 || !strings.Contains(out, "FAIL sandbox") || !strings.Contains(out, "apt-get install bubblewrap") ||
		!strings.Contains(out, "FAIL authority") || !strings.Contains(errOut, string(model.CodeAgentSandboxUnavailable)) {
		t.Fatalf("relay doctor without bubblewrap nor authority: exit %d\n%s\n%s", code, out, errOut)
	}

	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	d := launchDaemonArgv(t, home, []string{relayBin, "daemon", "--home", home}, env)
	if !strings.Contains(d.stderr.String(), "agent_sandbox_unavailable") {
		t.Errorf("the daemon did not say at start that the sandbox cannot run:\n%s", d.stderr.String())
	}
	c := apiClient(home)
	cwd := t.TempDir()
	for _, agent := range []string{"claude", "codex", "gemini", "cursor", "opencode", "hermes"} {
		r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{"target": agent, "prompt": "echo hi",
			"mission_id": "M-1", "lease_id": "S-1", "cwd": cwd}))
		task := taskEnded(t, c, r.str("task_id"))
		if task.str("state") != "failed" || task.str("code") != string(model.CodeAgentSandboxUnavailable) ||
			!strings.Contains(task.str("hint"), "apt-get install bubblewrap") {
			t.Errorf("%s without bubblewrap: %s/%s (%s; hint %q), want failed/agent_sandbox_unavailable naming the install",
				agent, task.str("state"), task.str("code"), task.str("message"), task.str("hint"))
		}
	}
	out, _, _ = relayEnv(t, env, "agents", "--home", home)
	if !strings.Contains(out, "sandbox: unavailable") {
		t.Errorf("relay agents does not say the sandbox is unavailable:\n%s", out)
	}
	// Per agent too: each row says its tasks fail, and why.
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		if !regexp.MustCompile(`(?m)^` + agent + ` .*tasks fail agent_sandbox_unavailable`).MatchString(out) {
			t.Errorf("relay agents: %s's row does not say its tasks fail for want of the sandbox:\n%s", agent, out)
		}
	}
	var listed struct {
		Sandbox struct{ OK bool } `json:"sandbox"`
		Agents  []model.AgentInfo
	}
	out, _, _ = relayEnv(t, env, "agents", "--json", "--home", home)
	if err := json.Unmarshal([]byte(out), &listed); err != nil || listed.Sandbox.OK {
		t.Errorf("relay agents --json: sandbox %+v (%v), want not ok\n%s", listed.Sandbox, err, out)
	}
	for _, a := range listed.Agents {
		if a.Sandbox.Layers != "" || a.Sandbox.Problem == "" {
			t.Errorf("relay agents --json: %s's sandbox is %+v, want unavailable, with the problem", a.Name, a.Sandbox)
		}
	}
}

// An adapter whose package.json wants a newer Node than the one it would
// run with (its #! line's `node`, found on the daemon's PATH) is named by
// relay doctor with both versions and what to do: npm installs it with a
// warning only, and it may fail in the middle of a session.
func TestDoctorNodeTooOld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodeDir := filepath.Join(dir, "node20")
	writeExec(t, filepath.Join(nodeDir, "node"), "#!/bin/sh\necho v20.20.2\n")
	pkg := filepath.Join(dir, "lib", "node_modules", "@agentclientprotocol", "claude-agent-acp")
	writeFile(t, filepath.Join(pkg, "package.json"), `{"name":"@agentclientprotocol/claude-agent-acp","version":"0.101.0","engines":{"node":">=22"}}`)
	script := filepath.Join(pkg, "dist", "index.js")
	writeExec(t, script, "#!/usr/bin/env node\n")
	cfg := fmt.Sprintf("[authority]\ncommand = [%q, \"allow-guarded\"]\n\n[agents.claude]\ncommand = [%q]\n", gatestest.BuildFakeAuthority(t), script)
	home := newHome(t, cfg)
	launchDaemonEnv(t, home, []string{"PATH=" + nodeDir + ":" + os.Getenv("PATH")})
	out, errOut, _ := cli(t, home, "doctor")
	if !strings.Contains(out, "WARN agent claude") || !strings.Contains(out, "needs Node >=22 (its package.json engines), but it runs with "+filepath.Join(nodeDir, "node")+", which is 20.20.2") ||
		!strings.Contains(out, "relay daemon --pin-path") {
		t.Fatalf("relay doctor:\n%s\n%s", out, errOut)
	}
	var listed struct{ Agents []model.AgentInfo }
	cliJSON(t, home, &listed, "agents")
	for _, a := range listed.Agents {
		if a.Name == "claude" && !strings.Contains(a.Adapter.RuntimeProblem, "needs Node >=22") {
			t.Errorf("relay agents --json: claude's adapter %+v has no runtime_problem", a.Adapter)
		}
	}
}

// writeExec writes an executable file, making its directory.
func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// An agent whose last probe failed (here: it needs its user to log in) is
// a warning in relay doctor, with the probe's reason and what to do.
func TestDoctorNamesAFailedProbe(t *testing.T) {
	t.Parallel()
	fake := dispatchtest.BuildFakeAgent(t)
	cfg := fmt.Sprintf("[authority]\ncommand = [%q, \"allow-guarded\"]\n\n[agents.custom]\ncommand = [%q, \"auth\"]\n", gatestest.BuildFakeAuthority(t), fake)
	home := newHome(t, cfg)
	launchDaemon(t, home)
	if _, errOut, code := cli(t, home, "agents", "probe", "custom"); code == 0 || !strings.Contains(errOut, "auth") {
		t.Fatalf("relay agents probe custom: exit %d\n%s", code, errOut)
	}
	out, errOut, _ := cli(t, home, "doctor")
	if !strings.Contains(out, "WARN agent custom") || !strings.Contains(out, "its last probe failed: auth required") ||
		!strings.Contains(out, "then `relay agents probe custom`") {
		t.Fatalf("relay doctor:\n%s\n%s", out, errOut)
	}
}
