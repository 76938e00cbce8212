// Package service is HAI-Relay's application service: the in-process
// model.Service, holding the access rules every transport shares — an
// agent sees only the tasks it submitted or targets and only its own
// messages (anything else is not_found, answered exactly as an id that
// does not exist), only a task's submitter may cancel it, and messages are
// validated (one known recipient, never oneself, bounded) before they are
// stored — on top of the engine (package machine) and the stores.
//
// model/servicetest holds the conformance suite of model.Service; this
// package's tests run it against the in-process service, and the socket
// API's tests run it against the socket client.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hai-relay/relay/machine"
	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// Options wires the in-process Service.
type Options struct {
	Engine   *machine.Engine
	Store    model.Store
	Messages model.MessageStore
	Registry model.Registry
	// Events reads task events for watching; nil means Store, when it
	// implements model.EventLog (persistence.DB does), else none and
	// WatchEvents refuses.
	Events model.EventLog
	// MessageBytes bounds a message body (default model.DefaultMessageBytes).
	MessageBytes int
	// Probe runs a live probe of an agent (the dispatcher's); nil refuses.
	Probe func(ctx context.Context, name string, timeout time.Duration) (model.AgentInfo, error)
	// Verify runs a hardening verification of an agent (the
	// dispatcher's); nil refuses.
	Verify func(ctx context.Context, name string, timeout time.Duration) (model.Verification, error)
	Clock  func() time.Time
	Logger *slog.Logger
}

// Service is the in-process model.Service: the rules every transport
// shares (identity-scoped visibility, message validation) on top of the
// engine and the stores.
type Service struct {
	o     Options
	now   func() time.Time
	conns connLog
}

var _ model.Service = (*Service)(nil)

// New returns the in-process service.
func New(o Options) *Service {
	if o.MessageBytes <= 0 {
		o.MessageBytes = model.DefaultMessageBytes
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if el, ok := o.Store.(model.EventLog); ok && o.Events == nil {
		o.Events = el
	}
	return &Service{o: o, now: func() time.Time { return o.Clock().UTC() }}
}

func notFound(what, id string) *model.Error {
	return spec.Errorf(model.CodeNotFound, "no %s %q", what, model.Echo(id))
}

// checkRecipient validates a message's recipient for sender caller.
func (s *Service) checkRecipient(caller, to string) error {
	switch {
	case to == "":
		return model.InvalidArgs("to is required")
	case strings.TrimSpace(to) != to:
		// A padded name is a malformed name, not a list of agents.
		return model.InvalidArgs("to %q has whitespace around the name; give exactly one agent name, such as %q",
			model.Echo(to), model.Echo(strings.TrimSpace(to)))
	case to == "*" || strings.EqualFold(to, "all") || strings.ContainsAny(to, ",; "):
		return spec.Errorf(model.CodeBroadcastNotSupported, "to %q names more than one agent", model.Echo(to))
	case to == caller:
		return spec.Errorf(model.CodeInvalidRecipient, "you are %s; a message to yourself is refused", caller)
	case to == model.RelayAgent:
		return spec.Errorf(model.CodeInvalidRecipient, "%q is the relay itself, not an agent", to)
	}
	if !s.o.Registry.Known(to) {
		return spec.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(to))
	}
	return nil
}

