package dispatch_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

func TestPolicyAndAdvertisedCapabilities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.d.Policy()
	if !p.DeniesAllPermissions || p.AdvertisesFS || p.AdvertisesTerminal {
		t.Fatalf("policy = %+v, want deny-all without fs/terminal", p)
	}
	out, _ := e.run(t, e.task("fake", "echo hi", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	// What went over the wire agrees with the policy.
	inits := e.events(t, "initialize")
	if len(inits) != 1 {
		t.Fatalf("initialize events = %d", len(inits))
	}
	in := inits[0]
	if in["protocol"].(float64) != 1 || in["fs_read"] != false || in["fs_write"] != false || in["terminal"] != false || in["auth_terminal"] != false {
		t.Fatalf("initialize = %v", in)
	}
}

func TestEchoCompletesWithArtifactsAsLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.task("fake", "echo hello relay", model.ModeStateChanging)
	task.Artifacts = []model.Artifact{
		{URI: "file:///repo/spec.md", MediaType: "text/markdown", Name: "spec"},
		{URI: "https://example.com/a/b.txt"},
	}
	out, r := e.run(t, task)
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.Text != "echo hello relay" || out.Result.StopReason != "end_turn" || out.Message != "" {
		t.Fatalf("result = %+v message %q", out.Result, out.Message)
	}
	calls, _, _ := r.snapshot()
	if strings.Join(calls, ",") != "started,finished" {
		t.Fatalf("calls = %v", calls)
	}
	sn := e.events(t, "session_new")
	if len(sn) != 1 || sn[0]["cwd"] != e.cwd || sn[0]["mcp_servers"].(float64) != 0 {
		t.Fatalf("session/new = %v, want cwd %s and no MCP servers", sn, e.cwd)
	}
	pr := e.events(t, "prompt")
	if len(pr) != 1 {
		t.Fatalf("prompts = %v", pr)
	}
	links, _ := json.Marshal(pr[0]["links"])
	if string(links) != `["spec|file:///repo/spec.md|text/markdown","b.txt|https://example.com/a/b.txt|"]` {
		t.Fatalf("resource links = %s", links)
	}
	// The per-task log holds the agent's stderr; file 0600 in a 0700 dir.
	logPath := filepath.Join(e.home, "logs", "tasks", task.ID+".log")
	st, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("task log mode %v", st.Mode().Perm())
	}
	dst, _ := os.Stat(filepath.Dir(logPath))
	if dst.Mode().Perm() != 0o700 {
		t.Fatalf("task log dir mode %v", dst.Mode().Perm())
	}
	b, _ := os.ReadFile(logPath)
	if !strings.Contains(string(b), "fakeagent: started") {
		t.Fatalf("task log lacks the agent's stderr:\n%s", b)
	}
}

func TestPermissionsAreDenied(t *testing.T) {
	t.Parallel()
	cases := []struct {
		behaviour   string
		wantOutcome string
		wantOption  string
		wantReply   string
	}{
		{"perm-allow-reject", "selected", "reject", "selected:reject"},
		{"perm-allow-only", "cancelled", "", "cancelled"},
		{"perm-always", "cancelled", "", "cancelled"},
		{"perm-none", "cancelled", "", "cancelled"},
		// An option id that is not unique makes any selection ambiguous:
		// the agent could read "go" as its allow_once option.
		{"perm-dup-reject", "cancelled", "", "cancelled"},
		{"perm-dup-other", "cancelled", "", "cancelled"},
	}
	for _, c := range cases {
		t.Run(c.behaviour, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, r := e.run(t, e.task("fake", c.behaviour, model.ModeReadOnly))
			wantOutcome(t, out, model.StateCompleted, "")
			if out.Result.Text != c.wantReply {
				t.Fatalf("reply = %q, want %q", out.Result.Text, c.wantReply)
			}
			_, denials, _ := r.snapshot()
			want := model.Denial{ToolCallTitle: "Write config.json", ToolCallKind: "edit", OptionID: c.wantOption, Outcome: c.wantOutcome}
			if len(denials) != 1 || denials[0] != want {
				t.Fatalf("denials = %+v, want [%+v]", denials, want)
			}
			// The answer on the wire, as the agent received it.
			perms := e.events(t, "permission")
			if len(perms) != 1 || perms[0]["outcome"] != c.wantOutcome || perms[0]["allowed"] != nil {
				t.Fatalf("agent saw %v", perms)
			}
			if c.wantOption != "" && perms[0]["option_id"] != c.wantOption {
				t.Fatalf("agent saw option %v", perms[0]["option_id"])
			}
			tc := out.Result.ToolCalls
			if len(tc) != 1 || tc[0] != (model.ToolCall{ID: "call-1", Title: "Write config.json", Kind: "edit", Status: "failed", Denied: true}) {
				t.Fatalf("tool calls = %+v", tc)
			}
			calls, _, _ := r.snapshot()
			if strings.Join(calls, ",") != "started,denied,finished" {
				t.Fatalf("calls = %v", calls)
			}
		})
	}
}

