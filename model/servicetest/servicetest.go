// Package servicetest is the conformance suite of model.Service: the
// access rules an agent relies on and what the operator's commands rely
// on (listings and their pages, a task's timeline, cancel as operator and
// its record, the watch, probes, the audit chain), whichever transport
// reaches the relay. Run it against every implementation; the in-process
// service (machine/service) and the socket client (facade) both pass it,
// so transport parity is tested, not claimed. Every method of the port
// is covered (TestSuiteCoversEveryMethod).
//
// It is test-only: nothing in the product imports it.
//
// Typical use:
//
//	func TestConformance(t *testing.T) {
//		servicetest.Run(t, func(t *testing.T) servicetest.Fixture {
//			svc := ... // a fresh service on a fresh store
//			return servicetest.Fixture{As: func(string) model.Service { return svc }, Operator: svc, ...}
//		})
//	}
package servicetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// Fixture is one fresh service for one test of the suite.
type Fixture struct {
	// As returns the service as agent: the suite calls it only with agent
	// as the caller. The in-process service may return itself for every
	// agent; a transport returns a client whose identity is fixed to
	// agent, as a facade's is at launch.
	As func(agent string) model.Service
	// Operator is the service as the operator CLI reaches it: the suite
	// calls only the operator methods (model.OperatorService) on it.
	// The service's probe and hardening verification of a known agent
	// (machine/service's Options.Probe and Verify) are the fixture's
	// own; they may fail, as long as they answer for the agent named.
	Operator model.Service
	// Agents are at least three distinct agent names the service knows
	// (enabled and configured), none of them the relay's own.
	Agents []string
	// Cwd is an existing directory a task may name as its cwd.
	Cwd string
	// MessageBytes is the service's bound on a message body and a task's
	// prompt (limits.message_bytes).
	MessageBytes int
}

// A suiteCase is one test of the suite, with the model.Service methods
// whose promises it checks; TestSuiteCoversEveryMethod keeps the lists
// complete.
type suiteCase struct {
	name   string
	covers []string
	run    func(t *testing.T, f Fixture)
}

// cases are the suite's tests.
var cases = []suiteCase{
	{"MessagesReachOnlyTheRecipient", []string{"SendMessage", "CheckInbox"}, messagesReachOnlyTheRecipient},
	{"AckOnlyOwnMessages", []string{"AckMessages"}, ackOnlyOwnMessages},
	{"NotYoursIsNotThere", []string{"GetTask", "WaitTask", "CancelTask", "SendMessage", "AckMessages"}, notYoursIsNotThere},
	{"RecipientRules", []string{"SendMessage"}, recipientRules},
	{"PayloadBounds", []string{"SendMessage", "SubmitTask"}, payloadBounds},
	{"TaskVisibility", []string{"ListTasks", "GetTask"}, taskVisibility},
	{"CancelOnlyOwnTasks", []string{"CancelTask"}, cancelOnlyOwnTasks},
	{"WaitTask", []string{"WaitTask"}, waitTask},
	{"Idempotency", []string{"SubmitTask"}, idempotency},
	{"UnknownTarget", []string{"SubmitTask", "ListAgents"}, unknownTarget},
	{"MCPTaskEventsOnlyOnVisibleTasks", []string{"MCPTaskEvent"}, mcpTaskEvents},
	{"ConnectionsAreAudited", []string{"Connected", "VerifyAudit"}, connectionsAreAudited},
	{"OperatorListsEveryTask", []string{"Tasks"}, operatorListsEveryTask},
	{"OperatorShowsATasksTimeline", []string{"ShowTask"}, operatorShowsATasksTimeline},
	{"OperatorCancelsAnyTask", []string{"CancelTaskAsOperator", "ShowTask", "VerifyAudit"}, operatorCancelsAnyTask},
	{"OperatorListsEveryMessage", []string{"Messages"}, operatorListsEveryMessage},
	{"OperatorAgents", []string{"Agents", "ListAgents"}, operatorAgents},
	{"SenderShares", []string{"SendMessage", "CheckInbox", "InboxShares"}, senderShares},
	{"ProbeAndVerifyKnownAgentsOnly", []string{"ProbeAgent", "VerifyAgent"}, probeAndVerifyKnownAgentsOnly},
	{"WatchFollowsATask", []string{"WatchEvents"}, watchFollowsATask},
	{"WatchRefusals", []string{"WatchEvents"}, watchRefusals},
}