// SendMessage stores a passive message. It never starts any process.
func (s *Service) SendMessage(ctx context.Context, caller string, r model.SendRequest) (model.Message, error) {
	if err := s.checkRecipient(caller, r.To); err != nil {
		return model.Message{}, err
	}
	if r.Body == "" {
		return model.Message{}, model.InvalidArgs("body is required")
	}
	if len(r.Body) > s.o.MessageBytes {
		return model.Message{}, spec.Errorf(model.CodePayloadTooLarge, "body is %d bytes; the limit is %d (limits.message_bytes)", len(r.Body), s.o.MessageBytes)
	}
	if err := r.CheckBounds(); err != nil {
		return model.Message{}, err
	}
	if err := model.CheckArtifacts(r.Artifacts); err != nil {
		return model.Message{}, err
	}
	ctxID := r.ContextID
	if r.ReplyTo != "" {
		// A reply must answer a message the sender can see; it joins that
		// message's thread unless it names one.
		orig, err := s.visibleMessage(ctx, caller, r.ReplyTo)
		if err != nil {
			return model.Message{}, err
		}
		if ctxID == "" {
			ctxID = orig.ContextID
		}
	}
	if ctxID == "" {
		ctxID = model.NewID("C")
	}
	return s.o.Messages.CreateMessage(ctx, model.Message{
		ID: model.NewID(model.MessageIDPrefix), From: caller, To: r.To, Body: r.Body, ContextID: ctxID,
		ReplyTo: r.ReplyTo, Artifacts: r.Artifacts, ParentTaskID: r.ParentTaskID, State: model.MessageStored, CreatedAt: s.now(),
	})
}

// visibleMessage finds a message the caller sent or received; any other
// is not_found, answered exactly as a message that does not exist, so its
// existence is not disclosed.
func (s *Service) visibleMessage(ctx context.Context, caller, id string) (model.Message, error) {
	m, err := s.o.Messages.GetMessage(ctx, id)
	switch {
	case err != nil && model.ErrorCode(err) != model.CodeNotFound:
		return model.Message{}, err
	case err != nil, m.From != caller && m.To != caller:
		return model.Message{}, notFound("message", id)
	}
	return m, nil
}

// CheckInbox returns the caller's messages and the unread count left.
func (s *Service) CheckInbox(ctx context.Context, caller string, unreadOnly bool, limit int) (model.Inbox, error) {
	n, err := model.PageLimit(limit)
	if err != nil {
		return model.Inbox{}, err
	}
	ms, unread, err := s.o.Messages.Inbox(ctx, caller, unreadOnly, n)
	if err != nil {
		return model.Inbox{}, err
	}
	if ms == nil {
		ms = []model.Message{}
	}
	over, err := s.o.Messages.InboxShares(ctx, caller)
	if err != nil {
		return model.Inbox{}, err
	}
	return model.Inbox{Messages: ms, Unread: unread, OverShare: over}, nil
}

// AckMessages acknowledges messages sent to the caller.
func (s *Service) AckMessages(ctx context.Context, caller string, ids []string) (model.AckResult, error) {
	if len(ids) == 0 {
		return model.AckResult{}, model.InvalidArgs("message_ids must name at least one message")
	}
	if len(ids) > model.MaxPageSize {
		return model.AckResult{}, model.InvalidArgs("at most %d message_ids at a time", model.MaxPageSize)
	}
	n, err := s.o.Messages.Ack(ctx, caller, ids)
	return model.AckResult{Acked: n}, err
}

// SubmitTask submits a task as caller.
func (s *Service) SubmitTask(ctx context.Context, caller string, r model.SubmitRequest) (model.Task, error) {
	t, _, err := s.o.Engine.Submit(ctx, caller, r)
	return withHint(t, err)
}

// visibleTask returns a task the caller submitted or targets; any other is
// not_found, answered exactly as a task that does not exist (see task), so
// its existence is not disclosed.
func (s *Service) visibleTask(ctx context.Context, caller, id string) (model.Task, error) {
	t, err := s.task(ctx, id)
	if err != nil {
		return model.Task{}, err
	}
	if t.Caller != caller && t.Target != caller {
		return model.Task{}, notFound("task", id)
	}
	return t, nil
}

