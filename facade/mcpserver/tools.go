package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// mcpTool is one tool of the facade: its advertised definition and the
// service call behind it.
type mcpTool struct {
	name   string
	title  string
	desc   string
	params []mcpParam
	// The annotation hints, all four always advertised (mcp-go's NewTool
	// otherwise defaults destructiveHint and openWorldHint to true). Every
	// tool is closed-world: the relay is local.
	readOnly, destructive, idempotent bool
	// agent is the facade's identity, for hints.
	agent string
	call  func(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error)
}

// tool returns the mcp-go definition of t.
func (t mcpTool) tool() mcp.Tool {
	return mcp.NewTool(t.name,
		mcp.WithToolTitle(t.title),
		mcp.WithDescription(t.desc),
		func(tool *mcp.Tool) {
			order := make([]string, 0, len(t.params))
			for _, p := range t.params {
				tool.InputSchema.Properties[p.name] = p.mcpSchema()
				if p.required {
					tool.InputSchema.Required = append(tool.InputSchema.Required, p.name)
				}
				order = append(order, p.name)
			}
			tool.InputSchema.PropertyOrder = order
		},
		mcp.WithSchemaAdditionalProperties(false),
		mcp.WithTitleAnnotation(t.title),
		mcp.WithReadOnlyHintAnnotation(t.readOnly),
		mcp.WithDestructiveHintAnnotation(t.destructive),
		mcp.WithIdempotentHintAnnotation(t.idempotent),
		mcp.WithOpenWorldHintAnnotation(false),
	)
}

// argsHint is the hint of an invalid_args error: the arguments t takes.
func (t mcpTool) argsHint() string {
	if len(t.params) == 0 {
		return fmt.Sprintf("%s takes no arguments", t.name)
	}
	names := make([]string, 0, len(t.params))
	for _, p := range t.params {
		n := p.name
		if p.required {
			n += " (required)"
		}
		names = append(names, n)
	}
	return fmt.Sprintf("%s takes only: %s", t.name, strings.Join(names, ", "))
}

// taskWaiterJSON is what the socket client adds to PassThrough for get_task
// with a wait: WaitTask's answer as the JSON it came as (see PassThrough).
type taskWaiterJSON interface {
	WaitTaskJSON(ctx context.Context, caller, id string, wait time.Duration) (json.RawMessage, error)
}

// statesText explains the task states to a model.
const statesText = "Task states: submitted (persisted, gates not yet passed), authorized (every gate passed, dispatch starting), " +
	"working (the target agent's session is running) are not final; completed (the agent finished; result holds its reply), " +
	"failed (dispatch or the run failed or timed out), canceled, rejected (a gate said no) and blocked (fail-closed: the authority or " +
	"the target's adapter could not be consulted or used) are final, with code and message saying why."

// mcpInstructions is the server's instructions to the client's model.
func mcpInstructions(o Options) string {
	return fmt.Sprintf("HAI-Relay: a local relay between coding agents. You are %q on this relay; that identity is fixed "+
		"for this connection and no tool takes a sender. Use send_message / check_inbox / ack_messages for passive "+
		"messages (they never start the recipient) and submit_task / get_task / list_tasks / cancel_task to delegate work "+
		"to another agent under a mission and lease. Errors come back as {code, message, hint}.", o.Agent)
}

// artifactsParam is the artifacts argument shared by two tools.
func artifactsParam() mcpParam {
	return mcpParam{name: "artifacts", kind: mcpArtifacts, maxItems: model.MaxArtifacts,
		desc: fmt.Sprintf("References to content (at most %d), each {uri (required), media_type, name}; the relay passes the references on and never uploads the content.", model.MaxArtifacts)}
}

// mcpTools returns the eight tools of the facade, with the names and
// arguments agents rely on (the README lists the names).
func mcpTools(o Options) []mcpTool {
	me := o.Agent
	tools := []mcpTool{
		sendMessageTool(me), checkInboxTool(me), ackMessagesTool(), submitTaskTool(me, o.Cwd),
		getTaskTool(), cancelTaskTool(), listTasksTool(), listAgentsTool(),
	}
	for i := range tools {
		tools[i].agent = me
	}
	return tools
}

