package gates_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

var testTime = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// fakeArgv returns the argv of the fake adapter in mode args, logging to a
// fresh file whose path it returns too.
func fakeArgv(t *testing.T, args ...string) (argv []string, log string) {
	t.Helper()
	bin := gatestest.BuildFakeAuthority(t)
	log = filepath.Join(t.TempDir(), "authority.log")
	return append([]string{bin, "-log", log}, args...), log
}

func testRequest() model.AuthorityRequest {
	return model.AuthorityRequest{
		RequestID: "req-0001", TaskID: "T-42", MissionID: "M-2026-0001", LeaseID: "S-abc.def:1",
		Caller: "codex", Target: "claude", Mode: model.ModeStateChanging, RequestedAt: testTime,
	}
}

// TestAuthorityAdapterModes runs the fake adapter in every behaviour and
// checks the code the authority gate ends with.
func TestAuthorityAdapterModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		want      model.Code // "" = passes
		assurance model.Assurance
		denyCode  string
		denyMsg   string
		exit      int    // -2: not asserted (killed as soon as stdout overflows)
		stderr    string // a substring of the stderr excerpt
	}{
		{name: "allow guarded", args: []string{"allow-guarded"}, assurance: model.AssuranceGuarded},
		{name: "allow standard", args: []string{"allow-standard"}, assurance: model.AssuranceStandard},
		{name: "allow without assurance", args: []string{"allow"}, assurance: model.AssuranceStandard},
		{name: "allow with extra fields", args: []string{"allow-extra"}, assurance: model.AssuranceGuarded},
		{name: "allow of exactly 64 KiB", args: []string{"allow-size", fmt.Sprint(spec.AuthorityMaxResponse)}, assurance: model.AssuranceGuarded},
		{name: "allow one byte over 64 KiB", args: []string{"allow-size", fmt.Sprint(spec.AuthorityMaxResponse + 1)}, want: model.CodeAuthorityInvalidResponse, exit: -2},
		{name: "deny lease_expired", args: []string{"deny"}, want: model.CodeAuthorityDenied,
			denyCode: "lease_expired", denyMsg: "lease S-1 expired at 2026-01-01T00:00:00Z"},
		{name: "deny lease_revoked", args: []string{"deny", "lease_revoked", "revoked by operator"}, want: model.CodeAuthorityDenied,
			denyCode: "lease_revoked", denyMsg: "revoked by operator"},
		{name: "deny contract_version_mismatch", args: []string{"deny", "contract_version_mismatch", ""}, want: model.CodeAuthorityDenied,
			denyCode: "contract_version_mismatch"},
		{name: "deny with a malformed code", args: []string{"deny", "lease expired"}, want: model.CodeAuthorityInvalidResponse},
		{name: "deny without code", args: []string{"deny-nocode"}, want: model.CodeAuthorityInvalidResponse},
		{name: "unknown decision", args: []string{"unknown-decision"}, want: model.CodeAuthorityInvalidResponse},
		{name: "missing decision", args: []string{"missing-decision"}, want: model.CodeAuthorityInvalidResponse},
		{name: "unknown assurance", args: []string{"unknown-assurance"}, want: model.CodeAuthorityInvalidResponse},
		{name: "wrong type", args: []string{"wrong-type"}, want: model.CodeAuthorityInvalidResponse},
		{name: "keys differing only in case", args: []string{"case-twin"}, want: model.CodeAuthorityInvalidResponse},
		{name: "a lone surrogate", args: []string{"lone-surrogate"}, want: model.CodeAuthorityInvalidResponse},
		{name: "garbage", args: []string{"garbage"}, want: model.CodeAuthorityInvalidResponse},
		{name: "trailing garbage", args: []string{"trailing"}, want: model.CodeAuthorityInvalidResponse},
		{name: "two objects", args: []string{"two-objects"}, want: model.CodeAuthorityInvalidResponse},
		{name: "array", args: []string{"array"}, want: model.CodeAuthorityInvalidResponse},
		{name: "empty output", args: []string{"empty"}, want: model.CodeAuthorityInvalidResponse},
		{name: "oversized 100 KiB", args: []string{"oversized"}, want: model.CodeAuthorityInvalidResponse, exit: -2},
		{name: "crash", args: []string{"crash"}, want: model.CodeAuthorityUnavailable, exit: 2,
			stderr: "panic: fakeauthority: crash requested"},
		{name: "non-zero exit with a valid allow", args: []string{"exit-allow"}, want: model.CodeAuthorityUnavailable, exit: 3},
		{name: "unknown mode", args: []string{"no-such-mode"}, want: model.CodeAuthorityUnavailable, exit: 64,
			stderr: `unknown mode "no-such-mode"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			argv, log := fakeArgv(t, tt.args...)
			auth := gates.NewAuthority(argv, 20*time.Second)
			v, ans := gates.Authority(context.Background(), auth, testRequest())

			if v.Gate != model.GateAuthority || v.Passed != (tt.want == "") || v.Code != tt.want {
				t.Fatalf("verdict = passed %v code %q (%s; detail %v), want code %q",
					v.Passed, v.Code, v.Message, v.Detail, tt.want)
			}
			if runs := gatestest.ReadFakeLog(t, log); len(runs) != 1 {
				t.Errorf("the adapter ran %d times, want 1", len(runs))
			}
			switch tt.exit {
			case -2: // killed or exited, depending on timing; not asserted
			default:
				if ans.ExitCode != tt.exit || v.Detail["exit_code"] != fmt.Sprint(tt.exit) {
					t.Errorf("exit code = %d (detail %q), want %d", ans.ExitCode, v.Detail["exit_code"], tt.exit)
				}
			}
			if ans.Elapsed <= 0 || v.Detail["elapsed"] == "" {
				t.Errorf("elapsed = %v (detail %q)", ans.Elapsed, v.Detail["elapsed"])
			}
			if v.Detail["request_id"] != "req-0001" {
				t.Errorf("detail request_id = %q", v.Detail["request_id"])
			}
			if tt.stderr != "" && (!strings.Contains(ans.Stderr, tt.stderr) || !strings.Contains(v.Detail["stderr"], tt.stderr)) {
				t.Errorf("stderr excerpt %q lacks %q", ans.Stderr, tt.stderr)
			}
			if tt.want == "" {
				if !ans.Allow || ans.Assurance != tt.assurance || v.Detail["assurance"] != string(tt.assurance) {
					t.Errorf("answer %+v, detail assurance %q, want allow %q", ans, v.Detail["assurance"], tt.assurance)
				}
				return
			}
			if tt.want == model.CodeAuthorityDenied {
				if ans.Allow || ans.DenyCode != tt.denyCode || ans.Message != tt.denyMsg {
					t.Errorf("answer %+v, want deny %q %q", ans, tt.denyCode, tt.denyMsg)
				}
				if v.Detail["adapter_code"] != tt.denyCode || v.Detail["adapter_message"] != tt.denyMsg {
					t.Errorf("detail %v", v.Detail)
				}
				if gates.Outcome(v) != model.StateRejected {
					t.Errorf("Outcome = %q, want rejected", gates.Outcome(v))
				}
				return
			}
			if gates.Outcome(v) != model.StateBlocked {
				t.Errorf("Outcome = %q, want blocked", gates.Outcome(v))
			}
			if ans.Allow {
				t.Errorf("a failed consultation allowed: %+v", ans)
			}
		})
	}
}

// TestAuthorityErrors checks the error value Consult returns: an *Error with
// the code, a message and the code's hint.
func TestAuthorityErrors(t *testing.T) {
	t.Parallel()
	argv, _ := fakeArgv(t, "garbage")
	_, err := gates.NewAuthority(argv, 20*time.Second).Consult(context.Background(), testRequest())
	var e *model.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %T %v, want *model.Error", err, err)
	}
	if e.Code != model.CodeAuthorityInvalidResponse || e.Message == "" || e.Hint != spec.Hint(e.Code) || e.Hint == "" {
		t.Errorf("error = %+v", e)
	}
	if e.Err == nil || !strings.Contains(e.Err.Error(), "this is not JSON") {
		t.Errorf("internal detail = %v, want the start of stdout", e.Err)
	}
}

func TestAuthoritySpawnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "adapter.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho '{\"decision\":\"allow\"}'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{filepath.Join(dir, "missing")},
		{"hai-relay-no-such-adapter-on-path"},
		{notExec},
		{dir}, // a directory
	} {
		v, ans := gates.Authority(context.Background(), gates.NewAuthority(argv, 5*time.Second), testRequest())
		if v.Code != model.CodeAuthorityUnavailable || ans.ExitCode != -1 || v.Detail["error"] == "" {
			t.Errorf("%v: verdict %+v answer %+v", argv, v, ans)
		}
	}
}

// TestAuthorityRequestWire checks the request as the adapter received it:
// one JSON line with exactly the contract's fields, as sent.
func TestAuthorityRequestWire(t *testing.T) {
	t.Parallel()
	argv, log := fakeArgv(t, "allow-guarded")
	auth := gates.NewAuthority(argv, 20*time.Second)
	want := testRequest()
	if _, err := auth.Consult(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	runs := gatestest.ReadFakeLog(t, log)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	got, err := runs[0].Request()
	if err != nil {
		t.Fatalf("request %q: %v", runs[0].Stdin, err)
	}
	wantWire := spec.AuthorityRequest{
		Version: 1, RequestID: "req-0001", TaskID: "T-42", MissionID: "M-2026-0001", LeaseID: "S-abc.def:1",
		Caller: "codex", Target: "claude", Mode: "state_changing", RequestedAt: "2026-03-14T15:09:26.535897932Z",
		ParentTaskID: "", Chain: []spec.AuthorityHop{}, Depth: 1,
	}
	if !reflect.DeepEqual(got, wantWire) {
		t.Errorf("request on the wire:\n got %+v\nwant %+v", got, wantWire)
	}
	// A top-level task's chain is there, empty, not absent or null: an
	// adapter reads every field of every request the same way.
	for _, field := range []string{`"parent_task_id":""`, `"chain":[]`, `"depth":1`} {
		if !strings.Contains(runs[0].Stdin, field) {
			t.Errorf("request %s lacks %s", runs[0].Stdin, field)
		}
	}

	// A delegated task's request carries its parent and its chain, oldest
	// hop first, and its depth.
	argv, log = fakeArgv(t, "allow-guarded")
	chained := testRequest()
	chained.ParentTaskID = "T-2"
	chained.Chain = []model.Hop{{TaskID: "T-1", Caller: "claude", Target: "gemini"}, {TaskID: "T-2", Caller: "gemini", Target: "codex"}}
	if _, err := gates.NewAuthority(argv, 20*time.Second).Consult(context.Background(), chained); err != nil {
		t.Fatal(err)
	}
	runs = gatestest.ReadFakeLog(t, log)
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	if got, err = runs[0].Request(); err != nil {
		t.Fatalf("request %q: %v", runs[0].Stdin, err)
	}
	wantWire.ParentTaskID, wantWire.Depth = "T-2", 3
	wantWire.Chain = []spec.AuthorityHop{{TaskID: "T-1", Caller: "claude", Target: "gemini"}, {TaskID: "T-2", Caller: "gemini", Target: "codex"}}
	if !reflect.DeepEqual(got, wantWire) {
		t.Errorf("delegated request on the wire:\n got %+v\nwant %+v", got, wantWire)
	}
	at, err := time.Parse(time.RFC3339, got.RequestedAt)
	if err != nil || !at.Equal(testTime) {
		t.Errorf("requested_at %q: %v", got.RequestedAt, err)
	}

	// A request without an ID or time gets a random ID and the clock's time,
	// in UTC.
	local := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 5*3600))
	argv, log = fakeArgv(t, "allow")
	auth = gates.NewAuthority(argv, 20*time.Second, gates.WithClock(func() time.Time { return local }))
	for range 2 {
		if _, err := auth.Consult(context.Background(), model.AuthorityRequest{TaskID: "T-1", Mode: model.ModeReadOnly}); err != nil {
			t.Fatal(err)
		}
	}
	runs = gatestest.ReadFakeLog(t, log)
	if len(runs) != 2 {
		t.Fatalf("%d runs", len(runs))
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	var ids []string
	for _, r := range runs {
		req, err := r.Request()
		if err != nil {
			t.Fatal(err)
		}
		if !hex32.MatchString(req.RequestID) {
			t.Errorf("request_id %q", req.RequestID)
		}
		if req.RequestedAt != "2026-01-01T22:04:05Z" || req.Version != 1 || req.Mode != "read_only" {
			t.Errorf("request %+v", req)
		}
		ids = append(ids, req.RequestID)
	}
	if ids[0] == ids[1] {
		t.Errorf("request IDs repeat: %v", ids)
	}
}

func TestAuthorityEnv(t *testing.T) {
	t.Parallel()
	argv, _ := fakeArgv(t) // no mode argument: it comes from the environment
	auth := gates.NewAuthority(argv, 20*time.Second,
		gates.WithEnv("FAKEAUTHORITY_MODE=deny"), gates.WithDir(t.TempDir()))
	v, _ := gates.Authority(context.Background(), auth, testRequest())
	if v.Code != model.CodeAuthorityDenied || v.Detail["adapter_code"] != "lease_expired" {
		t.Errorf("verdict %+v", v)
	}
}

// No code-loading variable reaches the adapter, even one its config
// names; the other entries do.
func TestAuthorityEnvHasNoCodeLoadingVariables(t *testing.T) {
	t.Parallel()
	argv, log := fakeArgv(t, "allow-guarded")
	auth := gates.NewAuthority(argv, 20*time.Second, gates.WithDir(t.TempDir()),
		gates.WithEnv("NODE_OPTIONS=--require /planted/hook.js", "LD_PRELOAD=/planted/hook.so", "BASH_ENV=/planted/rc", "HAI_AUTHORITY_TOKEN=t"))
	if v, _ := gates.Authority(context.Background(), auth, testRequest()); !v.Passed {
		t.Fatalf("verdict %+v", v)
	}
	runs := gatestest.ReadFakeLog(t, log)
	if len(runs) != 1 {
		t.Fatalf("runs %+v, want one", runs)
	}
	for _, n := range []string{"NODE_OPTIONS", "LD_PRELOAD", "BASH_ENV"} {
		if slices.Contains(runs[0].Env, n) {
			t.Errorf("the adapter's environment holds the code-loading variable %s: %v", n, runs[0].Env)
		}
	}
	if !slices.Contains(runs[0].Env, "HAI_AUTHORITY_TOKEN") {
		t.Errorf("the adapter's environment lacks HAI_AUTHORITY_TOKEN: %v", runs[0].Env)
	}
}

// TestAuthorityTimeoutKillsGroup: an adapter that never answers is killed
// with its whole process group after the timeout.
func TestAuthorityTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	const timeout = 1500 * time.Millisecond
	argv, log := fakeArgv(t, "sleep")
	auth := gates.NewAuthority(argv, timeout)
	start := time.Now()
	v, ans := gates.Authority(context.Background(), auth, testRequest())
	elapsed := time.Since(start)
	if v.Code != model.CodeAuthorityTimeout || gates.Outcome(v) != model.StateBlocked {
		t.Fatalf("verdict %+v", v)
	}
	if elapsed < timeout || elapsed > timeout+3*time.Second {
		t.Errorf("Consult took %v with a timeout of %v", elapsed, timeout)
	}
	if ans.ExitCode != -1 {
		t.Errorf("exit code %d, want -1 (killed)", ans.ExitCode)
	}
	runs := gatestest.ReadFakeLog(t, log)
	if len(runs) != 1 || runs[0].GrandchildPID == 0 {
		t.Fatalf("runs %+v: the adapter did not record its grandchild", runs)
	}
	if !strings.Contains(ans.Stderr, fmt.Sprintf("grandchild pid %d", runs[0].GrandchildPID)) {
		t.Errorf("stderr excerpt %q", ans.Stderr)
	}
	waitGone(t, runs[0].PID)
	waitGone(t, runs[0].GrandchildPID)
}

// TestAuthorityContext: the caller's context bounds a consultation too.
func TestAuthorityContext(t *testing.T) {
	t.Parallel()
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		argv, log := fakeArgv(t, "sleep")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		_, err := gates.NewAuthority(argv, time.Minute).Consult(ctx, testRequest())
		if model.ErrorCode(err) != model.CodeAuthorityUnavailable || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Consult took %v after cancel", d)
		}
		for _, r := range gatestest.ReadFakeLog(t, log) {
			waitGone(t, r.PID)
			waitGone(t, r.GrandchildPID)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		argv, log := fakeArgv(t, "sleep")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := gates.NewAuthority(argv, time.Minute).Consult(ctx, testRequest())
		if model.ErrorCode(err) != model.CodeAuthorityTimeout || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v", err)
		}
		for _, r := range gatestest.ReadFakeLog(t, log) {
			waitGone(t, r.PID)
			waitGone(t, r.GrandchildPID)
		}
	})
}

// TestAuthorityGrandchildHoldsStdout: the adapter answers and exits while a
// grandchild keeps its stdout open. Consult must return after the grace,
// with the answer, and the grandchild must be gone.
func TestAuthorityGrandchildHoldsStdout(t *testing.T) {
	t.Parallel()
	argv, log := fakeArgv(t, "fork-hold")
	auth := gates.NewAuthority(argv, 30*time.Second, gates.WithGrace(300*time.Millisecond))
	start := time.Now()
	v, ans := gates.Authority(context.Background(), auth, testRequest())
	elapsed := time.Since(start)
	if !v.Passed || ans.Assurance != model.AssuranceGuarded || ans.ExitCode != 0 {
		t.Fatalf("verdict %+v answer %+v", v, ans)
	}
	if elapsed > 10*time.Second {
		t.Errorf("Consult took %v: it waited for the grandchild", elapsed)
	}
	runs := gatestest.ReadFakeLog(t, log)
	if len(runs) != 1 || runs[0].GrandchildPID == 0 {
		t.Fatalf("runs %+v", runs)
	}
	waitGone(t, runs[0].GrandchildPID)
}

// TestAuthorityStderrFlood: 10 MiB of stderr are read and dropped, not kept;
// the excerpt holds the start and the end.
func TestAuthorityStderrFlood(t *testing.T) { // not parallel: it measures allocation
	argv, _ := fakeArgv(t, "stderr-flood")
	auth := gates.NewAuthority(argv, 60*time.Second)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v, ans := gates.Authority(context.Background(), auth, testRequest())
	runtime.ReadMemStats(&after)
	if !v.Passed || ans.Assurance != model.AssuranceGuarded {
		t.Fatalf("verdict %+v", v)
	}
	if n := len(ans.Stderr); n > gates.DefaultStderrExcerpt+64 {
		t.Errorf("stderr excerpt is %d bytes", n)
	}
	for _, s := range []string{"STDERR-HEAD", "STDERR-TAIL", "bytes omitted"} {
		if !strings.Contains(ans.Stderr, s) {
			t.Errorf("excerpt lacks %q", s)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("a consultation with 10 MiB of stderr allocated %d bytes", alloc)
	}
}

// TestAuthorityConcurrent: one client serves concurrent consultations.
func TestAuthorityConcurrent(t *testing.T) {
	t.Parallel()
	argv, log := fakeArgv(t, "allow-guarded")
	auth := gates.NewAuthority(argv, 30*time.Second)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			req := testRequest()
			req.RequestID = fmt.Sprintf("req-%d", i)
			if ans, err := auth.Consult(context.Background(), req); err != nil || !ans.Allow {
				t.Errorf("consult %d: %+v %v", i, ans, err)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range gatestest.ReadFakeLog(t, log) {
		req, err := r.Request()
		if err != nil {
			t.Fatal(err)
		}
		seen[req.RequestID] = true
	}
	if len(seen) != 8 {
		t.Errorf("the adapter saw %d distinct requests, want 8", len(seen))
	}
}

// waitGone fails t unless process pid is gone (or a zombie) within 5 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still runs", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func gatesBuild(tb testing.TB) string { return gatestest.BuildFakeAuthority(tb) }

// TestAuthorityZeroGrace: without any grace, an answer already written to
// the pipe is still read in full.
func TestAuthorityZeroGrace(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"allow-guarded", "fork-hold"} {
		argv, _ := fakeArgv(t, mode)
		auth := gates.NewAuthority(argv, 30*time.Second, gates.WithGrace(0))
		for i := range 10 {
			if ans, err := auth.Consult(context.Background(), testRequest()); err != nil || ans.Assurance != model.AssuranceGuarded {
				t.Fatalf("%s #%d: %+v %v", mode, i, ans, err)
			}
		}
	}
}
