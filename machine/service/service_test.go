package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hai-relay/relay/gates"
	"github.com/hai-relay/relay/gates/gatestest"
	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/machine/service"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/servicetest"
	"github.com/hai-relay/relay/persistence"
	"github.com/hai-relay/relay/persistence/persistencetest"
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

// messageBytes is the rig's limits.message_bytes: small, so the suite's
// oversized payloads stay small too.
const messageBytes = 4096

// registry knows the core agents, all enabled and configured.
type registry map[string]model.AgentInfo

func newRegistry() registry {
	r := registry{}
	for _, n := range model.CoreAgents() {
		r[n] = model.AgentInfo{Name: n, Enabled: true, Configured: true}
	}
	return r
}

func (r registry) Known(name string) bool { _, ok := r[name]; return ok }
func (r registry) Agent(_ context.Context, name string) (model.AgentInfo, bool) {
	a, ok := r[name]
	return a, ok
}
func (r registry) Agents(context.Context) []model.AgentInfo {
	var out []model.AgentInfo
	for _, n := range model.CoreAgents() {
		out = append(out, r[n])
	}
	return out
}

// dispatcher keeps the deny-all promise and starts nothing: an authorized
// task stays authorized until it is canceled.
type dispatcher struct{}

func (dispatcher) Policy() model.DispatchPolicy {
	return model.DispatchPolicy{DeniesAllPermissions: true}
}
func (dispatcher) Dispatch(context.Context, model.Task, model.RunReporter) error { return nil }
func (dispatcher) Cancel(string)                                                 {}

type rig struct {
	db  *persistence.DB
	svc *service.Service
	cwd string
}

// newRig is the in-process service as the daemon wires it: real SQLite on
// a temporary file, the real engine, and the fake authority adapter, a real
// program (allow, guarded), as the authority.
func newRig(t *testing.T) *rig {
	t.Helper()
	db := persistencetest.MustOpenTemp(t)
	reg := newRegistry()
	auth := gates.NewAuthority([]string{gatestest.BuildFakeAuthority(t), "allow-guarded"}, 10*time.Second)
	eng := machine.New(machine.Options{Store: db, Dispatcher: dispatcher{}, Registry: reg, Authority: auth,
		MaxDispatch: 64, MaxPromptBytes: messageBytes, NotifySubmitter: true})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	svc := service.New(service.Options{Engine: eng, Store: db, Messages: db, Registry: reg, MessageBytes: messageBytes})
	return &rig{db: db, svc: svc, cwd: t.TempDir()}
}

// The conformance suite of model.Service, against the in-process service.
func TestConformance(t *testing.T) {
	t.Parallel()
	servicetest.Run(t, func(t *testing.T) servicetest.Fixture {
		r := newRig(t)
		return servicetest.Fixture{As: func(string) model.Service { return r.svc },
			Agents: []string{"codex", "claude", "gemini"}, Cwd: r.cwd, MessageBytes: messageBytes}
	})
}

// A recipient is one agent name, exactly: padding around a name is a
// malformed argument (invalid_args), not a list of agents
// (broadcast_not_supported), and nothing is stored.
func TestSendMessageRecipientShape(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	svc := r.svc
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
	if ms, err := r.db.ListMessages(ctx, model.MessageFilter{}); err != nil || len(ms) != 0 {
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
		if id := machine.NewID(model.TaskIDPrefix); !model.ValidTaskID(id) || model.ValidMessageID(id) {
			t.Fatalf("task id %q: ValidTaskID=%v ValidMessageID=%v", id, model.ValidTaskID(id), model.ValidMessageID(id))
		}
		if id := machine.NewID(model.MessageIDPrefix); !model.ValidMessageID(id) || model.ValidTaskID(id) {
			t.Fatalf("message id %q: ValidMessageID=%v ValidTaskID=%v", id, model.ValidMessageID(id), model.ValidTaskID(id))
		}
	}
	good := machine.NewID(model.TaskIDPrefix)
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
	r := newRig(t)
	svc := r.svc
	ctx := context.Background()
	taskID, msgID := machine.NewID(model.TaskIDPrefix), machine.NewID(model.MessageIDPrefix)
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
		rep, err := r.db.VerifyAudit(ctx)
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
	if _, _, err := r.db.CreateTask(ctx, model.Task{ID: taskID, Caller: "codex", Target: "claude", Prompt: "p", Cwd: r.cwd}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.db.CreateMessage(ctx, model.Message{ID: msgID, From: "codex", To: "claude", Body: "b", ContextID: "C-1"}); err != nil {
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
		task, err := svc.SubmitTask(ctx, bystander, model.SubmitRequest{Target: "codex", Prompt: "p", Cwd: r.cwd,
			MissionID: "M-1", LeaseID: "S-1", ReferenceTaskIDs: []string{taskID, machine.NewID(model.TaskIDPrefix)}})
		if err != nil {
			t.Fatalf("submit with references: %v", err)
		}
		refs = append(refs, task.ReferenceTaskIDs)
	}
	if refs[0][0] != taskID || refs[1][0] != taskID {
		t.Errorf("references stored as %v", refs)
	}
}