// sendMessageTool is send_message.
func sendMessageTool(me string) mcpTool {
	return mcpTool{
		name:  "send_message",
		title: "Send a message",
		desc: fmt.Sprintf("Leave a passive message for exactly one other agent on this local relay. It is stored and "+
			"delivered when the recipient next calls check_inbox: sending NEVER starts, wakes or runs the recipient "+
			"(to have another agent do work, use submit_task). You send as %q, fixed at launch; there is no sender "+
			"argument. `to` is one known agent other than yourself (see list_agents); there is no broadcast. Reuse a "+
			"context_id to keep a thread together, and set reply_to to the message_id you are answering. Returns the "+
			"stored message {message_id, from, to, body, context_id, state: \"stored\", created_at}. Each recipient "+
			"holds a bounded number (and bytes) of messages it has not acknowledged: past that the message is refused "+
			"with recipient_inbox_full and nothing is stored; sending again does not help until the recipient "+
			"acknowledges its messages.", me),
		params: []mcpParam{
			{name: "to", kind: mcpString, required: true, desc: "The recipient: one known agent name other than yourself, e.g. \"codex\"."},
			{name: "body", kind: mcpString, required: true, desc: "The message text."},
			{name: "context_id", kind: mcpString, desc: "Thread identifier; reuse the context_id of earlier messages or tasks to keep a conversation together."},
			{name: "reply_to", kind: mcpString, desc: "The message_id of the message this one answers."},
			artifactsParam(),
		},
		call: callSendMessage,
	}
}

// callSendMessage is send_message's call of the service.
func callSendMessage(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	r := model.SendRequest{
		To:        a.str("to"),
		Body:      a.str("body"),
		ContextID: a.str("context_id"),
		ReplyTo:   a.str("reply_to"),
		Artifacts: a.artifacts("artifacts"),
	}
	if c := f.passThrough(); c != nil {
		return passRaw(c.SendMessageJSON(ctx, f.o.Agent, r))
	}
	return f.svc.SendMessage(ctx, f.o.Agent, r)
}

// checkInboxTool is check_inbox. Not read-only: every stored message it
// returns becomes read (audited, and the unread count drops), so a
// repeated call returns different messages. Not destructive: nothing is
// lost, unread_only=false shows read messages again.
func checkInboxTool(me string) mcpTool {
	return mcpTool{
		name:  "check_inbox",
		title: "Check inbox",
		desc: fmt.Sprintf("Read the messages addressed to you (%q), oldest first. This is not a pure read: every "+
			"unread message it returns is marked read (audited) and is not returned again with unread_only=true. "+
			"Returns {messages: [{message_id, from, to, body, context_id, reply_to, state, created_at, notice}], unread: N}, "+
			"where N is the exact number of unread messages still waiting after this call (N > 0: call again). "+
			"A page stops early, before limit, when the next message would take the answer past 2 MiB of JSON; "+
			"only the messages returned are marked read. "+
			"Messages from \"relay\" report that a task you submitted ended, in notice {task_id, state, code, message, result}: "+
			"result is the target agent's reply as it gave it, message the relay's account; the body's first line is the relay's, "+
			"and every line of the agent's text in it is quoted (begins with \"> \"), so a line of the body that does not is never "+
			"the agent's. Acknowledge handled messages with ack_messages: an acknowledged message is done and no longer returned.", me),
		params: []mcpParam{
			{name: "unread_only", kind: mcpBool, def: true, desc: "Return only unread messages (default true); false also returns messages already read but not yet acknowledged. Acknowledged messages are done and never returned again."},
			{name: "limit", kind: mcpLimit, def: model.DefaultPageSize, desc: fmt.Sprintf("Maximum number of messages to return, 1 to %d (default %d).", mcpMaxLimit, model.DefaultPageSize)},
		},
		call: callCheckInbox,
	}
}

