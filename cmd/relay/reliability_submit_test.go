package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
)

// holdPipe makes a named pipe for the fake authority's -hold (or
// FAKEAUTHORITY_HOLD): the adapter answers only once release has opened
// and closed the pipe's other end. release waits (at most a minute) for the
// adapter to open its end. A test that fails first releases it at cleanup,
// so no adapter is left waiting.
func holdPipe(t *testing.T) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "authority.hold")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the adapter opens its end
			if err == nil {
				err = f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("release the authority: %v", err)
			}
			released = true
		case <-time.After(time.Minute):
			t.Fatal("the authority adapter was not consulted within a minute")
		}
	}
	t.Cleanup(func() {
		if !released {
			if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
	return path, release
}

// A slow but valid authority: submit_task answers once
// the task is durably submitted, before any gate runs, however long the
// authority then takes. Here the adapter's timeout (120 s) is longer than
// the facade's own client timeout (30 s), and the adapter does not answer
// at all until the test releases it, after the submit's answer: an answer
// that waited for the gates could only be daemon_unavailable, with the task
// stored anyway (a retry would duplicate it). The task is then gated and run
// exactly once, and get_task and list_tasks show how it ended.
func TestReliabilitySlowAuthoritySubmitAnswersAtOnce(t *testing.T) {
	t.Parallel()
	authLog := filepath.Join(t.TempDir(), "authority.log")
	agentLog := filepath.Join(t.TempDir(), "agent.log")
	hold, release := holdPipe(t)
	cfg := fullConfig(t, "allow-guarded", "")
	cfg = strings.Replace(cfg, `timeout = "5s"`, `timeout = "120s"`, 1)
	home := newHome(t, cfg)
	launchDaemonEnv(t, home, []string{"FAKEAUTHORITY_LOG=" + authLog, "FAKEAUTHORITY_HOLD=" + hold, "FAKEAGENT_LOG=" + agentLog})
	c := startFacade(t, home, "codex")

	t0 := time.Now()
	r := callTool(t, c, "submit_task", map[string]any{"target": "claude", "prompt": "echo slow authority",
		"mission_id": "M-slow", "lease_id": "S-slow", "cwd": t.TempDir()})
	took := time.Since(t0)
	if r.isError || r.str("state") != string(model.StateSubmitted) || r.str("task_id") == "" {
		t.Fatalf("submit_task with the authority still deciding, after %v: error=%v %s; want state submitted at once",
			took, r.isError, r.text)
	}
	t.Logf("submit_task answered %s in %v while the authority had not answered", r.str("state"), took)
	id := r.str("task_id")
	// The authority cannot have answered: the task is still submitted, alone.
	l := mustOK(t, c, "list_tasks", map[string]any{})
	if ts, _ := l.data["tasks"].([]any); len(ts) != 1 {
		t.Fatalf("list_tasks: %d tasks, want 1: %s", len(ts), l.text)
	}
	if g := mustOK(t, c, "get_task", map[string]any{"task_id": id}); g.str("state") != string(model.StateSubmitted) {
		t.Fatalf("task %s is %s before the authority answered, want submitted", id, g.str("state"))
	}

	release()
	var final toolResult
	eventually(t, "task "+id+" completed", 60*time.Second, func() bool {
		final = mustOK(t, c, "get_task", map[string]any{"task_id": id})
		return model.State(final.str("state")).Terminal()
	})
	if final.str("state") != string(model.StateCompleted) {
		t.Fatalf("task %s ended %s/%s (%s), want completed", id, final.str("state"), final.code(), final.str("message"))
	}
	l = mustOK(t, c, "list_tasks", map[string]any{})
	if ts, _ := l.data["tasks"].([]any); len(ts) != 1 {
		t.Fatalf("list_tasks after the run: %d tasks, want 1: %s", len(ts), l.text)
	}
	if runs := gatestest.ReadFakeLog(t, authLog); len(runs) != 1 {
		t.Errorf("the authority was consulted %d times, want once", len(runs))
	}
	if n := len(agentStarts(t, agentLog)); n != 1 {
		t.Errorf("%d agents started, want 1", n)
	}
	var authorized int
	if err := openRO(t, home).QueryRow(`SELECT count(*) FROM task_events WHERE task_id = ? AND to_state = 'authorized'`, id).Scan(&authorized); err != nil {
		t.Fatal(err)
	}
	if authorized != 1 {
		t.Errorf("%d authorized events, want 1", authorized)
	}
	auditVerify(t, home)
}
