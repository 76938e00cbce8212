package dispatch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// group is a process group a test started itself: a shell leading it and
// a `sleep` child, as an agent launcher and its native child.
type group struct {
	cmd    *exec.Cmd
	leader int
	child  int
	waited bool
}

// startGroup runs script (which must print the child's pid on its first
// line) with sh in a new process group, with env added.
func startGroup(t *testing.T, script string, env ...string) *group {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &group{cmd: cmd, leader: cmd.Process.Pid}
	t.Cleanup(func() {
		if !g.waited {
			// Unreaped, the leader still holds the group id: safe to kill.
			_ = syscall.Kill(-g.leader, syscall.SIGKILL)
			_ = g.cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the child's pid: %v", err)
	}
	if g.child, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		t.Fatalf("child pid %q", line)
	}
	if !alive(g.child) {
		t.Fatalf("child %d not running", g.child)
	}
	return g
}

// wait reaps the leader once it has exited by itself.
func (g *group) wait() {
	_ = g.cmd.Wait()
	g.waited = true
}

// killChild kills the group's child at cleanup if it is still the same
// process (its leader having been reaped, the group id proves nothing).
func killChildAtCleanup(t *testing.T, pid int) {
	t.Helper()
	start, err := dispatch.ProcStartTime(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return // already gone (a run that ended at once has been swept)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := dispatch.ProcStartTime(pid); err == nil && s == start {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	s, err := dispatch.ProcStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newReaper is a fresh dispatcher on home, as the next daemon's.
func newReaper(t *testing.T, home string) *dispatch.Dispatcher {
	t.Helper()
	d := dispatch.New(dispatch.Options{Home: home, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// runRecords lists the run record files under home (tasks and probes).
func runRecords(t *testing.T, home string) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"agents", "probes"} {
		es, err := os.ReadDir(filepath.Join(home, "run", dir))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

func wantNoRecords(t *testing.T, home string) {
	t.Helper()
	if recs := runRecords(t, home); len(recs) != 0 {
		t.Fatalf("run records left behind: %v", recs)
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: want it gone, stat: %v", path, err)
	}
}

// A daemon that died mid-run (no Stop, no teardown) left its agent and the
// agent's own child running; the next daemon's Reap kills both.
func TestReapKillsAbandonedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.task("fake", "grandchild", model.ModeReadOnly)
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), task, r); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t)
	grand := e.grandchild(t)
	starts := e.events(t, "start")
	if len(starts) != 1 {
		t.Fatalf("start events %v", starts)
	}
	agent := hostPID(starts[0])

	// The record while the run is alive: 0600 in a 0700 dir, naming the
	// pid and start time of the group's leader, bubblewrap, of which the
	// agent (in a session of its own, in its sandbox) descends.
	path := filepath.Join(e.home, "run", "agents", task.ID+".json")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("record mode %v", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("record dir mode %v", dst.Mode().Perm())
	}
	var rec map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("record %s: %v", b, err)
	}
	leader := int(rec["pid"].(float64))
	if !descends(agent, leader) || leader == agent ||
		uint64(rec["start_time"].(float64)) != startTime(t, leader) ||
		rec["task_id"] != task.ID || rec["argv0"] != e.bin || rec["run"] == "" {
		t.Fatalf("record %s (agent pid %d)", b, agent)
	}
	if recs := runRecords(t, e.home); len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}

	killed, err := newReaper(t, e.home).Reap(context.Background())
	// The group is bubblewrap; the agent and its child, in the sandbox's
	// pid namespace, die with it (the kernel kills a pid namespace whose
	// first process, bubblewrap's, ends).
	if err != nil || killed != 1 {
		t.Fatalf("Reap = %d, %v; want bubblewrap killed", killed, err)
	}
	waitDead(t, leader, "bubblewrap")
	waitDead(t, agent, "agent")
	waitDead(t, grand, "grandchild")
	mustNotExist(t, path)
	// The first dispatcher sees its agent die and ends the run.
	if out := r.waitFinished(t); out.State != model.StateFailed {
		t.Fatalf("outcome %+v", out)
	}
	wantNoRecords(t, e.home)
}