// callCheckInbox is check_inbox's call of the service.
func callCheckInbox(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	if c := f.passThrough(); c != nil {
		return passRaw(c.CheckInboxJSON(ctx, f.o.Agent, a.boolOr("unread_only", true), a.intOr("limit", model.DefaultPageSize)))
	}
	in, err := f.svc.CheckInbox(ctx, f.o.Agent, a.boolOr("unread_only", true), a.intOr("limit", model.DefaultPageSize))
	if in.Messages == nil {
		in.Messages = []model.Message{}
	}
	return in, err
}

// ackMessagesTool is ack_messages.
func ackMessagesTool() mcpTool {
	return mcpTool{
		name:  "ack_messages",
		title: "Acknowledge messages",
		desc: "Acknowledge messages addressed to you once you have handled them (their state becomes \"acked\"). " +
			"An id that is not a message addressed to you is refused with not_found. Acknowledging an already " +
			"acknowledged message changes nothing. Returns {acked: N}, the number of messages whose state changed. " +
			"Acknowledge what you have handled: messages read but not acknowledged still count against your inbox's " +
			"quota, and once it is full other agents' messages to you are refused.",
		params: []mcpParam{
			{name: "message_ids", kind: mcpStrings, required: true, desc: fmt.Sprintf("The message_id of each message to acknowledge (1 to %d).", mcpMaxItems)},
		},
		idempotent: true,
		call:       callAckMessages,
	}
}

// callAckMessages is ack_messages's call of the service.
func callAckMessages(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	return f.svc.AckMessages(ctx, f.o.Agent, a.strings("message_ids"))
}

// submitTaskTool is submit_task.
func submitTaskTool(me, cwd string) mcpTool {
	modes := make([]string, 0, len(model.AllModes()))
	for _, m := range model.AllModes() {
		modes = append(modes, string(m))
	}
	return mcpTool{
		name:  "submit_task",
		title: "Submit a task",
		desc: fmt.Sprintf("Delegate a task to another agent (target) through the relay, as %q. The task is persisted "+
			"and audited at once, then must pass these gates in order: "+spec.GateSentence()+
			". A task refused by the delegation gate is work to do yourself. mission_id and lease_id are "+
			"optional in the schema only so the attempt is recorded: without them the task is persisted and then "+
			"REJECTED (missing_mission_id / missing_lease_id), so pass the HAI-MCP mission (M-…) and lease (S-…) you "+
			"were given. If every gate passes, the target agent is started in cwd, in a session that denies every "+
			"permission request it makes. This call returns as soon as the task is stored, with the task {task_id, "+
			"state, code, message, …} in state submitted: the gates run after this answer, so its outcome (rejected, "+
			"blocked, authorized…) is never in it; to wait for the outcome in one call, call get_task with this "+
			"task_id and wait_seconds 50 (again while the state is not final), or read the relay's message in "+
			"check_inbox when it ends. %s A retry with the same idempotency_key and the very same arguments returns the first "+
			"task; the same key with any argument changed is refused (idempotency_conflict) and creates nothing. A follow-up "+
			"is a new task in the same context_id.", me, statesText),
		params: []mcpParam{
			{name: "target", kind: mcpString, required: true, desc: "The agent to run the task, e.g. \"claude\" or \"codex\" (see list_agents)."},
			{name: "prompt", kind: mcpString, required: true, desc: "What the target agent should do: the prompt of its session."},
			{name: "mission_id", kind: mcpString, desc: "The HAI-MCP mission ID (M-…), exactly as issued: 1–128 characters of [A-Za-z0-9._:-]. Without it the task is rejected."},
			{name: "lease_id", kind: mcpString, desc: "The HAI-MCP lease ID (S-…), exactly as issued: 1–128 characters of [A-Za-z0-9._:-]. Without it the task is rejected."},
			{name: "mode", kind: mcpEnum, enum: modes, def: string(model.ModeReadOnly), desc: "read_only (default): the agent may read, not change state. state_changing: allowed only for target claude under a lease the authority marks guarded."},
			{name: "context_id", kind: mcpString, desc: "Thread identifier; reuse one to group a task with earlier tasks and messages."},
			{name: "reference_task_ids", kind: mcpStrings, maxItems: model.MaxReferenceTaskIDs,
				desc: fmt.Sprintf("task_ids of earlier tasks this one follows up on (at most %d).", model.MaxReferenceTaskIDs)},
			artifactsParam(),
			{name: "idempotency_key", kind: mcpString, desc: "A key of your choosing for this one request: submitting it again with the same key and the same arguments returns the first task instead of creating another; the same key with different arguments is refused (idempotency_conflict)."},
			{name: "cwd", kind: mcpString, desc: fmt.Sprintf("Absolute path of an existing directory to run the target agent in (default: %s).", cwd)},
		},
		call: callSubmitTask,
	}
}