// Run runs the suite. newFixture is called once per test, each of which
// runs in parallel with the others; it should give a service on a store
// of its own, and clean it up with t.Cleanup.
func Run(t *testing.T, newFixture func(t *testing.T) Fixture) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			if len(f.Agents) < 3 {
				t.Fatalf("servicetest: the fixture names %d agents; the suite needs 3", len(f.Agents))
			}
			if f.Operator == nil {
				t.Fatal("servicetest: the fixture has no Operator service")
			}
			c.run(t, f)
		})
	}
}

// mcpTaskEvents: the submitter may record the life of the MCP task bound
// to its task, every step again without error (a repeat writes nothing);
// the target, which may read the task, and a third agent get not_found,
// exactly as for a task that does not exist; an event that is none is
// invalid_args.
func mcpTaskEvents(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	task := f.submit(t, a, model.SubmitRequest{Target: b})
	for range 2 {
		for _, ev := range model.AllMCPTaskEvents() {
			if err := f.As(a).MCPTaskEvent(ctx, a, task.ID, ev); err != nil {
				t.Fatalf("%s records %s on %s: %v", a, ev, task.ID, err)
			}
		}
	}
	wantCode(t, "the target", f.As(b).MCPTaskEvent(ctx, b, task.ID, model.MCPTaskDelivered), model.CodeNotFound)
	notYours := f.As(c).MCPTaskEvent(ctx, c, task.ID, model.MCPTaskCreated)
	wantCode(t, "a third agent", notYours, model.CodeNotFound)
	missing := f.As(c).MCPTaskEvent(ctx, c, sibling(task.ID), model.MCPTaskCreated)
	wantCode(t, "a task that does not exist", missing, model.CodeNotFound)
	if public(t, notYours, task.ID) != public(t, missing, sibling(task.ID)) {
		t.Errorf("not yours %s and not there %s differ", public(t, notYours, task.ID), public(t, missing, sibling(task.ID)))
	}
	wantCode(t, "an event that is none", f.As(a).MCPTaskEvent(ctx, a, task.ID, "exploded"), model.CodeInvalidArgs)
}

// wantCode fails t unless err carries code.
func wantCode(t *testing.T, what string, err error, code model.Code) {
	t.Helper()
	if got := model.ErrorCode(err); got != code {
		t.Fatalf("%s: error %q (%v), want %q", what, got, err, code)
	}
}

func must[T any](t *testing.T, what string) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// public is everything a caller sees of an error (code, message, hint),
// with id written as <id>: the answers about two ids are compared byte for
// byte, apart from the id each names.
func public(t *testing.T, err error, id string) string {
	t.Helper()
	var e *model.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a *model.Error", err)
	}
	b, _ := json.Marshal(model.Public(e))
	return strings.ReplaceAll(string(b), id, "<id>")
}

// sibling returns an id of the same shape as id that names nothing: its
// last digit changed.
func sibling(id string) string {
	last := id[len(id)-1]
	next := byte('0')
	if last == '0' {
		next = '1'
	}
	return id[:len(id)-1] + string(next)
}

func (f Fixture) submit(t *testing.T, caller string, r model.SubmitRequest) model.Task {
	t.Helper()
	if r.Target == "" {
		r.Target = f.Agents[1]
		if caller == r.Target {
			r.Target = f.Agents[0]
		}
	}
	if r.Prompt == "" {
		r.Prompt = "summarize README.md"
	}
	if r.Cwd == "" {
		r.Cwd = f.Cwd
	}
	if r.MissionID == "" && r.LeaseID == "" {
		r.MissionID, r.LeaseID = "M-1", "S-1"
	}
	task, err := f.As(caller).SubmitTask(context.Background(), caller, r)
	if err != nil {
		t.Fatalf("%s submits: %v", caller, err)
	}
	if task.ID == "" || task.Caller != caller || task.Target != r.Target {
		t.Fatalf("%s submits to %s: got %+v", caller, r.Target, task)
	}
	return task
}