func TestFSAndTerminalRefused(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"fs-read", "fs-write", "terminal"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, _ := e.run(t, e.task("fake", b, model.ModeReadOnly))
			wantOutcome(t, out, model.StateCompleted, "")
			kind := map[string]string{"fs-read": "fs_read", "fs-write": "fs_write", "terminal": "terminal_create"}[b]
			evs := e.events(t, kind)
			if len(evs) != 1 || evs[0]["code"] != float64(-32601) {
				t.Fatalf("agent saw %v, want method-not-found", evs)
			}
			if _, err := os.Stat(filepath.Join(e.cwd, "pwned")); err == nil {
				t.Fatal("fs write went through")
			}
		})
	}
}

func TestThoughtsAreNeverKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "SECRET-7f3a9c-chain-of-thought"
	task := e.task("fake", "thought "+secret, model.ModeReadOnly)
	out, r := e.run(t, task)
	wantOutcome(t, out, model.StateCompleted, "")
	if out.Result.Text != "done" {
		t.Fatalf("reply = %q", out.Result.Text)
	}
	calls, denials, outs := r.snapshot()
	all, _ := json.Marshal([]any{calls, denials, outs})
	if strings.Contains(string(all), "SECRET-7f3a9c") {
		t.Fatalf("the thought leaked into what was reported: %s", all)
	}
	b, _ := os.ReadFile(filepath.Join(e.home, "logs", "tasks", task.ID+".log"))
	if strings.Contains(string(b), "SECRET-7f3a9c") {
		t.Fatal("the thought leaked into the task log")
	}
}

func TestTimeoutCancelsThenFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) { o.TaskTimeout = 500 * time.Millisecond; o.CancelGrace = 5 * time.Second })
	began := time.Now()
	out, _ := e.run(t, e.task("fake", "hang", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeTaskTimeout)
	if strings.Contains(out.Message, "killed") {
		t.Fatalf("the agent honoured session/cancel, yet: %q", out.Message)
	}
	if len(e.events(t, "cancel")) != 1 || len(e.events(t, "prompt_canceled")) != 1 {
		t.Fatalf("the agent did not get session/cancel: %v", e.events(t, ""))
	}
	if el := time.Since(began); el > 4*time.Second {
		t.Fatalf("took %s", el)
	}
	if out.Result.Text != "hanging" {
		t.Fatalf("partial result = %q", out.Result.Text)
	}
}

func TestTimeoutKillsAgentIgnoringCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) {
		o.TaskTimeout = 300 * time.Millisecond
		o.CancelGrace = 300 * time.Millisecond
	})
	began := time.Now()
	out, _ := e.run(t, e.task("fake", "hang-ignore-cancel", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeTaskTimeout)
	if !strings.Contains(out.Message, "killed") {
		t.Fatalf("message = %q, want it to say the agent was killed", out.Message)
	}
	if len(e.events(t, "cancel")) != 1 {
		t.Fatal("session/cancel was not sent before the kill")
	}
	if el := time.Since(began); el > 4*time.Second {
		t.Fatalf("took %s", el)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.d.Cancel("no-such-task") // no-op
	task := e.task("fake", "hang", model.ModeReadOnly)
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), task, r); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t)
	if e.d.Running() != 1 {
		t.Fatalf("running = %d", e.d.Running())
	}
	began := time.Now()
	e.d.Cancel(task.ID)
	if el := time.Since(began); el > 50*time.Millisecond {
		t.Fatalf("Cancel blocked for %s", el)
	}
	e.d.Cancel(task.ID) // twice is fine
	out := r.waitFinished(t)
	wantOutcome(t, out, model.StateCanceled, model.CodeCanceledBySubmitter)
	if len(e.events(t, "cancel")) != 1 {
		t.Fatal("session/cancel was not sent")
	}
	e.assertAgentsDead(t)
	if e.d.Running() != 0 {
		t.Fatalf("running = %d after the run", e.d.Running())
	}
}

func TestCancelRightAfterDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.task("fake", "echo never", model.ModeReadOnly)
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), task, r); err != nil {
		t.Fatal(err)
	}
	e.d.Cancel(task.ID)
	out := r.waitFinished(t)
	// Depending on the race the turn may have completed; it must never
	// have been reported as anything else.
	if out.State != model.StateCanceled && out.State != model.StateCompleted {
		t.Fatalf("outcome %+v", out)
	}
	e.assertAgentsDead(t)
}

func TestCrashAndGarbage(t *testing.T) {
	t.Parallel()
	cases := []struct{ behaviour, inMessage string }{
		{"crash", "exit status 3"},
		{"garbage", "not JSON"},
		{"garbage-continue", "not JSON"},
		{"error", "model exploded"},
		{"cancelled-unasked", "did not cancel"},
	}
	for _, c := range cases {
		t.Run(c.behaviour, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, _ := e.run(t, e.task("fake", c.behaviour, model.ModeReadOnly))
			wantOutcome(t, out, model.StateFailed, model.CodeAgentCrashed)
			if !strings.Contains(out.Message, c.inMessage) {
				t.Fatalf("message %q lacks %q", out.Message, c.inMessage)
			}
		})
	}
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		behaviour string
		code      model.Code
		stop      string
	}{
		{"refusal", model.CodeAgentRefused, "refusal"},
		{"max-tokens", model.CodeAgentMaxTokens, "max_tokens"},
		{"max-turn-requests", model.CodeAgentMaxTurnRequests, "max_turn_requests"},
	}
	for _, c := range cases {
		t.Run(c.behaviour, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, _ := e.run(t, e.task("fake", c.behaviour, model.ModeReadOnly))
			wantOutcome(t, out, model.StateFailed, c.code)
			if out.Result.StopReason != c.stop {
				t.Fatalf("stop reason %q", out.Result.StopReason)
			}
		})
	}
}

func TestFiveThousandChunksAllKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("fake", "chunks-5000", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if len(out.Result.Text) != 5000*10 {
		t.Fatalf("kept %d bytes, want %d", len(out.Result.Text), 5000*10)
	}
	lines := strings.Split(strings.TrimSuffix(out.Result.Text, "\n"), "\n")
	for i, l := range lines {
		if l != strconv.Itoa(1e9 + i)[1:] {
			t.Fatalf("chunk %d = %q: out of order or lost", i, l)
		}
	}
}

func TestResultIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out, _ := e.run(t, e.task("fake", "bytes-300001", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if n := len(out.Result.Text); n > 256<<10 || n < 256<<10-4 || !utf8.ValidString(out.Result.Text) {
		t.Fatalf("kept %d bytes (valid UTF-8: %v)", n, utf8.ValidString(out.Result.Text))
	}
	if !strings.Contains(out.Message, "truncated") {
		t.Fatalf("message %q", out.Message)
	}

	out, _ = e.run(t, e.task("fake", "tools-600", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	if len(out.Result.ToolCalls) != 500 || out.Result.ToolCalls[499].Status != "completed" {
		t.Fatalf("kept %d tool calls", len(out.Result.ToolCalls))
	}
	if !strings.Contains(out.Message, "tool calls beyond the first 500") {
		t.Fatalf("message %q", out.Message)
	}
}

func TestGrandchildIsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.task("fake", "grandchild", model.ModeReadOnly)
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), task, r); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t)
	pid := e.grandchild(t)
	if !alive(pid) {
		t.Fatalf("grandchild %d not running", pid)
	}
	e.d.Cancel(task.ID)
	out := r.waitFinished(t)
	wantOutcome(t, out, model.StateCanceled, model.CodeCanceledBySubmitter)
	b, _ := os.ReadFile(e.pidFile) // "PID START", the pid in the agent's sandbox
	if inner, _, _ := strings.Cut(string(b), " "); out.Result.Text != "grandchild:"+inner {
		t.Fatalf("reply %q", out.Result.Text)
	}
	waitDead(t, pid, "grandchild")
	e.assertAgentsDead(t)
}

func TestAuthRequired(t *testing.T) {
	t.Parallel()
	cases := []struct {
		target, prompt string
		started        bool
		inMessage      string
	}{
		{"auth", "echo x", false, "run auth's own login"},
		{"claude", "echo x", false, "claude /login"},
		{"codex", "echo x", false, "codex login"},
		{"fake", "auth-prompt", true, "at prompt"},
	}
	for _, c := range cases {
		t.Run(c.target+"/"+c.prompt, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			out, r := e.run(t, e.task(c.target, c.prompt, model.ModeReadOnly))
			wantOutcome(t, out, model.StateFailed, model.CodeAgentAuthRequired)
			if !strings.Contains(out.Message, c.inMessage) || strings.Contains(out.Message, "[daemon] env") {
				t.Fatalf("message %q lacks %q, or names [daemon] env for a daemon started by hand", out.Message, c.inMessage)
			}
			calls, _, _ := r.snapshot()
			if got := len(calls) == 2 && calls[0] == "started"; got != c.started {
				t.Fatalf("calls = %v", calls)
			}
			// A daemon a facade started runs with an allow-listed
			// environment: the message says where a key goes.
			auto := newEnv(t, func(o *dispatch.Options) { o.Autostarted = true })
			out, _ = auto.run(t, auto.task(c.target, c.prompt, model.ModeReadOnly))
			if !strings.Contains(out.Message, "[daemon] env") || !strings.Contains(out.Message, "relay daemon status") {
				t.Fatalf("autostarted daemon: message %q does not name [daemon] env and relay daemon status", out.Message)
			}
		})
	}
}

func TestSetupFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) { o.TaskTimeout = 500 * time.Millisecond })
	out, r := e.run(t, e.task("v2", "echo x", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeDispatchFailed)
	if !strings.Contains(out.Message, "protocol version 2") {
		t.Fatalf("message %q", out.Message)
	}
	if calls, _, _ := r.snapshot(); len(calls) != 1 {
		t.Fatalf("calls = %v, want only finished", calls)
	}
	out, _ = e.run(t, e.task("hanginit", "echo x", model.ModeReadOnly))
	wantOutcome(t, out, model.StateFailed, model.CodeTaskTimeout)
	if !strings.Contains(out.Message, "initialize") {
		t.Fatalf("message %q", out.Message)
	}
}

func TestDispatchErrorsStartNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, task := range map[string]model.Task{
		"unknown":  e.task("nobody", "echo", model.ModeReadOnly),
		"empty":    e.task("", "echo", model.ModeReadOnly),
		"disabled": e.task("off", "echo", model.ModeReadOnly),
		"missing":  e.task("missing", "echo", model.ModeReadOnly),
		"relative": func() model.Task { t := e.task("fake", "echo", model.ModeReadOnly); t.Cwd = "work"; return t }(),
		"bad id":   func() model.Task { t := e.task("fake", "echo", model.ModeReadOnly); t.ID = "../x"; return t }(),
	} {
		r := newRecorder()
		err := e.d.Dispatch(context.Background(), task, r)
		if model.ErrorCode(err) != model.CodeDispatchFailed {
			t.Errorf("%s: err = %v, want dispatch_failed", name, err)
		}
		if calls, _, _ := r.snapshot(); len(calls) != 0 {
			t.Errorf("%s: reporter called: %v", name, calls)
		}
	}
	if e.d.Running() != 0 {
		t.Fatalf("running = %d", e.d.Running())
	}
	if len(e.events(t, "start")) != 0 {
		t.Fatal("an agent was started")
	}
}

func TestDuplicateDispatchRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.task("fake", "hang", model.ModeReadOnly)
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), task, r); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Dispatch(context.Background(), task, newRecorder()); model.ErrorCode(err) != model.CodeDispatchFailed {
		t.Fatalf("second dispatch: %v", err)
	}
	e.d.Cancel(task.ID)
	r.waitFinished(t)
}

func TestStartedRefusedStopsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newRecorder()
	r.startErr = model.Errorf(model.CodeStaleState, "task was canceled")
	if err := e.d.Dispatch(context.Background(), e.task("fake", "echo x", model.ModeReadOnly), r); err != nil {
		t.Fatal(err)
	}
	out := r.waitFinished(t)
	wantOutcome(t, out, model.StateFailed, model.CodeDispatchFailed)
	if len(e.events(t, "prompt")) != 0 {
		t.Fatal("the prompt was sent although Started failed")
	}
	e.assertAgentsDead(t)
}

func TestStopEndsEveryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) { o.CancelGrace = 200 * time.Millisecond })
	var rs []*recorder
	for _, p := range []string{"hang", "hang-ignore-cancel"} {
		r := newRecorder()
		if err := e.d.Dispatch(context.Background(), e.task("fake", p, model.ModeReadOnly), r); err != nil {
			t.Fatal(err)
		}
		r.waitStarted(t)
		rs = append(rs, r)
	}
	if err := e.d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		_, _, outs := r.snapshot()
		if len(outs) != 1 {
			t.Fatalf("outcomes after Stop: %v", outs)
		}
		wantOutcome(t, outs[0], model.StateFailed, model.CodeDispatchInterrupted)
	}
	if e.d.Running() != 0 {
		t.Fatalf("running = %d", e.d.Running())
	}
	e.assertAgentsDead(t)
	if err := e.d.Dispatch(context.Background(), e.task("fake", "echo", model.ModeReadOnly), newRecorder()); model.ErrorCode(err) != model.CodeDispatchFailed {
		t.Fatalf("dispatch after stop: %v", err)
	}
	if err := e.d.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestStopWithExpiredContextKills(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) { o.CancelGrace = time.Minute })
	r := newRecorder()
	if err := e.d.Dispatch(context.Background(), e.task("fake", "hang-ignore-cancel", model.ModeReadOnly), r); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := e.d.Stop(ctx); err == nil {
		t.Fatal("Stop: want the context's error")
	}
	if el := time.Since(began); el > 5*time.Second {
		t.Fatalf("Stop took %s", el)
	}
	_, _, outs := r.snapshot()
	if len(outs) != 1 {
		t.Fatalf("outcomes %v", outs)
	}
	e.assertAgentsDead(t)
}

func TestTaskLogIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *dispatch.Options) { o.LogLimit = 64 })
	task := e.task("fake", "echo x", model.ModeReadOnly)
	out, _ := e.run(t, task)
	wantOutcome(t, out, model.StateCompleted, "")
	b, err := os.ReadFile(filepath.Join(e.home, "logs", "tasks", task.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 64+64 || !strings.Contains(string(b), "log truncated at 64 bytes") {
		t.Fatalf("log (%d bytes):\n%s", len(b), b)
	}
}
