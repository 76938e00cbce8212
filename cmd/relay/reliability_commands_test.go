package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// plantExecutable writes an executable script at dir/rel that records its
// run in marker, then runs real with the same arguments (so that only the
// marker tells the planted program from the real one).
func plantExecutable(t *testing.T, dir, rel, marker, real string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\necho \"$0\" >> %q\nexec %q \"$@\"\n", marker, real)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// linkExecutable puts real at dir/rel (a symbolic link).
func linkExecutable(t *testing.T, dir, rel, real string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, p); err != nil {
		t.Fatal(err)
	}
}

// TestReliabilityRelativeCommandsIgnoreTheTaskCwd: an agent command and an
// authority command written relative to config.toml (./bin/agent,
// auth/adapter) are resolved once, against the config's directory, when
// the daemon loads it: a task whose cwd holds executables at the same
// relative paths never runs them, whatever the daemon's own working
// directory, and the commands next to the config are found (`relay
// agents` shows them configured, with their absolute path).
func TestReliabilityRelativeCommandsIgnoreTheTaskCwd(t *testing.T) {
	t.Parallel()
	agent := dispatchtest.BuildFakeAgent(t)
	auth := gatestest.BuildFakeAuthority(t)
	for _, daemonCwd := range []string{"home", "elsewhere"} {
		t.Run("daemon started in "+daemonCwd, func(t *testing.T) {
			t.Parallel()
			home := newHome(t, "[authority]\ncommand = [\"auth/adapter\", \"allow-guarded\"]\ntimeout = \"30s\"\n\n"+
				"[agents.local]\ncommand = [\"./bin/agent\"]\n")
			linkExecutable(t, home, "bin/agent", agent)
			linkExecutable(t, home, "auth/adapter", auth)

			// A task cwd holding programs at both relative paths.
			cwd := t.TempDir()
			marker := filepath.Join(t.TempDir(), "planted-ran")
			plantExecutable(t, cwd, "bin/agent", marker, agent)
			plantExecutable(t, cwd, "auth/adapter", marker, auth)

			cmd := exec.Command(relayBin, "daemon", "--home", home)
			cmd.Env = append(os.Environ(), fastExit...)
			if daemonCwd == "home" {
				cmd.Dir = home // where ./bin/agent also resolves
			} else {
				cmd.Dir = t.TempDir()
			}
			runDaemonCmd(t, home, cmd)

			var agents struct{ Agents []model.AgentInfo }
			cliJSON(t, home, &agents, "agents")
			for _, a := range agents.Agents {
				if a.Name == "local" && (!a.Configured || a.ConfiguredReason != filepath.Join(home, "bin/agent")) {
					t.Errorf("agent local: configured %v (%s), command %q; want configured at %s",
						a.Configured, a.ConfiguredReason, a.Command, filepath.Join(home, "bin/agent"))
				}
			}

			c := apiClient(home)
			r := apiDo(t, c, "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{
				"target": "local", "prompt": "echo hello", "cwd": cwd, "mission_id": "M-1", "lease_id": "S-1"}))
			id := r.str("task_id")
			if id == "" {
				t.Fatalf("submit: %s", r.body)
			}
			var d model.TaskDetail
			eventually(t, "task "+id+" terminal", 60*time.Second, func() bool {
				cliJSON(t, home, &d, "tasks", "show", id)
				return d.State.Terminal()
			})
			if d.State != model.StateCompleted || !strings.Contains(d.Result, "hello") {
				t.Errorf("task %s: %s/%s %q, want completed by the agent next to the config", id, d.State, d.Code, d.Message)
			}
			if b, err := os.ReadFile(marker); err == nil {
				t.Errorf("a program planted in the task's cwd ran:\n%s", b)
			}
		})
	}
}

// TestReliabilityMissingAuthorityStaysClosed: an authority adapter named
// by a bare name that is not on the daemon's PATH stays unresolved and
// fails closed, as before resolution existed: the task is blocked
// authority_unavailable and no agent starts. A program of that name in
// the daemon's working directory or the task's cwd is never run.
func TestReliabilityMissingAuthorityStaysClosed(t *testing.T) {
	t.Parallel()
	agent := dispatchtest.BuildFakeAgent(t)
	const name = "relay-test-no-such-adapter"
	home := newHome(t, fmt.Sprintf("[authority]\ncommand = [%q, \"allow-guarded\"]\n\n[agents.local]\ncommand = [%q]\n", name, agent))
	marker := filepath.Join(t.TempDir(), "planted-ran")
	cwd, daemonCwd := t.TempDir(), t.TempDir()
	plantExecutable(t, cwd, name, marker, "/bin/true")
	plantExecutable(t, daemonCwd, name, marker, "/bin/true")
	agentLog := filepath.Join(t.TempDir(), "agent.log")

	cmd := exec.Command(relayBin, "daemon", "--home", home)
	cmd.Env = append(os.Environ(), append(fastExit, "FAKEAGENT_LOG="+agentLog)...)
	cmd.Dir = daemonCwd
	runDaemonCmd(t, home, cmd)

	r := apiDo(t, apiClient(home), "POST", "/v1/tasks", "claude", mustJSON(t, map[string]any{
		"target": "local", "prompt": "echo hello", "cwd": cwd, "mission_id": "M-1", "lease_id": "S-1"}))
	id := r.str("task_id")
	if id == "" {
		t.Fatalf("submit: %s", r.body)
	}
	var d model.TaskDetail
	eventually(t, "task "+id+" terminal", 60*time.Second, func() bool {
		cliJSON(t, home, &d, "tasks", "show", id)
		return d.State.Terminal()
	})
	if d.State != model.StateBlocked || d.Code != model.CodeAuthorityUnavailable {
		t.Errorf("task %s: %s/%s %q, want blocked/authority_unavailable", id, d.State, d.Code, d.Message)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("a program planted in a working directory ran:\n%s", b)
	}
	if b, err := os.ReadFile(agentLog); err == nil && len(b) > 0 {
		t.Errorf("an agent started for a task the authority never allowed:\n%s", b)
	}
}