func (f Fixture) send(t *testing.T, from, to, body string) model.Message {
	t.Helper()
	m, err := f.As(from).SendMessage(context.Background(), from, model.SendRequest{To: to, Body: body})
	if err != nil {
		t.Fatalf("%s sends to %s: %v", from, to, err)
	}
	return m
}

func (f Fixture) inbox(t *testing.T, agent string) model.Inbox {
	t.Helper()
	in, err := f.As(agent).CheckInbox(context.Background(), agent, false, 0)
	if err != nil {
		t.Fatalf("%s's inbox: %v", agent, err)
	}
	return in
}

// A message is stored as from its sender (the caller, never a field of
// the request) and shows up in its recipient's inbox only: not in the
// sender's, not in a bystander's. Reading it marks it read.
func messagesReachOnlyTheRecipient(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	m := f.send(t, a, b, "hello")
	if m.ID == "" || m.From != a || m.To != b || m.Body != "hello" || m.State != model.MessageStored {
		t.Fatalf("sent %+v", m)
	}
	for _, who := range []string{a, c} {
		if in := f.inbox(t, who); len(in.Messages) != 0 || in.Unread != 0 {
			t.Errorf("%s's inbox holds %+v (unread %d); the message was to %s", who, in.Messages, in.Unread, b)
		}
	}
	in, err := f.As(b).CheckInbox(ctx, b, true, 0)
	if err != nil || len(in.Messages) != 1 || in.Messages[0].ID != m.ID || in.Messages[0].From != a || in.Unread != 0 {
		t.Fatalf("%s's unread inbox: %+v, %v; want the one message, nothing unread left", b, in, err)
	}
	if in := must[model.Inbox](t, "unread inbox again")(f.As(b).CheckInbox(ctx, b, true, 0)); len(in.Messages) != 0 {
		t.Errorf("a read message is still unread: %+v", in.Messages)
	}
	if in := f.inbox(t, b); len(in.Messages) != 1 || in.Messages[0].State != model.MessageRead {
		t.Errorf("%s's whole inbox: %+v, want the message, read", b, in.Messages)
	}
	// A reply joins the thread of the message it answers.
	r, err := f.As(b).SendMessage(ctx, b, model.SendRequest{To: a, Body: "hi", ReplyTo: m.ID})
	if err != nil || r.ContextID != m.ContextID || r.ReplyTo != m.ID {
		t.Fatalf("reply: %+v, %v; want it in context %s", r, err, m.ContextID)
	}
}

// Only a message's recipient acknowledges it: its sender and a bystander
// get not_found, and it stays in the recipient's inbox; once acknowledged,
// it leaves the inbox.
func ackOnlyOwnMessages(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	m := f.send(t, a, b, "ack me")
	for _, who := range []string{a, c} {
		res, err := f.As(who).AckMessages(ctx, who, []string{m.ID})
		wantCode(t, who+" acks "+b+"'s message", err, model.CodeNotFound)
		if res.Acked != 0 {
			t.Errorf("%s acked %d", who, res.Acked)
		}
	}
	if in := f.inbox(t, b); len(in.Messages) != 1 || in.Messages[0].ID != m.ID {
		t.Fatalf("refused acks changed %s's inbox: %+v", b, in.Messages)
	}
	_, err := f.As(b).AckMessages(ctx, b, nil)
	wantCode(t, "ack of nothing", err, model.CodeInvalidArgs)
	res, err := f.As(b).AckMessages(ctx, b, []string{m.ID})
	if err != nil || res.Acked != 1 {
		t.Fatalf("the recipient acks: %+v, %v", res, err)
	}
	if in := f.inbox(t, b); len(in.Messages) != 0 || in.Unread != 0 {
		t.Errorf("after the ack the inbox holds %+v (unread %d)", in.Messages, in.Unread)
	}
}

