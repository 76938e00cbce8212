package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// watcher is a running `relay tasks watch … --json`: its lines, decoded,
// arrive on lines as the command prints them.
type watcher struct {
	cmd   *exec.Cmd
	lines chan model.WatchEvent
	done  chan struct{}
	err   error
	errb  *syncBuffer
}

func startWatch(t *testing.T, home string, args ...string) *watcher {
	t.Helper()
	cmd := exec.Command(relayBin, append(append([]string{"tasks", "watch"}, args...), "--json", "--home", home)...)
	cmd.Env = append(os.Environ(), fastExit...)
	w := &watcher{cmd: cmd, lines: make(chan model.WatchEvent, 64), done: make(chan struct{}), errb: &syncBuffer{}}
	cmd.Stderr = w.errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev model.WatchEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = model.WatchEvent{Kind: "unparsable", Message: sc.Text()}
			}
			w.lines <- ev
		}
		close(w.lines)
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		go func() { // unblock the reader if the test left lines unread
			for range w.lines {
			}
		}()
		<-w.done
	})
	return w
}

// next returns the next line, failing if none comes within d.
func (w *watcher) next(t *testing.T, d time.Duration) model.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-w.lines:
		if !ok {
			t.Fatalf("relay tasks watch ended (%v) before the next line; stderr: %s", w.err, w.errb.String())
		}
		if ev.Kind == "unparsable" {
			t.Fatalf("relay tasks watch --json printed a line that is not a JSON event: %q", ev.Message)
		}
		return ev
	case <-time.After(d):
		t.Fatalf("relay tasks watch printed no line within %s; stderr: %s", d, w.errb.String())
	}
	return model.WatchEvent{}
}

// nextTransition skips verdicts and returns the next transition.
func (w *watcher) nextTransition(t *testing.T, d time.Duration) model.WatchEvent {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev := w.next(t, time.Until(deadline))
		if ev.Kind == model.WatchTransition {
			return ev
		}
		if ev.Kind != model.WatchVerdict {
			t.Fatalf("unexpected watch line %+v", ev)
		}
	}
}

// quiet fails if a line comes within d.
func (w *watcher) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ev := <-w.lines:
		t.Fatalf("relay tasks watch printed %+v while nothing should have happened", ev)
	case <-time.After(d):
	}
}

func (w *watcher) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(d):
		t.Fatalf("relay tasks watch still runs %s later; stderr: %s", d, w.errb.String())
	}
	if ee, ok := w.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if w.err != nil {
		t.Fatal(w.err)
	}
	return 0
}