// A group as a crashed daemon leaves it, leader alive: leader and child
// are killed, the record removed.
func TestReapKillsLiveGroup(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	g := startGroup(t, `sleep 300 >/dev/null 2>&1 & echo $!; wait`, dispatch.RunEnvVar+"=r1")
	path, err := dispatch.WriteTestRunRecord(home, dispatch.TestRunRecord{TaskID: "T-live", PID: g.leader,
		StartTime: startTime(t, g.leader), Argv0: "sh", Run: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	killed, err := newReaper(t, home).Reap(context.Background())
	if err != nil || killed != 2 {
		t.Fatalf("Reap = %d, %v", killed, err)
	}
	waitDead(t, g.leader, "leader") // a zombie until g is reaped
	waitDead(t, g.child, "child")
	mustNotExist(t, path)
}

// The leader died (Pdeathsig) but its child lives on in its group: the
// child is killed when it carries the run's id, and left alone when
// nothing proves it is the agent's.
func TestReapLeaderlessGroup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		env, run string
		killed   int
	}{
		{"verified", "r2", "r2", 1},
		{"other-run", "r3", "r4", 0},
		{"no-run-id", "", "r5", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			var env []string
			if c.env != "" {
				env = append(env, dispatch.RunEnvVar+"="+c.env)
			}
			g := startGroup(t, `sleep 300 >/dev/null 2>&1 & echo $!`, env...)
			killChildAtCleanup(t, g.child)
			leaderStart := startTime(t, g.leader)
			g.wait() // the leader is gone; its group lives on in the child
			path, err := dispatch.WriteTestRunRecord(home, dispatch.TestRunRecord{TaskID: "T-orphan", PID: g.leader,
				StartTime: leaderStart, Argv0: "sh", Run: c.run})
			if err != nil {
				t.Fatal(err)
			}
			killed, err := newReaper(t, home).Reap(context.Background())
			if err != nil || killed != c.killed {
				t.Fatalf("Reap = %d, %v; want %d", killed, err, c.killed)
			}
			if c.killed > 0 {
				waitDead(t, g.child, "child")
			} else if !alive(g.child) {
				t.Fatal("an unverified process was killed")
			}
			mustNotExist(t, path)
		})
	}
}

// A record whose pid now names another process (a different start time),
// or that comes from an earlier boot, kills nothing and is removed.
func TestReapNeverKillsAnUnverifiedPID(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	g := startGroup(t, `sleep 300 >/dev/null 2>&1 & echo $!; wait`, dispatch.RunEnvVar+"=r6")
	start := startTime(t, g.leader)
	recycled, err := dispatch.WriteTestRunRecord(home, dispatch.TestRunRecord{TaskID: "T-recycled", PID: g.leader,
		StartTime: start + 1, Argv0: "sh", Run: "r6"})
	if err != nil {
		t.Fatal(err)
	}
	d := newReaper(t, home)
	if killed, err := d.Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap = %d, %v", killed, err)
	}
	mustNotExist(t, recycled)

	earlier, err := dispatch.WriteTestRunRecord(home, dispatch.TestRunRecord{TaskID: "T-earlier-boot", PID: g.leader,
		StartTime: start, Argv0: "sh", Run: "r6", BootID: "00000000-0000-0000-0000-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if killed, err := d.Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap = %d, %v", killed, err)
	}
	mustNotExist(t, earlier)
	time.Sleep(50 * time.Millisecond)
	if !alive(g.leader) || !alive(g.child) {
		t.Fatal("a process of an unverified record was killed")
	}

	// A process that is gone: the record is just removed.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	path, err := dispatch.WriteTestRunRecord(home, dispatch.TestRunRecord{TaskID: "T-gone", PID: gone.Process.Pid,
		StartTime: start, Argv0: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if killed, err := d.Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap = %d, %v", killed, err)
	}
	mustNotExist(t, path)
}

// Unreadable records are removed with a warning, and nothing is killed.
func TestReapRemovesGarbageRecords(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, "run", "agents")
	if err := os.MkdirAll(filepath.Join(dir, "subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	files := map[string]string{
		"garbage.json":  "not json at all",
		"empty.json":    "",
		"partial.json":  `{"v":1,"kind":"task","pid":` + self,
		"version.json":  `{"v":2,"kind":"task","pid":` + self + `,"start_time":1}`,
		"pid-one.json":  `{"v":1,"kind":"task","pid":1,"start_time":1}`,
		"no-start.json": `{"v":1,"kind":"task","pid":` + self + `}`,
		".tmp-123":      `{"v":1,"kind":"ta`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if killed, err := newReaper(t, home).Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap = %d, %v", killed, err)
	}
	if recs := runRecords(t, home); len(recs) != 1 || recs[0] != filepath.Join("agents", "subdir") {
		t.Fatalf("left: %v", recs)
	}
	// Nothing to reap at all is fine too.
	if killed, err := newReaper(t, t.TempDir()).Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap on an empty home = %d, %v", killed, err)
	}
	if killed, err := newReaper(t, "").Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap without a home = %d, %v", killed, err)
	}
}