// Another agent's task or message and one that does not exist get the
// same answer, byte for byte (code, message, hint; each naming its own
// id), on every call that takes an id: nothing tells a caller what others
// have.
func notYoursIsNotThere(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	task := f.submit(t, a, model.SubmitRequest{Target: b})
	msg := f.send(t, a, b, "private")
	svc := f.As(c) // a bystander: neither sent, received, submitted nor targets
	for _, call := range []struct {
		name string
		id   string
		call func(id string) error
	}{
		{"get_task", task.ID, func(id string) error { _, err := svc.GetTask(ctx, c, id); return err }},
		{"get_task with a wait", task.ID, func(id string) error { _, err := svc.WaitTask(ctx, c, id, 30*time.Second); return err }},
		{"cancel_task", task.ID, func(id string) error { _, err := svc.CancelTask(ctx, c, id); return err }},
		{"send_message reply_to", msg.ID, func(id string) error {
			_, err := svc.SendMessage(ctx, c, model.SendRequest{To: a, Body: "re", ReplyTo: id})
			return err
		}},
		{"ack_messages", msg.ID, func(id string) error { _, err := svc.AckMessages(ctx, c, []string{id}); return err }},
	} {
		yours, there := call.call(call.id), call.call(sibling(call.id))
		wantCode(t, call.name+" of another agent's id", yours, model.CodeNotFound)
		wantCode(t, call.name+" of an id that does not exist", there, model.CodeNotFound)
		if got, want := public(t, yours, call.id), public(t, there, sibling(call.id)); got != want {
			t.Errorf("%s: another agent's id answers\n  %s\nbut an id that does not exist\n  %s", call.name, got, want)
		}
	}
	// Nothing changed for their owners.
	if got := must[model.Task](t, "get own task")(f.As(a).GetTask(ctx, a, task.ID)); got.State == model.StateCanceled {
		t.Errorf("a bystander's cancel changed the task: %+v", got)
	}
	if in := f.inbox(t, b); len(in.Messages) != 1 || in.Messages[0].State == model.MessageAcked {
		t.Errorf("a bystander's ack changed the message: %+v", in.Messages)
	}
}

// A recipient is exactly one known agent other than the sender and the
// relay; every refusal has its own code, and nothing is stored.
func recipientRules(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b := f.Agents[0], f.Agents[1]
	for _, c := range []struct {
		to   string
		code model.Code
	}{
		{"", model.CodeInvalidArgs},
		{a, model.CodeInvalidRecipient}, // oneself
		{model.RelayAgent, model.CodeInvalidRecipient},
		{"no-such-agent", model.CodeUnknownAgent},
		{" " + b, model.CodeInvalidArgs},
		{b + " ", model.CodeInvalidArgs},
		{"*", model.CodeBroadcastNotSupported},
		{"all", model.CodeBroadcastNotSupported},
		{a + "," + b, model.CodeBroadcastNotSupported},
	} {
		_, err := f.As(a).SendMessage(ctx, a, model.SendRequest{To: c.to, Body: "hi"})
		wantCode(t, "to "+c.to, err, c.code)
		if model.Public(err).Hint == "" {
			t.Errorf("to %q: no hint", c.to)
		}
	}
	for _, who := range []string{a, b} {
		if in := f.inbox(t, who); len(in.Messages) != 0 {
			t.Errorf("refused sends stored %+v for %s", in.Messages, who)
		}
	}
}

