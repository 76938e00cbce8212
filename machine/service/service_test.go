package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hai-relay/relay/cmd/daemontest"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/machine/service"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/servicetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	gatestest.RemoveFakeAuthority()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// The conformance suite of model.Service, against the in-process service.
func TestConformance(t *testing.T) {
	t.Parallel()
	servicetest.Run(t, func(t *testing.T) servicetest.Fixture {
		r := daemontest.New(t)
		return servicetest.Fixture{As: func(string) model.Service { return r.Service }, Operator: r.Service,
			Agents: []string{"codex", "claude", "gemini"}, Cwd: r.Cwd, MessageBytes: daemontest.MessageBytes}
	})
}

// A recipient is one agent name, exactly: padding around a name is a
// malformed argument (invalid_args), not a list of agents
// (broadcast_not_supported), and nothing is stored.
func TestSendMessageRecipientShape(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	svc := r.Service
	ctx := context.Background()
	for _, tc := range []struct {
		to   string
		code model.Code
	}{
		{" codex", model.CodeInvalidArgs},
		{"codex ", model.CodeInvalidArgs},
		{"\tcodex\n", model.CodeInvalidArgs},
		{"codex,claude", model.CodeBroadcastNotSupported},
		{"codex claude", model.CodeBroadcastNotSupported},
		{"*", model.CodeBroadcastNotSupported},
		{"all", model.CodeBroadcastNotSupported},
	} {
		_, err := svc.SendMessage(ctx, "gemini", model.SendRequest{To: tc.to, Body: "hi"})
		if got := model.ErrorCode(err); got != tc.code {
			t.Errorf("to %q: %q (%v), want %q", tc.to, got, err, tc.code)
		}
	}
	if ms, err := r.DB.ListMessages(ctx, model.MessageFilter{}); err != nil || len(ms) != 0 {
		t.Fatalf("%d messages stored by refused sends (%v)", len(ms), err)
	}
	if _, err := svc.SendMessage(ctx, "gemini", model.SendRequest{To: "codex", Body: "hi"}); err != nil {
		t.Fatalf("a plain name: %v", err)
	}
}

// The relay's ids are what model.ValidTaskID and model.ValidMessageID
// accept, so a lookup or reference that fails them names nothing the
// relay made; near misses are refused.
func TestRelayIDShape(t *testing.T) {
	t.Parallel()
	for range 100 {
		if id := model.NewID(model.TaskIDPrefix); !model.ValidTaskID(id) || model.ValidMessageID(id) {
			t.Fatalf("task id %q: ValidTaskID=%v ValidMessageID=%v", id, model.ValidTaskID(id), model.ValidMessageID(id))
		}
		if id := model.NewID(model.MessageIDPrefix); !model.ValidMessageID(id) || model.ValidTaskID(id) {
			t.Fatalf("message id %q: ValidMessageID=%v ValidTaskID=%v", id, model.ValidMessageID(id), model.ValidTaskID(id))
		}
	}
	good := model.NewID(model.TaskIDPrefix)
	for _, bad := range []string{"", "T-1", "T-nope", good + "0", good[:len(good)-1], "t" + good[1:],
		good[:5] + "i" + good[6:], good[:5] + "U" + good[6:], "T_" + good[2:], "T-" + good[2:len(good)-1] + "\n"} {
		if model.ValidTaskID(bad) {
			t.Errorf("ValidTaskID(%q) = true", bad)
		}
	}
}

// An id that exists but belongs to other agents gets exactly the answer
// of an id that does not exist — the same code, message and hint, and no
// audit row in either case — on every call that takes a task or message
// id, so that no answer tells a caller what others have. The same ids are
// asked about twice, before and after another agent's task and message
// are stored under them.
func TestNotYoursIsNotFound(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	svc := r.Service
	ctx := context.Background()
	taskID, msgID := model.NewID(model.TaskIDPrefix), model.NewID(model.MessageIDPrefix)
	const bystander = "gemini" // neither sent nor received either of them

	calls := []struct {
		name string
		call func() (any, error)
	}{
		{"get_task", func() (any, error) { return svc.GetTask(ctx, bystander, taskID) }},
		{"cancel_task", func() (any, error) { return svc.CancelTask(ctx, bystander, taskID) }},
		{"send_message reply_to", func() (any, error) {
			return svc.SendMessage(ctx, bystander, model.SendRequest{To: "codex", Body: "re", ReplyTo: msgID})
		}},
		{"ack_messages", func() (any, error) { return svc.AckMessages(ctx, bystander, []string{msgID}) }},
	}
	auditRows := func() int64 {
		t.Helper()
		rep, err := r.DB.VerifyAudit(ctx)
		if err != nil || !rep.OK {
			t.Fatalf("audit: %+v %v", rep, err)
		}
		return rep.Rows
	}
	answer := func(call func() (any, error)) string {
		t.Helper()
		before := auditRows()
		v, err := call()
		if model.ErrorCode(err) != model.CodeNotFound {
			t.Fatalf("answer %+v, %v; want not_found", v, err)
		}
		if n := auditRows() - before; n != 0 {
			t.Errorf("a refused lookup wrote %d audit rows", n)
		}
		var e *model.Error
		errors.As(err, &e)
		b, _ := json.Marshal(e) // code, message, hint: all a caller sees
		return string(b)
	}
	missing := make([]string, len(calls))
	for i, c := range calls {
		missing[i] = answer(c.call)
	}

	// Another agent's task and message now exist under those ids.
	if _, _, err := r.DB.CreateTask(ctx, model.Task{ID: taskID, Caller: "codex", Target: "claude", Prompt: "p", Cwd: r.Cwd}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.DB.CreateMessage(ctx, model.Message{ID: msgID, From: "codex", To: "claude", Body: "b", ContextID: "C-1"}); err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		if got := answer(c.call); got != missing[i] {
			t.Errorf("%s: another agent's id answers\n  %s\nbut an id that does not exist\n  %s", c.name, got, missing[i])
		}
	}

	// A task may reference any task id: another agent's is stored exactly
	// like one that does not exist, and the submitter learns nothing.
	var refs [][]string
	for range 2 {
		task, err := svc.SubmitTask(ctx, bystander, model.SubmitRequest{Target: "codex", Prompt: "p", Cwd: r.Cwd,
			MissionID: "M-1", LeaseID: "S-1", ReferenceTaskIDs: []string{taskID, model.NewID(model.TaskIDPrefix)}})
		if err != nil {
			t.Fatalf("submit with references: %v", err)
		}
		refs = append(refs, task.ReferenceTaskIDs)
	}
	if refs[0][0] != taskID || refs[1][0] != taskID {
		t.Errorf("references stored as %v", refs)
	}
}

