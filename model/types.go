package model

import (
	"context"
	"fmt"
	"time"
)

// Artifact is a reference to content, never the content itself.
type Artifact struct {
	URI       string `json:"uri"`
	MediaType string `json:"media_type,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ToolCall is what the relay keeps of an agent's tool call: its title and
// last status. Arguments and output are never kept.
type ToolCall struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Kind   string `json:"kind,omitempty"`
	Status string `json:"status,omitempty"`
	// Denied: the relay denied the call's permission request.
	Denied bool `json:"denied,omitempty"`
}

// ToolCallFailed is the status an agent gives a tool call that did not
// succeed (ACP's "failed").
const ToolCallFailed = "failed"

// ToolFailures says which of a run's tool calls did not run: denied by
// the relay, or failed (the agent's sandbox could not start, the command
// erred). A delegator reads it to tell "could not look" from an answer.
type ToolFailures struct {
	Denied []ToolCall `json:"denied"`
	Failed []ToolCall `json:"failed"`
	// All reports that every tool call the agent made was denied or
	// failed: its answer rests on nothing its tools returned.
	All bool `json:"all"`
	// Summary says it in one line.
	Summary string `json:"summary"`
}

// ToolFailuresOf is the tool failures among calls, or nil when every call
// ran.
func ToolFailuresOf(calls []ToolCall) *ToolFailures {
	f := &ToolFailures{Denied: []ToolCall{}, Failed: []ToolCall{}}
	for _, c := range calls {
		switch {
		case c.Denied:
			f.Denied = append(f.Denied, c)
		case c.Status == ToolCallFailed:
			f.Failed = append(f.Failed, c)
		}
	}
	n := len(f.Denied) + len(f.Failed)
	if n == 0 {
		return nil
	}
	f.All = n == len(calls)
	f.Summary = fmt.Sprintf("%d of %d tool calls did not run (%d denied by the relay, %d failed)", n, len(calls), len(f.Denied), len(f.Failed))
	if f.All {
		f.Summary = fmt.Sprintf("none of the agent's %d tool calls ran (%d denied by the relay, %d failed): its answer rests on nothing its tools returned",
			len(calls), len(f.Denied), len(f.Failed))
	}
	return f
}

// Task is a delegated unit of work and its lifecycle.
// MaxTaskHintBytes bounds a task's hint as JSON encodes it (quotes and
// escapes included): a listing reserves it for each task with a code,
// since the hint is filled in after the page is cut (spec.TaskHint; a spec
// test holds every hint to it, with the longest agent name).
const MaxTaskHintBytes = 640

type Task struct {
	ID      string `json:"task_id"`
	State   State  `json:"state"`
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Hint says what to do about Code ("" without a code): the code's
	// catalogue hint with the task's agent, id and the cause its message
	// names filled in (spec.TaskHint). Derived when the task is read,
	// never stored.
	Hint             string     `json:"hint"`
	Caller           string     `json:"caller"`
	Target           string     `json:"target"`
	Mode             Mode       `json:"mode"`
	MissionID        string     `json:"mission_id"`
	LeaseID          string     `json:"lease_id"`
	ContextID        string     `json:"context_id"`
	Prompt           string     `json:"prompt"`
	Cwd              string     `json:"cwd"`
	Artifacts        []Artifact `json:"artifacts"`
	ReferenceTaskIDs []string   `json:"reference_task_ids"`
	IdempotencyKey   string     `json:"idempotency_key,omitempty"`
	// ParentTaskID is the task inside which this one was submitted (its
	// caller's facade descends from that task's agent), "" for a task
	// submitted outside any task (top-level).
	ParentTaskID string `json:"parent_task_id"`
	// Chain is the delegation chain the task was submitted through: the
	// hops from the top-level task down to its parent, oldest first; empty
	// for a top-level task. Set when the task is stored, never changed.
	Chain []Hop `json:"chain"`
	// RequestSHA256 is the hex SHA-256 of the canonical submit request that
	// created the task (the engine computes it: every field of the request,
	// as asked); "" for a task stored before the relay recorded it. It tells
	// a retry with the same idempotency_key from a conflicting reuse of the
	// key, and is never shown.
	RequestSHA256 string     `json:"-"`
	Result        string     `json:"result"`
	StopReason    string     `json:"stop_reason"`
	SessionMode   string     `json:"session_mode,omitempty"`
	ToolCalls     []ToolCall `json:"tool_calls"`
	// ToolFailures lists the tool calls that did not run (nil when all
	// did): derived from ToolCalls, never stored apart.
	ToolFailures      *ToolFailures `json:"tool_failures,omitempty"`
	DeniedPermissions int           `json:"denied_permissions"`
	CreatedAt         time.Time     `json:"created_at"`
	UpdatedAt         time.Time     `json:"updated_at"`
}

// Event is one persisted transition of a task.
type Event struct {
	TaskID  string    `json:"task_id"`
	From    State     `json:"from"`
	To      State     `json:"to"`
	Trigger Trigger   `json:"trigger"`
	Code    Code      `json:"code"`
	Message string    `json:"message,omitempty"`
	Actor   string    `json:"actor,omitempty"`
	At      time.Time `json:"at"`
}

// Verdict is one gate's answer during one evaluation of a task.
type Verdict struct {
	Gate    Gate              `json:"gate"`
	Passed  bool              `json:"passed"`
	Code    Code              `json:"code"`
	Message string            `json:"message,omitempty"`
	Detail  map[string]string `json:"detail,omitempty"`
	At      time.Time         `json:"at"`
}

// TaskResult is what a run leaves on its task when it ends.
type TaskResult struct {
	Text        string     `json:"result"`
	StopReason  string     `json:"stop_reason"`
	SessionMode string     `json:"session_mode,omitempty"`
	ToolCalls   []ToolCall `json:"tool_calls,omitempty"`
}

// Transition is a compare-and-set state write with everything that must
// commit with it: the event row, the verdicts of the evaluation that led to
// it, and an audit row.
type Transition struct {
	TaskID   string
	From     State
	To       State
	Trigger  Trigger
	Code     Code
	Message  string
	Actor    string
	Verdicts []Verdict
	// Result, when set, is stored on the task with the transition.
	Result *TaskResult
	At     time.Time
	// NoticeID, when set on a transition to a terminal state, is the id of
	// the passive message from the relay to the task's submitter (body:
	// EndNotice of the task as it ends), stored and audited in the
	// transition's own transaction: the task never ends without it.
	NoticeID string
}

// Message is a passive message between two agents.
type Message struct {
	ID        string       `json:"message_id"`
	From      string       `json:"from"`
	To        string       `json:"to"`
	Body      string       `json:"body"`
	ContextID string       `json:"context_id"`
	ReplyTo   string       `json:"reply_to,omitempty"`
	Artifacts []Artifact   `json:"artifacts"`
	State     MessageState `json:"state"`
	CreatedAt time.Time    `json:"created_at"`
	ReadAt    *time.Time   `json:"read_at,omitempty"`
	AckedAt   *time.Time   `json:"acked_at,omitempty"`
	// ParentTaskID is the task inside which the message was sent (its
	// sender's facade descends from that task's agent); "" outside any.
	ParentTaskID string `json:"parent_task_id,omitempty"`
	// Notice is set on the relay's end-of-task notices (from "relay"):
	// the notice's fields, read back from its body (see EndNotice).
	Notice *Notice `json:"notice,omitempty"`
}

// AuditEvent is one row of the append-only, hash-chained audit log.
type AuditEvent struct {
	Seq       int64             `json:"seq"`
	At        time.Time         `json:"at"`
	Kind      string            `json:"kind"`
	Actor     string            `json:"actor"`
	TaskID    string            `json:"task_id,omitempty"`
	MessageID string            `json:"message_id,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
	PrevHash  string            `json:"prev_hash"`
	Hash      string            `json:"hash"`
}