// Bodies and prompts are bounded by limits.message_bytes
// (payload_too_large); empty ones, oversized fields and artifacts that
// carry content are invalid_args. Nothing refused is stored.
func payloadBounds(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b := f.Agents[0], f.Agents[1]
	send := func(r model.SendRequest) error {
		r.To = b
		_, err := f.As(a).SendMessage(ctx, a, r)
		return err
	}
	big := strings.Repeat("x", f.MessageBytes+1)
	wantCode(t, "oversized body", send(model.SendRequest{Body: big}), model.CodePayloadTooLarge)
	wantCode(t, "empty body", send(model.SendRequest{}), model.CodeInvalidArgs)
	wantCode(t, "oversized context_id", send(model.SendRequest{Body: "b", ContextID: strings.Repeat("c", model.MaxContextIDBytes+1)}), model.CodeInvalidArgs)
	wantCode(t, "malformed reply_to", send(model.SendRequest{Body: "b", ReplyTo: "MSG-1"}), model.CodeInvalidArgs)
	wantCode(t, "data: artifact", send(model.SendRequest{Body: "b", Artifacts: []model.Artifact{{URI: "data:,hi"}}}), model.CodeInvalidArgs)
	wantCode(t, "too many artifacts", send(model.SendRequest{Body: "b", Artifacts: make([]model.Artifact, model.MaxArtifacts+1)}), model.CodeInvalidArgs)
	if m, err := f.As(a).SendMessage(ctx, a, model.SendRequest{To: b, Body: strings.Repeat("x", f.MessageBytes)}); err != nil || len(m.Body) != f.MessageBytes {
		t.Fatalf("a body of exactly limits.message_bytes: %v", err)
	}

	submit := func(r model.SubmitRequest) error {
		r.Target, r.MissionID, r.LeaseID = b, "M-1", "S-1"
		if r.Cwd == "" {
			r.Cwd = f.Cwd
		}
		if r.Prompt == "" {
			r.Prompt = "p"
		}
		_, err := f.As(a).SubmitTask(ctx, a, r)
		return err
	}
	wantCode(t, "oversized prompt", submit(model.SubmitRequest{Prompt: big}), model.CodePayloadTooLarge)
	wantCode(t, "oversized idempotency_key", submit(model.SubmitRequest{IdempotencyKey: strings.Repeat("k", model.MaxIdempotencyKeyBytes+1)}), model.CodeInvalidArgs)
	wantCode(t, "malformed reference", submit(model.SubmitRequest{ReferenceTaskIDs: []string{"T-1"}}), model.CodeInvalidArgs)
	wantCode(t, "relative cwd", submit(model.SubmitRequest{Cwd: "src"}), model.CodeInvalidCwd)
	wantCode(t, "unknown mode", submit(model.SubmitRequest{Mode: "yolo"}), model.CodeInvalidArgs)
	if ts := must[[]model.Task](t, "list")(f.As(a).ListTasks(ctx, a, "", 0, "")); len(ts) != 0 {
		t.Errorf("refused submissions stored %d tasks", len(ts))
	}
}

