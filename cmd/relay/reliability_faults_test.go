package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// Process faults end to end through the daemon: the
// authority adapter and the agent are real subprocesses that misbehave.

// submitAndWait submits a task over the socket API and waits for it to
// end; it returns the task and how long the submit call took (its answer
// comes once the task is stored, before its gates run).
func submitAndWait(t *testing.T, home, target, prompt, cwd string) (model.Task, time.Duration) {
	t.Helper()
	c := apiClient(home)
	t0 := time.Now()
	r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
		"target": target, "prompt": prompt, "mission_id": "M-f", "lease_id": "S-f", "cwd": cwd}))
	took := time.Since(t0)
	if r.status != 200 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	id := r.str("task_id")
	var task model.Task
	eventually(t, "task "+id+" terminal", 60*time.Second, func() bool {
		g := apiDo(t, c, "GET", "/v1/tasks/"+id, "codex", nil)
		_ = json.Unmarshal(g.body, &task)
		return task.State.Terminal()
	})
	return task, took
}

// authorityVerdict returns the stored detail of a task's authority gate
// verdict, as `relay tasks show --json` prints it.
func authorityVerdict(t *testing.T, home, id string) model.Verdict {
	t.Helper()
	var show model.TaskDetail
	cliJSON(t, home, &show, "tasks", "show", id)
	for _, v := range show.Verdicts {
		if v.Gate == model.GateAuthority {
			return v
		}
	}
	t.Fatalf("task %s has no authority verdict: %+v", id, show.Verdicts)
	return model.Verdict{}
}

func TestReliabilityProcessFaults(t *testing.T) {
	t.Parallel()

	// An adapter that starts a grandchild holding its stdout, answers and
	// exits: the relay reads for a short grace, kills the adapter's process
	// group (the grandchild with it) and goes on; the task runs.
	t.Run("authority fork-hold", func(t *testing.T) {
		t.Parallel()
		authLog := filepath.Join(t.TempDir(), "authority.log")
		home := newHome(t, fullConfig(t, "fork-hold", ""))
		launchDaemonEnv(t, home, append([]string{"FAKEAUTHORITY_LOG=" + authLog}, fastExit...))
		task, _ := submitAndWait(t, home, "claude", "echo forked", t.TempDir())
		if task.State != model.StateCompleted {
			t.Errorf("task %s/%s (%s), want completed", task.State, task.Code, task.Message)
		}
		// The consultation, as the relay timed it, lasted the adapter's run
		// and the short grace, not the grandchild's life.
		v := authorityVerdict(t, home, task.ID)
		took, err := time.ParseDuration(v.Detail["elapsed"])
		if err != nil || took > 5*time.Second {
			t.Errorf("the consultation took %q: a grandchild holding the adapter's stdout held the relay", v.Detail["elapsed"])
		}
		t.Logf("consultation of a fork-hold adapter took %v", took)
		runs := gatestest.ReadFakeLog(t, authLog)
		if len(runs) != 1 || runs[0].GrandchildPID == 0 {
			t.Fatalf("authority runs %+v, want one with a grandchild", runs)
		}
		eventually(t, "the adapter's grandchild killed with its group", 10*time.Second, func() bool {
			return !alive(runs[0].GrandchildPID)
		})
		auditVerify(t, home)
	})

	// An adapter that writes 10 MiB to stderr, then allows: the answer is
	// used, and only a bounded excerpt (head and tail) is audited.
	t.Run("authority stderr flood", func(t *testing.T) {
		t.Parallel()
		home := newHome(t, fullConfig(t, "stderr-flood", ""))
		launchDaemonEnv(t, home, fastExit)
		task, _ := submitAndWait(t, home, "claude", "echo flooded", t.TempDir())
		if task.State != model.StateCompleted {
			t.Errorf("task %s/%s (%s), want completed", task.State, task.Code, task.Message)
		}
		v := authorityVerdict(t, home, task.ID)
		ex := v.Detail["stderr"]
		if !v.Passed || !strings.HasPrefix(ex, "STDERR-HEAD") || !strings.HasSuffix(strings.TrimSpace(ex), "STDERR-TAIL") ||
			!strings.Contains(ex, "bytes omitted") || len(ex) > 5<<10 {
			t.Errorf("authority verdict passed=%v with a stderr excerpt of %d bytes: %.120q…", v.Passed, len(ex), ex)
		}
		t.Logf("10 MiB of adapter stderr kept as a %d-byte excerpt", len(ex))
		// The audit row holds the same bounded excerpt.
		db := openRO(t, home)
		var data string
		if err := db.QueryRow(`SELECT data FROM audit_log WHERE kind = 'gate.verdict' AND task_id = ? AND data LIKE '%STDERR-HEAD%'`, task.ID).Scan(&data); err != nil {
			t.Fatalf("audit row of the authority verdict: %v", err)
		}
		if len(data) > 8<<10 {
			t.Errorf("audit row of %d bytes for a 10 MiB stderr", len(data))
		}
		for _, f := range []string{"relay.db", "relay.log"} {
			if fi, err := os.Stat(filepath.Join(home, f)); err == nil && fi.Size() > 4<<20 {
				t.Errorf("%s is %d bytes after a 10 MiB stderr", f, fi.Size())
			}
		}
		auditVerify(t, home)
	})

	// An agent that writes 10 MiB to stderr before speaking ACP: its
	// stderr is drained into the task's log, which is bounded; the task
	// completes.
	t.Run("agent stderr flood", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		script := filepath.Join(dir, "flood-agent")
		body := fmt.Sprintf("#!/bin/sh\nhead -c %d /dev/zero | tr '\\000' e >&2\nexec %q \"$@\"\n", 10<<20, dispatchtest.BuildFakeAgent(t))
		if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
		home := newHome(t, fullConfig(t, "allow-guarded", fmt.Sprintf("[agents.flood]\ncommand = [%q]\n", script)))
		launchDaemonEnv(t, home, fastExit)
		task, _ := submitAndWait(t, home, "flood", "echo after the flood", dir)
		if task.State != model.StateCompleted || !strings.Contains(task.Result, "after the flood") {
			t.Errorf("task %s/%s (%s) result %q, want completed", task.State, task.Code, task.Message, task.Result)
		}
		fi, err := os.Stat(filepath.Join(home, "logs", "tasks", task.ID+".log"))
		if err != nil {
			t.Fatalf("task log: %v", err)
		}
		t.Logf("10 MiB of agent stderr kept as a %d-byte task log", fi.Size())
		if fi.Size() > 1<<20+4<<10 {
			t.Errorf("task log is %d bytes for a 10 MiB stderr (bound 1 MiB)", fi.Size())
		}
		auditVerify(t, home)
	})
}