// AuditReport is the result of recomputing the audit chain.
type AuditReport struct {
	Rows int64 `json:"rows"`
	OK   bool  `json:"ok"`
	// BadSeq is the first row that does not verify (0 when OK).
	BadSeq int64  `json:"bad_seq,omitempty"`
	Reason string `json:"reason,omitempty"`
	Head   string `json:"head"`
	// Checkpoint is the last row the audit retention cut (0: none was):
	// the log starts after it, its first row linked to that row's hash.
	Checkpoint int64 `json:"checkpoint,omitempty"`
}

// Listings come in pages (TaskFilter, MessageFilter, an inbox, an agent's
// tasks): DefaultPageSize items when the request names no limit, at most
// MaxPageSize; ack_messages takes at most MaxPageSize ids at once.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// PageLimit checks a listing's limit as a request gives it: 0 is
// DefaultPageSize, and anything outside 1..MaxPageSize is invalid_args.
func PageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 0 || n > MaxPageSize:
		return 0, InvalidArgs("limit %d is out of range 1..%d", n, MaxPageSize)
	}
	return n, nil
}

// TaskFilter selects tasks for listing. Zero values select everything.
type TaskFilter struct {
	State  State
	Agent  string // caller or target
	Caller string
	Target string
	// Visible, when set, restricts to tasks this agent submitted or targets.
	Visible string
	Limit   int
	// Before is a cursor: only tasks older than this task id's row.
	Before string
}