// task looks a task up by id. An id that is not of the shape the relay
// makes (see model.ValidTaskID) names no task: it is not_found, without a
// query, whatever its length. Every not_found is notFound's, the one
// answer visibleTask also gives for a task that is not the caller's.
func (s *Service) task(ctx context.Context, id string) (model.Task, error) {
	if !model.ValidTaskID(id) {
		return model.Task{}, notFound("task", id)
	}
	t, err := s.o.Store.GetTask(ctx, id)
	if model.ErrorCode(err) == model.CodeNotFound {
		return model.Task{}, notFound("task", id)
	}
	return spec.WithTaskHint(t), err
}

// withHints fills the hint of every task of a listing (spec.TaskHint):
// every task the service answers carries its hint, filled in one place.
func withHints(ts []model.Task, err error) ([]model.Task, error) {
	if ts == nil && err == nil {
		ts = []model.Task{}
	}
	for i := range ts {
		ts[i] = spec.WithTaskHint(ts[i])
	}
	return ts, err
}

// withHint is withHints for one task.
func withHint(t model.Task, err error) (model.Task, error) {
	return spec.WithTaskHint(t), err
}

// GetTask returns a task the caller can see.
func (s *Service) GetTask(ctx context.Context, caller, id string) (model.Task, error) {
	return s.visibleTask(ctx, caller, id)
}