// A task is visible to its submitter and its target only: get_task and
// list_tasks agree, list_tasks filters by state and bounds its limit.
func taskVisibility(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	ab := f.submit(t, a, model.SubmitRequest{Target: b})
	ca := f.submit(t, c, model.SubmitRequest{Target: a})
	ids := func(ts []model.Task) map[string]bool {
		m := map[string]bool{}
		for _, task := range ts {
			m[task.ID] = true
		}
		return m
	}
	for _, w := range []struct {
		agent string
		sees  map[string]bool
	}{
		{a, map[string]bool{ab.ID: true, ca.ID: true}},
		{b, map[string]bool{ab.ID: true}},
		{c, map[string]bool{ca.ID: true}},
	} {
		got := ids(must[[]model.Task](t, w.agent+" lists")(f.As(w.agent).ListTasks(ctx, w.agent, "", 0, "")))
		if len(got) != len(w.sees) {
			t.Errorf("%s lists %v, want %v", w.agent, got, w.sees)
		}
		for _, task := range []model.Task{ab, ca} {
			if got[task.ID] != w.sees[task.ID] {
				t.Errorf("%s lists %v, want %v", w.agent, got, w.sees)
			}
			_, err := f.As(w.agent).GetTask(ctx, w.agent, task.ID)
			if w.sees[task.ID] && err != nil {
				t.Errorf("%s gets its task %s: %v", w.agent, task.ID, err)
			}
			if !w.sees[task.ID] {
				wantCode(t, w.agent+" gets another's task", err, model.CodeNotFound)
			}
		}
	}
	// The state filter: canceled tasks only, then nothing in a state none is in.
	must[model.Task](t, "cancel")(f.As(a).CancelTask(ctx, a, ab.ID))
	if got := ids(must[[]model.Task](t, "list canceled")(f.As(b).ListTasks(ctx, b, model.StateCanceled, 0, ""))); len(got) != 1 || !got[ab.ID] {
		t.Errorf("%s's canceled tasks: %v", b, got)
	}
	if got := must[[]model.Task](t, "list completed")(f.As(a).ListTasks(ctx, a, model.StateCompleted, 0, "")); got == nil || len(got) != 0 {
		t.Errorf("completed tasks: %#v, want an empty list", got)
	}
	if got := must[[]model.Task](t, "list limit 1")(f.As(a).ListTasks(ctx, a, "", 1, "")); len(got) != 1 {
		t.Errorf("limit 1 listed %d", len(got))
	}
	// Paging: a page of one, then the tasks before it, newest first, and
	// nothing before the oldest; the cursor keeps the caller's scope.
	first := must[[]model.Task](t, "page 1")(f.As(a).ListTasks(ctx, a, "", 1, ""))
	second := must[[]model.Task](t, "page 2")(f.As(a).ListTasks(ctx, a, "", 1, first[0].ID))
	if len(first) != 1 || len(second) != 1 || first[0].ID != ca.ID || second[0].ID != ab.ID {
		t.Errorf("pages of one: %v then %v, want %s then %s", ids(first), ids(second), ca.ID, ab.ID)
	}
	if rest := must[[]model.Task](t, "page 3")(f.As(a).ListTasks(ctx, a, "", 1, second[0].ID)); len(rest) != 0 {
		t.Errorf("before the oldest task: %v", ids(rest))
	}
	// Another agent's task as the cursor is not_found, exactly as a task
	// that does not exist: paging is no oracle.
	_, errTheirs := f.As(b).ListTasks(ctx, b, "", 10, ca.ID)
	wantCode(t, "a cursor naming another agent's task", errTheirs, model.CodeNotFound)
	_, errNone := f.As(b).ListTasks(ctx, b, "", 10, "T-01ZZZZZZZZZZZZZZZZZZZZZZZZ")
	wantCode(t, "a cursor naming no task", errNone, model.CodeNotFound)
	if errTheirs != nil && errNone != nil && strings.ReplaceAll(errTheirs.Error(), ca.ID, "ID") != strings.ReplaceAll(errNone.Error(), "T-01ZZZZZZZZZZZZZZZZZZZZZZZZ", "ID") {
		t.Errorf("the two cursors' errors differ beyond the id:\n%v\n%v", errTheirs, errNone)
	}
	_, err := f.As(a).ListTasks(ctx, a, "running", 0, "")
	wantCode(t, "an unknown state", err, model.CodeInvalidArgs)
	_, err = f.As(a).ListTasks(ctx, a, "", 1001, "")
	wantCode(t, "limit 1001", err, model.CodeInvalidArgs)
	_, err = f.As(a).GetTask(ctx, a, "T-nope")
	wantCode(t, "a malformed task id", err, model.CodeNotFound)
}