// callSubmitTask is submit_task's call of the service.
func callSubmitTask(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	mode := model.ModeReadOnly
	if m := a.str("mode"); m != "" {
		mode = model.Mode(m)
	}
	cwd := a.str("cwd")
	if cwd == "" {
		cwd = f.o.Cwd
	}
	return f.svc.SubmitTask(ctx, f.o.Agent, model.SubmitRequest{
		Target:           a.str("target"),
		Prompt:           a.str("prompt"),
		MissionID:        a.str("mission_id"),
		LeaseID:          a.str("lease_id"),
		Mode:             mode,
		ContextID:        a.str("context_id"),
		ReferenceTaskIDs: a.strings("reference_task_ids"),
		Artifacts:        a.artifacts("artifacts"),
		IdempotencyKey:   a.str("idempotency_key"),
		Cwd:              cwd,
	})
}

// getTaskTool is get_task.
func getTaskTool() mcpTool {
	return mcpTool{
		name:  "get_task",
		title: "Get a task",
		desc: fmt.Sprintf("Show one task you submitted or that targets you: task_id, state, code, message, hint (what to do about the code), caller, target, mode, "+
			"mission_id, lease_id, context_id, result (the agent's reply once completed), stop_reason, "+
			"denied_permissions, parent_task_id and chain (the tasks it was delegated through, when it was submitted "+
			"from inside another task), created_at, updated_at. A task that is not yours is not_found. "+
			"To wait for a task to end, pass wait_seconds (up to %d): the answer comes as soon as the task reaches a "+
			"final state, or when that many seconds have passed, whichever is first; if the state is still not final, "+
			"call again with the same wait_seconds. That is one call instead of polling: do not sleep between calls. %s",
			mcpMaxWaitSeconds, statesText),
		params: []mcpParam{
			{name: "task_id", kind: mcpString, required: true, desc: "The task_id returned by submit_task or list_tasks."},
			{name: "wait_seconds", kind: mcpSeconds, def: 0, desc: fmt.Sprintf("Wait up to this many seconds, 0 to %d (default 0: answer at once), "+
				"for the task to reach a final state (completed, failed, canceled, rejected, blocked); the answer comes as soon as it does.", mcpMaxWaitSeconds)},
		},
		readOnly: true, idempotent: true,
		call: callGetTask,
	}
}

// callGetTask is get_task's call of the service.
func callGetTask(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	id, wait := a.str("task_id"), a.duration("wait_seconds")
	if wait > 0 {
		if c, ok := f.svc.(taskWaiterJSON); ok {
			return passRaw(c.WaitTaskJSON(ctx, f.o.Agent, id, wait))
		}
		return f.svc.WaitTask(ctx, f.o.Agent, id, wait)
	}
	if c := f.passThrough(); c != nil {
		return passRaw(c.GetTaskJSON(ctx, f.o.Agent, id))
	}
	return f.svc.GetTask(ctx, f.o.Agent, id)
}