// readCounter is a store that counts task reads.
type readCounter struct {
	model.Store
	reads atomic.Int64
}

func (c *readCounter) GetTask(ctx context.Context, id string) (model.Task, error) {
	c.reads.Add(1)
	return c.Store.GetTask(ctx, id)
}

// A wait is not a poll: while nothing happens the task is read when the
// wait begins, at the safety net's period (2 s) and when it ends, not in
// a loop; and only the caller's tasks are read again.
func TestWaitTaskDoesNotPoll(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	ctx := context.Background()
	task, err := r.Service.SubmitTask(ctx, "codex", model.SubmitRequest{Target: "claude", Prompt: "p", MissionID: "M-1", LeaseID: "S-1", Cwd: r.Cwd})
	if err != nil {
		t.Fatal(err)
	}
	store := &readCounter{Store: r.DB}
	svc := service.New(service.Options{Engine: r.Engine, Store: store, Messages: r.DB, Registry: r.Registry})
	const wait = 2200 * time.Millisecond
	got, err := svc.WaitTask(ctx, "codex", task.ID, wait)
	if err != nil || got.State.Terminal() {
		t.Fatalf("wait: %+v, %v", got, err)
	}
	// The engine's own evaluation of the task reads through r.DB, not
	// this store, so every read counted is the wait's.
	if n := store.reads.Load(); n > 4 {
		t.Errorf("a %s wait read the task %d times; want at most 4 (start, the 2 s look, the end)", wait, n)
	}
}

// A wait whose context ends (the daemon stopping) answers at once with
// the task as it is, not an error.
func TestWaitTaskAnswersWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	task, err := r.Service.SubmitTask(context.Background(), "codex", model.SubmitRequest{Target: "claude", Prompt: "p", MissionID: "M-1", LeaseID: "S-1", Cwd: r.Cwd})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	got, err := r.Service.WaitTask(ctx, "claude", task.ID, 30*time.Second)
	if d := time.Since(start); err != nil || got.ID != task.ID || got.State.Terminal() || d > 5*time.Second {
		t.Fatalf("a wait whose context ended after 200 ms: %+v, %v after %s", got, err, d)
	}
}

// relay tasks show reads a task, its events and its verdicts in one
// snapshot: while another goroutine moves tasks through their lifecycle
// (each transition one commit with its event and verdicts), every timeline
// shown ends in the state shown, with the verdicts of the transitions it
// holds. Read in three transactions, as before, a transition committed
// between the reads showed a state no event led to, or an event past it.
func TestShowTaskReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	r := daemontest.New(t)
	ctx := context.Background()
	steps := []model.Transition{
		{From: model.StateSubmitted, To: model.StateAuthorized, Trigger: model.TriggerAuthorize,
			Verdicts: []model.Verdict{{Gate: model.GateMissionLease, Passed: true}}},
		{From: model.StateAuthorized, To: model.StateWorking, Trigger: model.TriggerStart},
		{From: model.StateWorking, To: model.StateCompleted, Trigger: model.TriggerComplete,
			Result: &model.TaskResult{Text: "done", StopReason: "end_turn"}},
	}
	deadline := time.Now().Add(3 * time.Second)
	shown, mismatches := 0, 0
	for i := 0; time.Now().Before(deadline) && mismatches == 0; i++ {
		id := model.NewID(model.TaskIDPrefix)
		if _, _, err := r.DB.CreateTask(ctx, model.Task{ID: id, Caller: "codex", Target: "claude", Mode: model.ModeReadOnly,
			MissionID: "M-1", LeaseID: "S-1", Prompt: fmt.Sprint("snapshot ", i)}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			for j, tr := range steps {
				tr.TaskID = id
				if j == len(steps)-1 {
					tr.NoticeID = model.NewID(model.MessageIDPrefix)
				}
				if _, err := r.DB.Transition(ctx, tr); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for end := false; !end; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				end = true
			default:
			}
			d, err := r.Service.ShowTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			shown++
			last := model.StateSubmitted
			if n := len(d.Events); n > 0 {
				last = d.Events[n-1].To
			}
			wantVerdicts := 0
			if len(d.Events) > 0 {
				wantVerdicts = 1
			}
			if last != d.State || len(d.Verdicts) != wantVerdicts {
				mismatches++
				t.Errorf("task %s shown %s with %d events (the last to %s) and %d verdicts", id, d.State, len(d.Events), last, len(d.Verdicts))
			}
		}
	}
	t.Logf("%d timelines shown", shown)
}
