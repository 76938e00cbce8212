package model

import (
	"context"
	"time"
)

// SubmitRequest is a task as its caller submits it. The caller's identity
// is not part of it: transports pass it separately, fixed at launch.
type SubmitRequest struct {
	Target           string     `json:"target"`
	Prompt           string     `json:"prompt"`
	MissionID        string     `json:"mission_id,omitempty"`
	LeaseID          string     `json:"lease_id,omitempty"`
	Mode             Mode       `json:"mode,omitempty"`
	ContextID        string     `json:"context_id,omitempty"`
	ReferenceTaskIDs []string   `json:"reference_task_ids,omitempty"`
	Artifacts        []Artifact `json:"artifacts,omitempty"`
	IdempotencyKey   string     `json:"idempotency_key,omitempty"`
	Cwd              string     `json:"cwd,omitempty"`
	// ParentTaskID is the running task inside which the caller acts, as
	// the daemon found it from the caller's process (see delegation.go);
	// never taken from a client: the wire form has no such field, and the
	// socket client refuses a request that sets it.
	ParentTaskID string `json:"-"`
}

// SendRequest is a passive message as its sender sends it.
type SendRequest struct {
	To        string     `json:"to"`
	Body      string     `json:"body"`
	ContextID string     `json:"context_id,omitempty"`
	ReplyTo   string     `json:"reply_to,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// ParentTaskID is as SubmitRequest's: set by the daemon, never by a
	// client.
	ParentTaskID string `json:"-"`
}

// Inbox is check_inbox's answer: the messages returned and the exact number
// of unread messages left after this call.
type Inbox struct {
	Messages []Message `json:"messages"`
	Unread   int       `json:"unread"`
	// OverShare lists the senders whose unacknowledged messages to the
	// caller reach their share of its inbox quota: their next message is
	// refused until the caller acknowledges some of theirs.
	OverShare []InboxShare `json:"over_share"`
}

// InboxShare is one sender's use of one recipient's inbox quota, and the
// sender's share of it (0: no share in that unit).
type InboxShare struct {
	To            string `json:"to"`
	From          string `json:"from"`
	Messages      int64  `json:"messages"`
	Bytes         int64  `json:"bytes"`
	ShareMessages int64  `json:"share_messages"`
	ShareBytes    int64  `json:"share_bytes"`
}

// AckResult is ack_messages' answer.
type AckResult struct {
	Acked int `json:"acked"`
}

// TaskDetail is a task with its timeline: every transition and every gate
// verdict.
type TaskDetail struct {
	Task
	Events   []Event   `json:"events"`
	Verdicts []Verdict `json:"verdicts"`
}

// Conn describes a transport connection for the audit log.
type Conn struct {
	Agent string `json:"agent"`
	PID   int    `json:"pid"`
	UID   int    `json:"uid"`
	Kind  string `json:"kind"` // "mcp" for a facade, "cli" for the operator CLI
}

// AgentService is what one agent may do, as the identity it was launched
// with. A caller sees only tasks it submitted or targets, and only its own
// messages; anything else is CodeNotFound.
type AgentService interface {
	SendMessage(ctx context.Context, caller string, r SendRequest) (Message, error)
	CheckInbox(ctx context.Context, caller string, unreadOnly bool, limit int) (Inbox, error)
	AckMessages(ctx context.Context, caller string, ids []string) (AckResult, error)
	SubmitTask(ctx context.Context, caller string, r SubmitRequest) (Task, error)
	GetTask(ctx context.Context, caller, id string) (Task, error)
	// WaitTask is GetTask that, for a task not yet in a terminal state,
	// waits up to wait (at most MaxTaskWait) for it to reach one, and
	// answers as soon as it does: the task as it is then, terminal or not.
	// The wait is woken by the task's commits, not by polling. Whatever
	// is not the caller's task is not_found at once; wait 0 is GetTask.
	// When ctx ends while it waits (the daemon stopping), it answers the
	// task as it is, at once.
	WaitTask(ctx context.Context, caller, id string, wait time.Duration) (Task, error)
	ListTasks(ctx context.Context, caller string, state State, limit int, before string) ([]Task, error)
	CancelTask(ctx context.Context, caller, id string) (Task, error)
	ListAgents(ctx context.Context) ([]AgentInfo, error)
	// Connected audits a transport connection (identity and pid).
	Connected(ctx context.Context, c Conn) error
	// MCPTaskEvent audits a step in the life of the MCP task bound to the
	// caller's task id (the MCP tasks extension, which the facade serves):
	// one of AllMCPTaskEvents, at most once per task and event. A task the
	// caller did not submit is not_found (the MCP task is the submitter's).
	// A step that changes nothing (a repeat; a delivery or cancel of a
	// task that was never an MCP task; a cancel of an ended task) writes
	// nothing and answers nil.
	MCPTaskEvent(ctx context.Context, caller, id string, event MCPTaskEvent) error
}

// MCPTaskEvent is a step in the life of an MCP task bound to a relay task.
type MCPTaskEvent string

// The MCP task events.
const (
	// MCPTaskCreated: submit_task was answered with a task handle.
	MCPTaskCreated MCPTaskEvent = "created"
	// MCPTaskDelivered: tasks/get answered with the task's end (its
	// result), which the client then hands to its model.
	MCPTaskDelivered MCPTaskEvent = "delivered"
	// MCPTaskCancelRequested: the client sent tasks/cancel.
	MCPTaskCancelRequested MCPTaskEvent = "cancel_requested"
)

// AllMCPTaskEvents lists every MCPTaskEvent.
func AllMCPTaskEvents() []MCPTaskEvent {
	return []MCPTaskEvent{MCPTaskCreated, MCPTaskDelivered, MCPTaskCancelRequested}
}

// OperatorService is what the operator CLI may do.
type OperatorService interface {
	Tasks(ctx context.Context, f TaskFilter) ([]Task, error)
	ShowTask(ctx context.Context, id string) (TaskDetail, error)
	CancelTaskAsOperator(ctx context.Context, id string) (Task, error)
	Messages(ctx context.Context, f MessageFilter) ([]Message, error)
	// InboxShares lists the senders whose unacknowledged messages to a
	// recipient (to, or every recipient when to is "") reach their share
	// of its inbox quota.
	InboxShares(ctx context.Context, to string) ([]InboxShare, error)
	Agents(ctx context.Context) ([]AgentInfo, error)
	ProbeAgent(ctx context.Context, name string, timeout time.Duration) (AgentInfo, error)
	// VerifyAgent runs a hardening verification of an agent (bounded by
	// timeout, 60 s when 0) and returns its report; a verification that
	// ran is an answer, whatever its status.
	VerifyAgent(ctx context.Context, name string, timeout time.Duration) (Verification, error)
	VerifyAudit(ctx context.Context) (AuditReport, error)
	// WatchEvents returns task events after f.After (with f.TaskID and
	// AfterNow: that task's history), waiting up to f.Wait for one when
	// there is none yet: the long poll of `relay tasks watch`.
	WatchEvents(ctx context.Context, f EventFilter) (EventBatch, error)
}

// Service is the engine port the transports use: the in-process service
// (machine/service) and the socket client (facade) both satisfy it and pass
// the same conformance suite (model/servicetest).
type Service interface {
	AgentService
	OperatorService
}