// The authority adapter is contained: it sees only PATH, HOME, LANG, TZ and
// what [authority] env names; a descendant that leaves its session and
// process group and drops its environment dies with the consultation; and
// neither the adapter nor such a descendant survives a kill -9 of the
// daemon in the middle of a consultation.
//
// The daemons here run the relay's own __agent-shim (ownShim), not the
// tests' race-free build of it.
func TestReliabilityAuthorityAdapterIsContained(t *testing.T) {
	t.Parallel()

	t.Run("minimal environment", func(t *testing.T) {
		t.Parallel()
		authLog := filepath.Join(t.TempDir(), "authority.log")
		cfg := strings.Replace(fullConfig(t, "allow-guarded", ""), "env = "+fakeAuthorityEnv,
			`env = ["FAKEAUTHORITY_LOG", "HAI_AUTHORITY_URL=http://127.0.0.1:1", "UNSET_IN_DAEMON"]`, 1)
		home := newHome(t, cfg)
		launchDaemonEnv(t, home, append([]string{"FAKEAUTHORITY_LOG=" + authLog,
			"RELAY_TEST_SECRET=s3cr3t", "LANG=C.UTF-8", "TZ=UTC"}, fastExit...))
		task, _ := submitAndWait(t, home, "claude", "echo env", t.TempDir())
		if task.State != model.StateCompleted {
			t.Fatalf("task %s/%s (%s), want completed", task.State, task.Code, task.Message)
		}
		runs := gatestest.ReadFakeLog(t, authLog)
		if len(runs) != 1 {
			t.Fatalf("authority runs %+v, want one", runs)
		}
		want := []string{"FAKEAUTHORITY_LOG", "HAI_AUTHORITY_URL", "HOME", "LANG", "PATH", "TZ"}
		if !slices.Equal(runs[0].Env, want) {
			t.Errorf("the adapter's environment holds %v, want exactly %v", runs[0].Env, want)
		}
	})

	t.Run("escaped descendant ends with the consultation", func(t *testing.T) {
		t.Parallel()
		authLog := filepath.Join(t.TempDir(), "authority.log")
		home := newHome(t, fullConfig(t, "escape", ""))
		launchDaemonEnv(t, home, append([]string{"FAKEAUTHORITY_LOG=" + authLog, ownShim}, fastExit...))
		task, _ := submitAndWait(t, home, "claude", "echo escaped", t.TempDir())
		if task.State != model.StateCompleted {
			t.Fatalf("task %s/%s (%s), want completed", task.State, task.Code, task.Message)
		}
		runs := gatestest.ReadFakeLog(t, authLog)
		if len(runs) != 1 || runs[0].GrandchildPID == 0 {
			t.Fatalf("authority runs %+v, want one with a grandchild", runs)
		}
		escaped := runs[0].GrandchildPID
		t.Cleanup(func() { _ = syscall.Kill(escaped, syscall.SIGKILL) })
		// The task completed after the consultation ended, so the shim had
		// swept the adapter's tree by then.
		if alive(escaped) {
			t.Errorf("the adapter's descendant %d (own session, empty environment) outlived the consultation", escaped)
		}
	})

	t.Run("daemon killed mid-consultation", func(t *testing.T) {
		t.Parallel()
		authLog := filepath.Join(t.TempDir(), "authority.log")
		home := newHome(t, strings.Replace(fullConfig(t, "escape-sleep", ""), `timeout = "5s"`, `timeout = "5m"`, 1))
		d := launchDaemonEnv(t, home, append([]string{"FAKEAUTHORITY_LOG=" + authLog, ownShim}, fastExit...))
		go func() { // its answer is lost with the daemon
			_, _ = apiTry(apiClient(home), "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
				"target": "claude", "prompt": "echo never", "mission_id": "M-f", "lease_id": "S-f", "cwd": t.TempDir()}))
		}()
		var run gatestest.FakeRun
		eventually(t, "the adapter started its descendant", 30*time.Second, func() bool {
			b, _ := os.ReadFile(authLog)
			return len(b) > 0 && json.Unmarshal(b[:strings.IndexByte(string(b), '\n')+1], &run) == nil && run.GrandchildPID > 0
		})
		t.Cleanup(func() {
			_ = syscall.Kill(run.PID, syscall.SIGKILL)
			_ = syscall.Kill(run.GrandchildPID, syscall.SIGKILL)
		})
		d.stop(t, syscall.SIGKILL)
		eventually(t, "adapter and its escaped descendant gone after the daemon's kill -9", 10*time.Second, func() bool {
			return !alive(run.PID) && !alive(run.GrandchildPID)
		})
	})
}