// MessageFilter selects messages for listing.
type MessageFilter struct {
	To         string
	From       string
	UnreadOnly bool
	Limit      int
	Before     string
}

// AgentInfo is an agent's registry entry with its health signals.
type AgentInfo struct {
	Name             string     `json:"name"`
	Command          []string   `json:"command"`
	Enabled          bool       `json:"enabled"`
	EnabledReason    string     `json:"enabled_reason"`
	Configured       bool       `json:"configured"`
	ConfiguredAt     *time.Time `json:"configured_at"`
	ConfiguredReason string     `json:"configured_reason"`
	WorkedLive       bool       `json:"worked_live"`
	WorkedLiveAt     *time.Time `json:"worked_live_at"`
	WorkedLiveReason string     `json:"worked_live_reason"`
	// Adapter is the adapter program the agent's command resolves to, as
	// the relay finds it on disk now.
	Adapter AgentAdapter `json:"adapter"`
	// Profile is the hardening profile the dispatcher applies to the
	// agent's sessions with the adapter installed now, or an empty name
	// with the reason there is none.
	Profile AgentProfile `json:"profile"`
	// Hardening is the agent's fourth health signal, never collapsed into
	// the others: whether its last hardening verification (relay agents
	// verify NAME) stopped every attempt to write, edit or run.
	Hardening AgentHardening `json:"hardening"`
	// Sandbox says what holds read_only for this agent's tasks, whatever
	// the agent does (docs/sandbox.md).
	Sandbox AgentSandbox `json:"sandbox"`
}