// Every way a run ends removes its record.
func TestRunRecordRemovedOnEveryEnd(t *testing.T) {
	t.Parallel()
	fast := func(o *dispatch.Options) {
		o.TaskTimeout = 300 * time.Millisecond
		o.CancelGrace = 300 * time.Millisecond
	}
	for _, c := range []struct {
		name, prompt string
		tweak        func(*dispatch.Options)
		end          func(*env, model.Task)
		state        model.State
		code         model.Code
	}{
		{"completed", "echo hi", nil, nil, model.StateCompleted, ""},
		{"crash", "crash", nil, nil, model.StateFailed, model.CodeAgentCrashed},
		{"garbage", "garbage-continue", nil, nil, model.StateFailed, model.CodeAgentCrashed},
		{"timeout", "hang-ignore-cancel", fast, nil, model.StateFailed, model.CodeTaskTimeout},
		{"cancel", "hang", nil, func(e *env, task model.Task) { e.d.Cancel(task.ID) }, model.StateCanceled, model.CodeCanceledBySubmitter},
		{"stop", "hang", nil, func(e *env, _ model.Task) { _ = e.d.Close() }, model.StateFailed, model.CodeDispatchInterrupted},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var tweaks []func(*dispatch.Options)
			if c.tweak != nil {
				tweaks = append(tweaks, c.tweak)
			}
			e := newEnv(t, tweaks...)
			task := e.task("fake", c.prompt, model.ModeReadOnly)
			r := newRecorder()
			if err := e.d.Dispatch(context.Background(), task, r); err != nil {
				t.Fatal(err)
			}
			if c.end != nil {
				r.waitStarted(t)
				if recs := runRecords(t, e.home); len(recs) != 1 || recs[0] != filepath.Join("agents", task.ID+".json") {
					t.Fatalf("records while running: %v", recs)
				}
				c.end(e, task)
			}
			wantOutcome(t, r.waitFinished(t), c.state, c.code)
			wantNoRecords(t, e.home)
			e.assertAgentsDead(t)
		})
	}
	t.Run("spawn-failure", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		if err := e.d.Dispatch(context.Background(), e.task("missing", "echo", model.ModeReadOnly), newRecorder()); err == nil {
			t.Fatal("dispatch of a missing agent succeeded")
		}
		wantNoRecords(t, e.home)
	})
	t.Run("probe", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		if _, err := e.d.Probe(context.Background(), "fake", 20*time.Second); err != nil {
			t.Fatal(err)
		}
		wantNoRecords(t, e.home)
		if _, err := e.d.Probe(context.Background(), "hanginit", 300*time.Millisecond); err == nil {
			t.Fatal("probe of a hanging agent succeeded")
		}
		wantNoRecords(t, e.home)
	})
}

// Reap leaves the records of the dispatcher's own running agents alone.
func TestReapSkipsOwnRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.task("fake", "hang", model.ModeReadOnly)
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), task, r); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t)
	if killed, err := e.d.Reap(context.Background()); err != nil || killed != 0 {
		t.Fatalf("Reap = %d, %v", killed, err)
	}
	if recs := runRecords(t, e.home); len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	e.d.Cancel(task.ID)
	wantOutcome(t, r.waitFinished(t), model.StateCanceled, model.CodeCanceledBySubmitter)
	wantNoRecords(t, e.home)
}

// A descendant of the agent that leaves its session and process group
// (setsid) and drops HAI_RELAY_RUN from its environment dies with its run
// however the run ends: it is in the sandbox's pid namespace, which ends
// with bubblewrap.
func TestEscapedDescendantDiesWithItsRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, prompt string
		end          func(*env, model.Task)
		state        model.State
		code         model.Code
	}{
		{"completed", "escape", nil, model.StateCompleted, ""},
		{"cancel", "escape-hang", func(e *env, task model.Task) { e.d.Cancel(task.ID) }, model.StateCanceled, model.CodeCanceledBySubmitter},
		{"stop", "escape-hang", func(e *env, _ model.Task) { _ = e.d.Close() }, model.StateFailed, model.CodeDispatchInterrupted},
		// The run's leader SIGKILLed from outside (the OOM killer, a
		// `pkill -9`): the pid namespace ends with it, so nothing is left
		// for a next daemon to miss.
		{"leader killed", "escape-hang", func(e *env, task model.Task) {
			var rec struct{ PID int }
			b, err := os.ReadFile(filepath.Join(e.home, "run", "agents", task.ID+".json"))
			if err != nil || json.Unmarshal(b, &rec) != nil || rec.PID <= 1 {
				panic(fmt.Sprintf("run record %s: %v", b, err))
			}
			_ = syscall.Kill(rec.PID, syscall.SIGKILL)
		}, model.StateFailed, model.CodeAgentCrashed},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			task := e.task("fake", c.prompt, model.ModeReadOnly)
			r := newRecorder()
			if err := e.d.Dispatch(context.Background(), task, r); err != nil {
				t.Fatal(err)
			}
			escaped := e.grandchild(t)
			killChildAtCleanup(t, escaped)
			if c.end != nil {
				r.waitStarted(t)
				// It really escaped: another session, no run id.
				if sid, err := unix.Getsid(escaped); err != nil || sid != escaped {
					t.Fatalf("escaped child's session = %d, %v; want its own", sid, err)
				}
				if b, err := os.ReadFile("/proc/" + strconv.Itoa(escaped) + "/environ"); err != nil || strings.Contains(string(b), dispatch.RunEnvVar) {
					t.Fatalf("escaped child's environment %q, %v", b, err)
				}
				c.end(e, task)
			}
			wantOutcome(t, r.waitFinished(t), c.state, c.code)
			waitDead(t, escaped, "escaped descendant")
			e.assertAgentsDead(t)
			wantNoRecords(t, e.home)
		})
	}
}

// descends reports whether process pid descends from ancestor.
func descends(pid, ancestor int) bool {
	for range 64 {
		pid = parentPID(pid)
		if pid <= 1 {
			return false
		}
		if pid == ancestor {
			return true
		}
	}
	return false
}

// parentPID returns the parent of pid (/proc stat field 4), or 0.
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}