// Only a task's submitter cancels it: its target may see it but gets
// task_not_cancelable; a terminal task is task_not_cancelable too.
func cancelOnlyOwnTasks(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b := f.Agents[0], f.Agents[1]
	task := f.submit(t, a, model.SubmitRequest{Target: b})
	_, err := f.As(b).CancelTask(ctx, b, task.ID)
	wantCode(t, "the target cancels", err, model.CodeTaskNotCancelable)
	got, err := f.As(a).CancelTask(ctx, a, task.ID)
	if err != nil || got.ID != task.ID || got.State != model.StateCanceled || got.Code != model.CodeCanceledBySubmitter {
		t.Fatalf("the submitter cancels: %+v, %v", got, err)
	}
	_, err = f.As(a).CancelTask(ctx, a, task.ID)
	wantCode(t, "a second cancel", err, model.CodeTaskNotCancelable)
	if model.Public(err).Hint == "" {
		t.Error("task_not_cancelable without a hint")
	}
	if got := must[model.Task](t, "get")(f.As(b).GetTask(ctx, b, task.ID)); got.State != model.StateCanceled {
		t.Errorf("after the cancels: %s", got.State)
	}
}

// WaitTask answers a task the caller can see as soon as it ends (woken by
// the commit, not at the deadline, nor at a periodic look), and when the
// wait has passed with the task as it is; a task that is not the caller's
// is not_found at once, without waiting; a terminal task is answered at
// once; a wait out of range is invalid_args.
func waitTask(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	task := f.submit(t, a, model.SubmitRequest{Target: b})
	for _, w := range []time.Duration{-time.Second, model.MaxTaskWait + time.Second} {
		_, err := f.As(a).WaitTask(ctx, a, task.ID, w)
		wantCode(t, "a wait of "+w.String(), err, model.CodeInvalidArgs)
	}

	// Not the caller's: not_found, without waiting for anything.
	start := time.Now()
	_, err := f.As(c).WaitTask(ctx, c, task.ID, 20*time.Second)
	wantCode(t, "a bystander's wait", err, model.CodeNotFound)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a bystander's wait took %s: it must be refused at once", d)
	}

	// Nothing happens: the answer comes when the wait has passed, with
	// the task as it is.
	const short = 400 * time.Millisecond
	start = time.Now()
	got, err := f.As(a).WaitTask(ctx, a, task.ID, short)
	if d := time.Since(start); err != nil || got.ID != task.ID || got.State.Terminal() || d < short || d > short+5*time.Second {
		t.Fatalf("a wait of %s on a task that does not end: %+v, %v after %s", short, got, err, d)
	}

	// The task ends during the wait: the answer comes at its end. The
	// margin is under the service's periodic look (2 s, its safety net),
	// so only the commit's wake-up meets it.
	type answer struct {
		task model.Task
		err  error
		at   time.Time
	}
	done := make(chan answer, 1)
	go func() {
		got, err := f.As(b).WaitTask(ctx, b, task.ID, 30*time.Second)
		done <- answer{got, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := f.As(a).CancelTask(ctx, a, task.ID); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	var ans answer
	select {
	case ans = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the target's wait did not answer within 20 s of the task's end")
	}
	if ans.err != nil || ans.task.State != model.StateCanceled {
		t.Fatalf("the target's wait: %+v, %v; want the task canceled", ans.task, ans.err)
	}
	if lag := ans.at.Sub(ended); lag > time.Second {
		t.Errorf("the wait answered %s after the task ended; want it woken by the end", lag)
	}

	// A terminal task is answered at once.
	start = time.Now()
	if got, err := f.As(a).WaitTask(ctx, a, task.ID, 30*time.Second); err != nil || got.State != model.StateCanceled || time.Since(start) > 5*time.Second {
		t.Errorf("a wait on an ended task: %+v, %v after %s", got, err, time.Since(start))
	}
}

// The same idempotency key with the same request is the first task; with
// any field changed it is idempotency_conflict and stores nothing. Keys
// are per caller.
func idempotency(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	req := model.SubmitRequest{Target: b, IdempotencyKey: "k-1"}
	first := f.submit(t, a, req)
	again := f.submit(t, a, req)
	if again.ID != first.ID {
		t.Fatalf("a retry made task %s; want the first, %s", again.ID, first.ID)
	}
	changed := model.SubmitRequest{Target: b, IdempotencyKey: "k-1", Prompt: "another prompt",
		Cwd: f.Cwd, MissionID: "M-1", LeaseID: "S-1"}
	_, err := f.As(a).SubmitTask(ctx, a, changed)
	wantCode(t, "the key with another prompt", err, model.CodeIdempotencyConflict)
	if !strings.Contains(model.Public(err).Message, first.ID) {
		t.Errorf("the conflict does not name the first task: %q", model.Public(err).Message)
	}
	if other := f.submit(t, c, req); other.ID == first.ID {
		t.Error("another caller's key reached the first task")
	}
	if ts := must[[]model.Task](t, "list")(f.As(a).ListTasks(ctx, a, "", 0, "")); len(ts) != 1 {
		t.Errorf("%s has %d tasks, want 1", a, len(ts))
	}
}

// A task for an agent the relay does not know is unknown_agent, and
// nothing is stored.
func unknownTarget(t *testing.T, f Fixture) {
	ctx := context.Background()
	a := f.Agents[0]
	_, err := f.As(a).SubmitTask(ctx, a, model.SubmitRequest{Target: "no-such-agent", Prompt: "p", Cwd: f.Cwd,
		MissionID: "M-1", LeaseID: "S-1"})
	wantCode(t, "submit to an unknown agent", err, model.CodeUnknownAgent)
	if ts := must[[]model.Task](t, "list")(f.As(a).ListTasks(ctx, a, "", 0, "")); len(ts) != 0 {
		t.Errorf("stored %d tasks", len(ts))
	}
	agents := must[[]model.AgentInfo](t, "list agents")(f.As(a).ListAgents(ctx))
	known := map[string]bool{}
	for _, ag := range agents {
		known[ag.Name] = true
	}
	for _, n := range f.Agents {
		if !known[n] {
			t.Errorf("list_agents lacks %s: %+v", n, agents)
		}
	}
}

// senderShares: one sender that fills its share of a recipient's inbox
// quota is refused (recipient_inbox_full), another sender's message is
// still stored, and both the recipient's check_inbox and the operator
// name the sender at its share. The fixture's store has the default
// quota (1,000 messages, a share of 25%: 250).
func senderShares(t *testing.T, f Fixture) {
	ctx := context.Background()
	a, b, c := f.Agents[0], f.Agents[1], f.Agents[2]
	sent, refused := 0, error(nil)
	for range 400 {
		if _, refused = f.As(a).SendMessage(ctx, a, model.SendRequest{To: b, Body: "x"}); refused != nil {
			break
		}
		sent++
	}
	wantCode(t, "a sender past its share", refused, model.CodeRecipientInboxFull)
	if sent == 0 || sent >= 400 {
		t.Fatalf("%s sent %d messages to %s before its share was full", a, sent, b)
	}
	if _, err := f.As(c).SendMessage(ctx, c, model.SendRequest{To: b, Body: "y"}); err != nil {
		t.Fatalf("another sender, after %s filled its share: %v", a, err)
	}
	want := []model.InboxShare{{To: b, From: a, Messages: int64(sent), Bytes: int64(sent), ShareMessages: int64(sent), ShareBytes: 16 << 20}}
	in, err := f.As(b).CheckInbox(ctx, b, true, 1)
	if err != nil || !equalJSON(in.OverShare, want) {
		t.Errorf("check_inbox of %s: over_share %+v (%v), want %+v", b, in.OverShare, err, want)
	}
	op, err := f.Operator.InboxShares(ctx, "")
	if err != nil || !equalJSON(op, want) {
		t.Errorf("operator's shares: %+v (%v), want %+v", op, err, want)
	}
	if none, err := f.Operator.InboxShares(ctx, c); err != nil || len(none) != 0 {
		t.Errorf("operator's shares of %s: %+v (%v), want none", c, none, err)
	}
}

// equalJSON compares two values by their JSON encodings.
func equalJSON(x, y any) bool {
	bx, err1 := json.Marshal(x)
	by, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && string(bx) == string(by)
}
