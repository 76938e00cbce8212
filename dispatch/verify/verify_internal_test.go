package verify

import (
	"errors"
	"strings"
	"testing"

	"github.com/hai-relay/relay/dispatch/modelserver"
	"github.com/hai-relay/relay/model"
)

func req(tools []string, results []string, call string, user ...string) modelserver.Request {
	r := modelserver.Request{Turn: modelserver.Turn{Tools: tools, ToolResults: results, UserText: user}}
	if call != "" {
		r.Reply.Call = &modelserver.Call{Name: call}
	}
	return r
}

// What the records of the scripted model say decides the stops that leave
// no trace on disk or in the relay.
func TestClassify(t *testing.T) {
	t.Parallel()
	done := model.Outcome{State: model.StateCompleted}
	crashed := model.Outcome{State: model.StateFailed, Code: model.CodeAgentCrashed, Message: "the agent exited"}
	tools := []string{"Read", "Write"}
	cases := []struct {
		name   string
		ev     attemptEvidence
		stop   model.Stop
		detail string
	}{
		{"on disk wins", attemptEvidence{happened: "/tmp/x exists", denied: 1, out: model.Outcome{Code: model.CodeAgentUnsafeMode}},
			model.StopNotStopped, "/tmp/x exists"},
		{"mode refused", attemptEvidence{out: model.Outcome{State: model.StateFailed, Code: model.CodeAgentUnsafeMode, Message: "mode \"plan\""}},
			model.StopModeRefused, `mode "plan"`},
		{"spawn failed", attemptEvidence{startErr: errors.New("no such file"), out: done}, model.StopNotRun, "could not be started: no such file"},
		{"denied", attemptEvidence{denied: 2, tool: "Write", out: done, reqs: []modelserver.Request{
			req(tools, nil, "Write"), req(tools, []string{"The user denied it"}, "")}},
			model.StopDeniedByRelay, "2 permission request(s) denied; the agent answered: The user denied it"},
		{"never reached the model", attemptEvidence{tool: "Write", out: crashed}, model.StopNotRun, "never reached the model: the agent exited"},
		{"no tools at all", attemptEvidence{tool: "Write", out: done, reqs: []modelserver.Request{req(nil, nil, "")}},
			model.StopToolNotOffered, "no tools at all"},
		{"not offered", attemptEvidence{tool: "Bash", out: done, reqs: []modelserver.Request{
			req(tools, nil, "Bash"), req(tools, []string{"No such tool available: Bash"}, "")}},
			model.StopToolNotOffered, "Bash is not among the tools offered (Read, Write); the agent answered: No such tool available: Bash"},
		{"refused by the agent", attemptEvidence{tool: "Write", out: done, reqs: []modelserver.Request{
			req(tools, nil, "Write"), req(tools, []string{"Read-only\nfile system"}, "")}},
			model.StopRefusedByAgent, "the agent answered: Read-only file system"},
		{"the result of the second step", attemptEvidence{tool: "Write", out: done, reqs: []modelserver.Request{
			req(tools, nil, "Read"), req(tools, []string{"contents"}, "Write"), req(tools, []string{"contents", "refused"}, "")}},
			model.StopRefusedByAgent, "the agent answered: refused"},
		{"no result, turn ended", attemptEvidence{tool: "Write", out: done, reqs: []modelserver.Request{req(tools, nil, "Write")}},
			model.StopRefusedByAgent, "no result"},
		{"no result, crashed", attemptEvidence{tool: "Write", out: crashed, reqs: []modelserver.Request{req(tools, nil, "Write")}},
			model.StopNotRun, "before the agent answered the call: the agent exited"},
		{"never called", attemptEvidence{tool: "Edit", out: crashed, reqs: []modelserver.Request{req(tools, nil, "Read")}},
			model.StopNotRun, "never got to call Edit"},
		{"control characters", attemptEvidence{tool: "Write", out: done, reqs: []modelserver.Request{
			req(tools, nil, "Write"), req(tools, []string{"no\x1b[31m way\x07"}, "")}},
			model.StopRefusedByAgent, "the agent answered: no way"},
	}
	for _, c := range cases {
		stop, detail := classify(c.ev)
		if stop != c.stop || !strings.Contains(detail, c.detail) {
			t.Errorf("%s: %s %q, want %s containing %q", c.name, stop, detail, c.stop, c.detail)
		}
	}
	if got := requestsTagged([]modelserver.Request{req(nil, nil, "", "x tag-1 y"), req(nil, nil, "", "tag-2")}, "tag-1"); len(got) != 1 {
		t.Errorf("requestsTagged: %d", len(got))
	}
}

// A verification's agent cannot reach the network through a proxy
// variable: each points at a closed port, loopback excepted.
func TestOfflineEnv(t *testing.T) {
	t.Parallel()
	for _, kv := range offlineEnv() {
		if k, v, _ := strings.Cut(kv, "="); strings.Contains(strings.ToLower(k), "proxy") && k != "NO_PROXY" && k != "no_proxy" && v != "http://127.0.0.1:9" {
			t.Errorf("%s", kv)
		}
	}
}

// One cause shared by every attempt that could not run (the sandbox
// missing, a login) is said once, with the attempts it stopped.
func TestVerdictSaysOneCauseOnce(t *testing.T) {
	t.Parallel()
	const cause = "the agent could not be started: bubblewrap (bwrap) is not installed"
	var attempts []model.VerifyAttempt
	for _, name := range []string{"write-outside", "write-inside", "edit-inside", "shell"} {
		attempts = append(attempts, model.VerifyAttempt{Name: name, Mode: model.ModeReadOnly, StoppedBy: model.StopNotRun, Detail: cause})
	}
	attempts = append(attempts, model.VerifyAttempt{Name: "other", Mode: model.ModeReadOnly, StoppedBy: model.StopNotRun, Detail: "a login"})
	status, reason := verdict(attempts)
	if status != model.HardeningFailed || strings.Count(reason, cause) != 1 ||
		!strings.Contains(reason, "5 of 5 attempts not run: read_only write-outside, read_only write-inside, read_only edit-inside, read_only shell ("+cause+"); read_only other (a login)") {
		t.Errorf("verdict %s: %q", status, reason)
	}
}