// AgentSandbox is the sandbox an agent's tasks run in, as it can be made
// here: its layers when it can ("bubblewrap + Landlock ABI 7", or
// bubblewrap alone for an agent that runs a sandbox of its own), else
// the problem; then every task of the agent fails
// agent_sandbox_unavailable.
type AgentSandbox struct {
	Layers  string `json:"layers,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// AgentAdapter is the adapter program an agent's command resolves to.
type AgentAdapter struct {
	// Path is the file the command resolves to, symbolic links followed
	// ("" when it is not found).
	Path string `json:"path"`
	// Package and Version are those of the npm package.json above Path
	// ("" when there is none).
	Package string `json:"package"`
	Version string `json:"version"`
	// Fingerprint is the hex SHA-256 of the file and its package.json,
	// their paths included: what a verification records, so that it
	// holds only for the very files that were verified.
	Fingerprint string `json:"fingerprint"`
	// Superseded, for a package its maintainers froze or archived, names
	// the package that replaces it.
	Superseded string `json:"superseded,omitempty"`
	// RuntimeProblem says why the runtime the adapter would run with does
	// not meet its package.json's engines (a Node too old), "" when it
	// does or cannot be told.
	RuntimeProblem string `json:"runtime_problem,omitempty"`
}

// AgentProfile describes the hardening profile that applies to an agent's
// installed adapter: what the relay sends at session/new and which session
// modes it accepts, per task mode, verified against the real adapter on
// the versions it names. A profile covers one adapter generation (a
// package and a version range).
type AgentProfile struct {
	// Name is the profile's name ("" when none applies).
	Name string `json:"name"`
	// Covers names the adapter generation the profile is for: package and
	// version range.
	Covers string `json:"covers,omitempty"`
	// VerifiedOn lists the adapter versions the profile was verified on
	// (the versions the project's CI runs it against).
	VerifiedOn []string `json:"verified_on,omitempty"`
	// VerifiedInCI reports whether the adapter version installed now is
	// one of VerifiedOn.
	VerifiedInCI bool `json:"verified_in_ci"`
	// Generations lists every adapter generation the agent's profiles
	// cover, whether or not one applies to the installed adapter.
	Generations []string `json:"generations,omitempty"`
	// Modes says, per task mode, what the profile does; a task mode it
	// does not list is refused (agent_unsafe_mode).
	Modes map[Mode]string `json:"modes,omitempty"`
	// Summary is one line for tables and gate verdicts.
	Summary string `json:"summary"`
}

// Store is the persistence port. Every state write is compare-and-set and
// commits with its event and audit rows.
type Store interface {
	// CreateTask persists a new submitted task with its audit row. When the
	// caller already submitted a task with the same idempotency key, it
	// returns that task (its RequestSHA256 included) and existed=true,
	// writing nothing.
	CreateTask(ctx context.Context, t Task) (stored Task, existed bool, err error)
	// GetTask returns a task, or an *Error with CodeNotFound.
	GetTask(ctx context.Context, id string) (Task, error)
	// Transition applies a compare-and-set state write. When the task is
	// not in tr.From it returns an *Error with CodeStaleState wrapping
	// ErrStaleState and writes nothing.
	Transition(ctx context.Context, tr Transition) (Task, error)
	// ListTasks returns tasks newest first.
	ListTasks(ctx context.Context, f TaskFilter) ([]Task, error)
	// TaskEvents returns a task's transitions, oldest first.
	TaskEvents(ctx context.Context, id string) ([]Event, error)
	// TaskVerdicts returns every gate verdict recorded for a task, oldest first.
	TaskVerdicts(ctx context.Context, id string) ([]Verdict, error)
	// TaskDetail returns a task with its events and verdicts read in one
	// snapshot, so that its timeline always agrees with its state (an
	// *Error with CodeNotFound when there is no such task).
	TaskDetail(ctx context.Context, id string) (TaskDetail, error)
	// RecordDenial counts a denied permission request on a working task and
	// audits it, in one transaction.
	RecordDenial(ctx context.Context, taskID string, data map[string]string) error
	// Audit appends one audit row.
	Audit(ctx context.Context, ev AuditEvent) error
	// AuditIfRoom appends ev unless the free-space reserve is already
	// reached (then it writes nothing and reports false): for rows a
	// caller can cause that record no stored object, which must not eat
	// the room kept for acknowledgements, reads and pruning.
	AuditIfRoom(ctx context.Context, ev AuditEvent) (bool, error)
	// AuditOnce appends ev, an effect that happens at most once per task,
	// unless a row of its kind was already appended for ev.TaskID this way,
	// or when after is not "" and no row of kind after was; it reports
	// whether it appended one. A repeated call writes nothing.
	AuditOnce(ctx context.Context, ev AuditEvent, after string) (bool, error)
	// VerifyAudit recomputes the hash chain.
	VerifyAudit(ctx context.Context) (AuditReport, error)
}

// MessageStore is the persistence port for passive messages.
type MessageStore interface {
	// CreateMessage persists a stored message with its audit row.
	CreateMessage(ctx context.Context, m Message) (Message, error)
	// Inbox returns the recipient's messages oldest first, marks the
	// returned stored ones read (audited), and returns the unread count
	// left after this call.
	Inbox(ctx context.Context, to string, unreadOnly bool, limit int) ([]Message, int, error)
	// Ack marks the recipient's messages acked (audited) and returns how
	// many changed. Ids that are not the recipient's are CodeNotFound.
	Ack(ctx context.Context, to string, ids []string) (int, error)
	// GetMessage returns one message, or an *Error with CodeNotFound.
	GetMessage(ctx context.Context, id string) (Message, error)
	// ListMessages returns messages newest first for operators.
	ListMessages(ctx context.Context, f MessageFilter) ([]Message, error)
	// InboxShares returns the senders whose unacknowledged messages to a
	// recipient (to, or any when to is "") reach their share of its quota.
	InboxShares(ctx context.Context, to string) ([]InboxShare, error)
}

// DispatchPolicy is what a dispatcher promises about the ACP client it runs;
// the acpDenial gate checks it before every authorization.
type DispatchPolicy struct {
	DeniesAllPermissions bool `json:"denies_all_permissions"`
	AdvertisesFS         bool `json:"advertises_fs"`
	AdvertisesTerminal   bool `json:"advertises_terminal"`
}

// Denial is one permission request the dispatcher refused.
type Denial struct {
	ToolCallTitle string
	ToolCallKind  string
	OptionID      string // the reject_once option selected, or "" for cancelled
	Outcome       string // "selected" or "cancelled"
}

// Outcome is how a dispatched run ended.
type Outcome struct {
	State   State // StateCompleted, StateFailed or StateCanceled
	Code    Code
	Message string
	Result  TaskResult
}

// RunReporter receives a dispatched run's progress; the engine implements it.
type RunReporter interface {
	// Started reports the ACP session running (authorized → working);
	// note says how the session was set up (its mode, the hardening
	// profile and the adapter version) and is kept on the event.
	Started(ctx context.Context, taskID string, note string) error
	// Denied reports one refused permission request.
	Denied(ctx context.Context, taskID string, d Denial) error
	// Finished reports the end of the run.
	Finished(ctx context.Context, taskID string, out Outcome) error
}

// Dispatcher runs authorized tasks. Dispatch must return quickly: it starts
// the run and reports through r; an error means nothing was started.
type Dispatcher interface {
	Policy() DispatchPolicy
	Dispatch(ctx context.Context, t Task, r RunReporter) error
	// Cancel stops the task's run if there is one (session/cancel, a short
	// grace, then kill). It does not report.
	Cancel(taskID string)
}

// Registry resolves agent names to their entries and health.
type Registry interface {
	// Known reports whether an agent of that name exists. It is cheap: no
	// health signal is computed (message recipients are checked with it).
	Known(name string) bool
	// Agent returns the named agent's entry; ok is false for unknown names.
	Agent(ctx context.Context, name string) (AgentInfo, bool)
	// Agents lists every known agent.
	Agents(ctx context.Context) []AgentInfo
}

// AuthorityRequest is what the relay asks the authority adapter.
type AuthorityRequest struct {
	RequestID   string
	TaskID      string
	MissionID   string
	LeaseID     string
	Caller      string
	Target      string
	Mode        Mode
	RequestedAt time.Time
	// ParentTaskID and Chain are the task's (Task.Chain): "" and none for
	// a top-level task.
	ParentTaskID string
	Chain        []Hop
}

// AuthorityAnswer is the authority adapter's decision and what was observed
// while asking.
type AuthorityAnswer struct {
	Allow     bool
	Assurance Assurance
	// DenyCode is the adapter's own code on deny (e.g. lease_expired).
	DenyCode string
	Message  string
	// Stderr is a bounded excerpt of the adapter's stderr.
	Stderr   string
	ExitCode int
	Elapsed  time.Duration
}

// Authority consults the external authority adapter. A failure to get a
// valid answer is an *Error with one of the authority_* codes.
type Authority interface {
	Consult(ctx context.Context, req AuthorityRequest) (AuthorityAnswer, error)
}