// WaitTask implements model.AgentService: the task the caller can see,
// once it is terminal or wait has passed. The wait is a condition, not a
// poll: the engine closes the channel of Changed when any task event
// commits, and the task is read again then (and, as the watch's safety
// net, every watchRecheck). A task that is not the caller's is not_found
// before any wait. When ctx ends while it waits (the daemon stopping, or
// the caller gone), the task is read once more and answered as it is.
func (s *Service) WaitTask(ctx context.Context, caller, id string, wait time.Duration) (model.Task, error) {
	if wait < 0 || wait > model.MaxTaskWait {
		return model.Task{}, model.InvalidArgs("wait %s is out of range 0..%s", wait, model.MaxTaskWait)
	}
	var changed <-chan struct{}
	if s.o.Engine != nil {
		changed = s.o.Engine.Changed() // before the read: a later commit closes it
	}
	t, err := s.visibleTask(ctx, caller, id)
	if err != nil || wait == 0 || t.State.Terminal() {
		return t, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	recheck := time.NewTicker(watchRecheck)
	defer recheck.Stop()
	for {
		select {
		case <-changed:
		case <-recheck.C:
		case <-deadline.C:
			return s.visibleTask(ctx, caller, id)
		case <-ctx.Done():
			return s.visibleTask(context.WithoutCancel(ctx), caller, id)
		}
		if s.o.Engine != nil {
			changed = s.o.Engine.Changed()
		}
		if t, err = s.visibleTask(ctx, caller, id); err != nil || t.State.Terminal() {
			return t, err
		}
	}
}

// ListTasks lists the tasks the caller submitted or targets, newest first;
// before, a task id, pages on to the tasks older than it.
func (s *Service) ListTasks(ctx context.Context, caller string, state model.State, limit int, before string) ([]model.Task, error) {
	n, err := model.PageLimit(limit)
	if err != nil {
		return nil, err
	}
	if state != "" && !state.Valid() {
		return nil, model.InvalidArgs("state %q is not a task state", model.Echo(string(state)))
	}
	if before != "" {
		// The cursor must be a task the caller may see: another agent's
		// task id gets the same not_found as one that does not exist, so
		// paging is no oracle of other agents' tasks.
		if _, err := s.visibleTask(ctx, caller, before); err != nil {
			return nil, err
		}
	}
	return withHints(s.o.Store.ListTasks(ctx, model.TaskFilter{Visible: caller, State: state, Limit: n, Before: before}))
}

// CancelTask cancels a task the caller submitted.
func (s *Service) CancelTask(ctx context.Context, caller, id string) (model.Task, error) {
	t, err := s.visibleTask(ctx, caller, id)
	if err != nil {
		return model.Task{}, err
	}
	if t.Caller != caller {
		return t, model.Errorf(model.CodeTaskNotCancelable, "only the submitter (%s) or an operator may cancel task %s", t.Caller, id).
			WithHint("ask the submitter, or an operator: relay tasks cancel " + id)
	}
	return withHint(s.o.Engine.Cancel(ctx, id, model.CodeCanceledBySubmitter, caller))
}

// ListAgents lists the agents with their four health signals.
func (s *Service) ListAgents(ctx context.Context) ([]model.AgentInfo, error) {
	return s.o.Registry.Agents(ctx), nil
}

// Connected audits a transport connection: once per process (agent,
// kind, pid and uid) in this daemon's life, at most connRowsPerMinute
// rows per agent a minute, and not while the free-space reserve is
// reached. A connection past those is served and counted, not written:
// the agent's next row carries the count ("unrecorded"), so a caller that
// reconnects in a loop cannot grow the log, nor fill the disk with it.
func (s *Service) Connected(ctx context.Context, c model.Conn) error {
	unrecorded, ok := s.conns.admit(c, s.now())
	if !ok {
		return nil
	}
	d := map[string]string{"agent": c.Agent, "pid": fmt.Sprint(c.PID), "uid": fmt.Sprint(c.UID), "kind": c.Kind}
	if unrecorded > 0 {
		d["unrecorded"] = fmt.Sprint(unrecorded)
	}
	wrote, err := s.o.Store.AuditIfRoom(ctx, model.AuditEvent{At: s.now(), Kind: "facade.connected", Actor: c.Agent, Data: d})
	if err != nil || !wrote {
		s.conns.unwritten(c, unrecorded)
	}
	if model.ErrorCode(err) == model.CodeStorageFull {
		// A disk full to the last byte: the connection is counted for a
		// later row, and served, so that its reads and acknowledgements
		// (the way out) still work.
		return nil
	}
	return err
}

// MCPTaskEvent audits a step of the MCP task bound to a task the caller
// submitted (audit kind "mcp.task.EVENT"), once per task and event: the
// MCP task is its submitter's, who got the handle, so the target (which
// may read the task) is not_found like any other agent. A step that
// changes nothing writes nothing: a repeat, a delivery or a cancel of a
// task that never was an MCP task (no "created" row), a cancel of a task
// that already ended.
func (s *Service) MCPTaskEvent(ctx context.Context, caller, id string, event model.MCPTaskEvent) error {
	if !slices.Contains(model.AllMCPTaskEvents(), event) {
		return model.InvalidArgs("%q is not an MCP task event (one of %v)", model.Echo(string(event)), model.AllMCPTaskEvents())
	}
	t, err := s.visibleTask(ctx, caller, id)
	if err != nil {
		return err
	}
	if t.Caller != caller {
		return notFound("task", id)
	}
	after := ""
	switch event {
	case model.MCPTaskCancelRequested:
		if t.State.Terminal() {
			return nil
		}
		after = mcpTaskKind(model.MCPTaskCreated)
	case model.MCPTaskDelivered:
		after = mcpTaskKind(model.MCPTaskCreated)
	}
	_, err = s.o.Store.AuditOnce(ctx, model.AuditEvent{At: s.now(), Kind: mcpTaskKind(event), Actor: caller, TaskID: t.ID,
		Data: map[string]string{"task_id": t.ID, "mcp_task_id": t.ID, "state": string(t.State), "event": string(event)}}, after)
	return err
}

// mcpTaskKind is the audit kind of an MCP task event.
func mcpTaskKind(event model.MCPTaskEvent) string { return "mcp.task." + string(event) }

// Tasks lists tasks for an operator.
func (s *Service) Tasks(ctx context.Context, f model.TaskFilter) ([]model.Task, error) {
	n, err := model.PageLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	if f.State != "" && !f.State.Valid() {
		return nil, model.InvalidArgs("state %q is not a task state", model.Echo(string(f.State)))
	}
	if err := s.knownAgents(f.Agent, f.Caller, f.Target); err != nil {
		return nil, err
	}
	f.Limit = n
	return withHints(s.o.Store.ListTasks(ctx, f))
}

// ShowTask returns a task with its events and gate verdicts, read in one
// snapshot: the timeline always leads to the state shown.
func (s *Service) ShowTask(ctx context.Context, id string) (model.TaskDetail, error) {
	if !model.ValidTaskID(id) {
		return model.TaskDetail{}, notFound("task", id)
	}
	d, err := s.o.Store.TaskDetail(ctx, id)
	if model.ErrorCode(err) == model.CodeNotFound {
		return model.TaskDetail{}, notFound("task", id)
	}
	d.Task = spec.WithTaskHint(d.Task)
	return d, err
}

// CancelTaskAsOperator cancels any non-terminal task.
func (s *Service) CancelTaskAsOperator(ctx context.Context, id string) (model.Task, error) {
	if !model.ValidTaskID(id) {
		return model.Task{}, notFound("task", id)
	}
	return withHint(s.o.Engine.Cancel(ctx, id, model.CodeCanceledByOperator, "operator"))
}

// Messages lists messages for an operator.
func (s *Service) Messages(ctx context.Context, f model.MessageFilter) ([]model.Message, error) {
	n, err := model.PageLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	if err := s.knownAgents(f.To, f.From); err != nil {
		return nil, err
	}
	f.Limit = n
	ms, err := s.o.Messages.ListMessages(ctx, f)
	if ms == nil && err == nil {
		ms = []model.Message{}
	}
	return ms, err
}

// InboxShares lists, for an operator, the senders at their share of a
// recipient's inbox quota.
func (s *Service) InboxShares(ctx context.Context, to string) ([]model.InboxShare, error) {
	if err := s.knownAgents(to); err != nil {
		return nil, err
	}
	sh, err := s.o.Messages.InboxShares(ctx, to)
	if sh == nil && err == nil {
		sh = []model.InboxShare{}
	}
	return sh, err
}

// knownAgents refuses a listing filtered by an agent the relay does not
// know (unknown_agent), which would otherwise answer an empty list that
// looks like "nothing there". "" is no filter.
func (s *Service) knownAgents(names ...string) error {
	for _, name := range names {
		if name != "" && !s.o.Registry.Known(name) {
			return spec.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(name))
		}
	}
	return nil
}