// relay tasks watch ID follows one task live: its
// history first, then each transition as it commits, and it exits 0 at
// the terminal state. The authority is held on a named pipe, so the task
// sits in submitted until the test releases it: nothing but the history
// may be printed before, and the rest must arrive after, in order.
func TestWatchFollowsATaskLive(t *testing.T) {
	t.Parallel()
	hold, release := holdPipe(t)
	cfg := strings.Replace(fullConfig(t, "allow-guarded", ""), `timeout = "5s"`, `timeout = "120s"`, 1)
	home := newHome(t, cfg)
	launchDaemonEnv(t, home, []string{"FAKEAUTHORITY_HOLD=" + hold})
	c := apiClient(home)
	r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
		"target": "claude", "prompt": "echo watched", "mission_id": "M-w", "lease_id": "S-w", "cwd": t.TempDir()}))
	if r.status != 200 || r.str("state") != string(model.StateSubmitted) {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	id := r.str("task_id")

	w := startWatch(t, home, id)
	if ev := w.next(t, 20*time.Second); ev.Kind != model.WatchSubmitted || ev.TaskID != id || ev.To != model.StateSubmitted {
		t.Fatalf("first line %+v, want the task's submission", ev)
	}
	w.quiet(t, 500*time.Millisecond) // held in submitted: nothing happens

	released := time.Now()
	release()
	var got []string
	for _, want := range []model.State{model.StateAuthorized, model.StateWorking, model.StateCompleted} {
		ev := w.nextTransition(t, 60*time.Second)
		got = append(got, string(ev.From)+"→"+string(ev.To))
		if ev.To != want || ev.TaskID != id || ev.Seq == 0 {
			t.Fatalf("transitions so far %v (last %+v), want %s next", got, ev, want)
		}
		if ev.At.Before(released.Add(-time.Second)) {
			t.Fatalf("%s happened at %v, before the authority was released (%v)", want, ev.At, released)
		}
	}
	t.Logf("followed %s: %v", id, got)
	if code := w.exit(t, 10*time.Second); code != 0 {
		t.Fatalf("relay tasks watch exited %d at the terminal state, want 0; stderr: %s", code, w.errb.String())
	}

	// A finished task: its history, and exit 0 at once.
	out, errOut, code := cli(t, home, "tasks", "watch", id)
	if code != 0 || !strings.Contains(out, "working → completed") || !strings.Contains(out, "gate       authority pass") {
		t.Fatalf("relay tasks watch of a finished task: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("relay tasks watch %s, once it ended:\n%s", id, out)
	// An unknown task is not_found, exit 3, as JSON with --json.
	out, _, code = cli(t, home, "tasks", "watch", "T-00000000000000000000000000", "--json")
	if code != 3 || !strings.Contains(out, `"code": "not_found"`) {
		t.Fatalf("relay tasks watch of an unknown task: exit %d %s, want 3 not_found", code, out)
	}
}

// relay tasks watch without an id follows every task from now on, until
// interrupted: a task submitted after it started shows up as it moves,
// one that ended before does not, and SIGINT ends it with exit 0.
func TestWatchEveryTask(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	c := apiClient(home)
	submit := func(prompt string) string {
		t.Helper()
		r := apiDo(t, c, "POST", "/v1/tasks", "codex", mustJSON(t, map[string]any{
			"target": "claude", "prompt": prompt, "mission_id": "M-w", "lease_id": "S-w", "cwd": t.TempDir()}))
		if r.status != 200 {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		return r.str("task_id")
	}
	before := submit("echo before")
	taskEnded(t, c, before)

	w := startWatch(t, home)
	// The watch follows from the moment its first call answers, which the
	// test cannot see: submit short tasks until one shows up, and only then
	// the task whose every line is checked.
	for seen := false; !seen; {
		probe := submit("echo probe")
		select {
		case ev, ok := <-w.lines:
			if !ok {
				t.Fatalf("relay tasks watch ended: %v; stderr: %s", w.err, w.errb.String())
			}
			if ev.TaskID == before {
				t.Fatalf("a task that ended before the watch began was shown: %+v", ev)
			}
			seen = true
		case <-time.After(3 * time.Second):
			t.Logf("no line yet for %s; submitting another", probe)
		}
	}
	id := submit("hang")
	// next line of task id, skipping the probes' lines.
	nextOf := func(kind string) model.WatchEvent {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ev := w.next(t, time.Until(deadline))
			if ev.TaskID == before {
				t.Fatalf("a task that ended before the watch began was shown: %+v", ev)
			}
			if ev.TaskID == id && ev.Kind == kind {
				return ev
			}
		}
	}
	if ev := nextOf(model.WatchSubmitted); ev.To != model.StateSubmitted {
		t.Fatalf("line %+v, want the submission of %s", ev, id)
	}
	for _, want := range []model.State{model.StateAuthorized, model.StateWorking} {
		if ev := nextOf(model.WatchTransition); ev.To != want {
			t.Fatalf("line %+v, want %s of %s", ev, want, id)
		}
	}
	// The task is working (its agent hangs) and the watch saw it: cancel it.
	if _, errOut, code := cli(t, home, "tasks", "cancel", id); code != 0 {
		t.Fatalf("relay tasks cancel: %d %s", code, errOut)
	}
	if ev := nextOf(model.WatchTransition); ev.To != model.StateCanceled {
		t.Fatalf("line %+v, want %s canceled", ev, id)
	}
	// Following every task does not end at a task's terminal state: only
	// an interrupt ends it.
	select {
	case <-w.done:
		t.Fatalf("relay tasks watch ended on its own (%v); stderr: %s", w.err, w.errb.String())
	case <-time.After(300 * time.Millisecond):
	}
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := w.exit(t, 10*time.Second); code != 0 {
		t.Fatalf("relay tasks watch exited %d on SIGINT, want 0; stderr: %s", code, w.errb.String())
	}
}
