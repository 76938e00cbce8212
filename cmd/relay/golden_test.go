package main

import (
	"bytes"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
	"github.com/hai-relay/relay/spec/spectest"
)

// update rewrites the golden files from the code instead of comparing:
// go test -tags relaytest ./cmd/relay -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the code")

// The CLI's help, every command's, as a user reads it: a change to a
// command, a flag or a sentence of help shows as a diff of
// testdata/cli_help.golden.
func TestCLIHelpGolden(t *testing.T) {
	t.Parallel()
	names := []string{""}
	for _, c := range commands {
		names = append(names, c.name)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, name := range names {
		args := append(strings.Fields(name), "--help")
		out, errOut, code := relayEnv(t, append([]string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}, fastExit...), args...)
		b.WriteString("$ relay " + strings.Join(args, " ") + "\n" + out + errOut)
		if code != 0 {
			t.Errorf("relay %s: exit %d", strings.Join(args, " "), code)
		}
		b.WriteString("\n")
	}
	spectest.Golden(t, filepath.Join("testdata", "cli_help.golden"), b.Bytes(), *update)
}

// relay tasks show, for a delegated task that failed with a hint, denied
// calls and a full timeline: the layout a user reads, as
// testdata/tasks_show.golden.
func TestTasksShowGolden(t *testing.T) {
	t.Parallel()
	at := func(sec int) time.Time { return time.Date(2026, 12, 6, 10, 0, sec, 0, time.Local) }
	d := model.TaskDetail{Task: model.Task{
		ID: "T-01GOLDEN0000000000000000002", State: model.StateFailed, Code: model.CodeAgentRefused,
		Message: "codex refused the task: it ended its turn with stop reason refusal",
		Caller:  "claude", Target: "codex", Mode: model.ModeReadOnly, MissionID: "M-2026-001", LeaseID: "S-001",
		ContextID: "C-01GOLDEN0000000000000000000", Cwd: "/home/me/src/project",
		ParentTaskID: "T-01GOLDEN0000000000000000001",
		Chain:        []model.Hop{{TaskID: "T-01GOLDEN0000000000000000001", Caller: "operator", Target: "claude"}},
		Result:       "I could not apply the patch: the write was denied.", StopReason: "refusal", SessionMode: "read-only",
		ToolCalls: []model.ToolCall{
			{ID: "call-1", Title: "Read parser.go", Kind: "read", Status: "completed"},
			{ID: "call-2", Title: "Edit parser.go", Kind: "edit", Status: model.ToolCallFailed, Denied: true},
		},
		DeniedPermissions: 1, CreatedAt: at(0), UpdatedAt: at(9),
	}}
	d.Hint = spec.TaskHint(d.Task)
	d.Events = []model.Event{
		{TaskID: d.ID, From: model.StateSubmitted, To: model.StateAuthorized, Trigger: "authorize", At: at(1)},
		{TaskID: d.ID, From: model.StateAuthorized, To: model.StateWorking, Trigger: "start", Message: "session mode read-only; hardening profile codex-acp 2.x", At: at(2)},
		{TaskID: d.ID, From: model.StateWorking, To: model.StateFailed, Trigger: "fail", Code: d.Code, Message: d.Message, At: at(9)},
	}
	d.Verdicts = []model.Verdict{
		{Gate: model.GateMissionLease, Passed: true, Message: "mission_id and lease_id are well formed", At: at(0)},
		{Gate: model.GateAuthority, Passed: true, Message: "the authority allowed the task (assurance standard)", At: at(1)},
	}
	var b bytes.Buffer
	if err := printTask(&b, "/home/me/.local/state/hai-relay", d, false); err != nil {
		t.Fatal(err)
	}
	spectest.Golden(t, filepath.Join("testdata", "tasks_show.golden"), b.Bytes(), *update)
}