// Agents lists the registry for an operator.
func (s *Service) Agents(ctx context.Context) ([]model.AgentInfo, error) {
	return s.o.Registry.Agents(ctx), nil
}

// ProbeAgent runs a live probe of an agent.
func (s *Service) ProbeAgent(ctx context.Context, name string, timeout time.Duration) (model.AgentInfo, error) {
	if !s.o.Registry.Known(name) {
		return model.AgentInfo{}, spec.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(name))
	}
	if s.o.Probe == nil {
		return model.AgentInfo{}, model.Errorf(model.CodeInternal, "this relay has no dispatcher to probe with")
	}
	info, err := s.o.Probe(ctx, name, timeout)
	if err != nil && info.Name != "" {
		// A failed probe is an answer, not a request error: the entry's
		// worked_live_reason names the stage that failed.
		return info, nil
	}
	return info, err
}

// VerifyAgent runs a hardening verification of an agent.
func (s *Service) VerifyAgent(ctx context.Context, name string, timeout time.Duration) (model.Verification, error) {
	if !s.o.Registry.Known(name) {
		return model.Verification{}, spec.Errorf(model.CodeUnknownAgent, "no agent named %q", model.Echo(name))
	}
	if s.o.Verify == nil {
		return model.Verification{}, model.Errorf(model.CodeInternal, "this relay has no dispatcher to verify with")
	}
	return s.o.Verify(ctx, name, timeout)
}

// VerifyAudit recomputes the audit chain.
func (s *Service) VerifyAudit(ctx context.Context) (model.AuditReport, error) {
	return s.o.Store.VerifyAudit(ctx)
}