// cancelTaskTool is cancel_task.
func cancelTaskTool() mcpTool {
	return mcpTool{
		name:  "cancel_task",
		title: "Cancel a task",
		desc: "Cancel a task you submitted that has not ended (state submitted, authorized or working). A running " +
			"agent session is canceled and its process stopped; the task ends canceled with code " +
			"canceled_by_submitter. A task already in a final state cannot be canceled (task_not_cancelable). " +
			"Returns the task.",
		params: []mcpParam{
			{name: "task_id", kind: mcpString, required: true, desc: "The task_id of the task to cancel."},
		},
		destructive: true,
		call:        callCancelTask,
	}
}

// callCancelTask is cancel_task's call of the service.
func callCancelTask(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	return f.svc.CancelTask(ctx, f.o.Agent, a.str("task_id"))
}

// listTasksTool is list_tasks.
func listTasksTool() mcpTool {
	states := make([]string, 0, len(model.AllStates()))
	for _, s := range model.AllStates() {
		states = append(states, string(s))
	}
	return mcpTool{
		name:  "list_tasks",
		title: "List tasks",
		desc: "List the tasks you submitted or that target you, newest first, optionally only those in one state. " +
			"Returns {tasks: [...]}, each task as get_task shows it; the list stops early, before limit, when the " +
			"next task would take the answer past 2 MiB of JSON (get_task shows any one). " + statesText,
		params: []mcpParam{
			{name: "state", kind: mcpEnum, enum: states, desc: "Only tasks in this state (default: every state)."},
			{name: "limit", kind: mcpLimit, def: model.DefaultPageSize, desc: fmt.Sprintf("Maximum number of tasks to return, 1 to %d (default %d).", mcpMaxLimit, model.DefaultPageSize)},
			{name: "before", kind: mcpString, desc: "A task_id: return only tasks older than it (the next page: pass the last task_id of the previous one)."},
		},
		readOnly: true, idempotent: true,
		call: callListTasks,
	}
}

// callListTasks is list_tasks's call of the service.
func callListTasks(ctx context.Context, f *mcpFacade, a mcpArgs) (any, error) {
	if c := f.passThrough(); c != nil {
		return passRaw(c.ListTasksJSON(ctx, f.o.Agent, model.State(a.str("state")), a.intOr("limit", model.DefaultPageSize), a.str("before")))
	}
	ts, err := f.svc.ListTasks(ctx, f.o.Agent, model.State(a.str("state")), a.intOr("limit", model.DefaultPageSize), a.str("before"))
	if ts == nil {
		ts = []model.Task{}
	}
	return map[string][]model.Task{"tasks": ts}, err
}

// listAgentsTool is list_agents.
func listAgentsTool() mcpTool {
	return mcpTool{
		name:  "list_agents",
		title: "List agents",
		desc: "List the agents known to the relay, each with four independent signals: configured (its ACP " +
			"adapter binary is found on the daemon's PATH), enabled (policy allows tasks for it), worked_live (a " +
			"real bounded invocation succeeded within the last 24 h), each with when (…_at) and why (…_reason), and " +
			"hardening {status: verified | failed | unverified, at, adapter_version, reason, require_verified, current, " +
			"current_reason}: whether an offline verification on this machine (relay agents verify) stopped every " +
			"attempt of a delegated task to write, edit or run; with require_verified, tasks to the agent are blocked " +
			"(agent_not_verified) unless current. Any of them can be a submit_task target, and any other than yourself " +
			"a send_message recipient. Returns {agents: [{name, command, configured, enabled, worked_live, hardening, …}]}.",
		readOnly: true, idempotent: true,
		call: callListAgents,
	}
}

// callListAgents is list_agents's call of the service.
func callListAgents(ctx context.Context, f *mcpFacade, _ mcpArgs) (any, error) {
	as, err := f.svc.ListAgents(ctx)
	if as == nil {
		as = []model.AgentInfo{}
	}
	return map[string][]model.AgentInfo{"agents": as}, err
}
