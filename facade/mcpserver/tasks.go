package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/model"
)

// The MCP tasks extension (io.modelcontextprotocol/tasks, with MCP
// 2026-07-28; github.com/modelcontextprotocol/ext-tasks): a server may
// answer a tools/call with a task handle instead of the result, when that
// call declares the extension among its client capabilities, and then
// serves tasks/get, tasks/update and tasks/cancel. Claude Code moves such a
// call to the background, polls tasks/get, and starts a turn of its own
// with the result once the task is done: the delegator learns the outcome
// without anyone polling by hand.
//
// mcp-go (v1.6.0) advertises the extension (server.WithExtensions) but
// implements only the older 2025-11-25 form of tasks (a
// task parameter on the call, tasks/result), which such a client never
// sends, so this layer answers the extension's shapes itself, in front of
// mcp-go: a submit_task call that declares the extension is answered with a
// handle bound to the relay task (the MCP task id is the relay task id:
// durable across a facade restart, it is the relay task), and the three
// methods answer from the daemon. A call or a client that does not declare
// the extension gets exactly what it got before.
//
// How a relay task's end maps onto the extension's statuses: a completed
// relay task is a completed MCP task whose result is the CallToolResult
// get_task gives; a failed, rejected or blocked one is a completed MCP task
// too, its result that same CallToolResult with isError true (the
// extension keeps "failed" for JSON-RPC errors of the request itself, and
// includes tool results with isError in "completed"); a canceled relay task
// is a cancelled MCP task. No task ever needs input: tasks/update is only
// acknowledged.

// tasksExtension names the extension in a request's client capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// TaskPollInterval is the pollIntervalMs the facade suggests: a tasks/get
// is one indexed read in the daemon, so a client may poll once a second
// and hear a task's end within that second (a client that waits twice as
// long as asked leaves a model idle for nothing). At most 1 s: checked by
// TestMCPTasksConformToTheSchemas here and by cmd/relay's
// TestMCPTasksRoundTrip through the real facade.
const TaskPollInterval = time.Second

// JSON-RPC error codes of the extension.
const (
	codeInvalidParams             = -32602
	codeMissingClientCapabilities = -32021
)

// taskLayer answers what the extension adds, for one facade.
type taskLayer struct {
	f *mcpFacade

	mu        sync.Mutex
	delivered map[string]bool // tasks whose end a tasks/get has answered
}

func newTaskLayer(f *mcpFacade) *taskLayer {
	return &taskLayer{f: f, delivered: map[string]bool{}}
}

// taskParams is what the layer reads of a request's params.
type taskParams struct {
	Name   string `json:"name"`
	TaskID string `json:"taskId"`
	Meta   struct {
		Caps *struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
}

// declares reports whether the request declares the tasks extension.
func (p taskParams) declares() bool {
	if p.Meta.Caps == nil {
		return false
	}
	_, ok := p.Meta.Caps.Extensions[tasksExtension]
	return ok
}

// serve answers the request if the extension concerns it, and reports
// whether it did; otherwise mcp-go answers it. next is mcp-go's own
// handling.
func (l *taskLayer) serve(ctx context.Context, f frame, next func() mcp.JSONRPCMessage) (mcp.JSONRPCMessage, bool) {
	id := f.id
	if id == nil {
		return nil, false
	}
	switch f.method {
	case string(mcp.MethodToolsCall), "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return nil, false
	}
	// Only the methods the extension concerns read their params here.
	var p taskParams
	if len(f.params) > 0 && json.Unmarshal(f.params, &p) != nil {
		return nil, false
	}
	switch f.method {
	case string(mcp.MethodToolsCall):
		if p.Name != "submit_task" || !p.declares() {
			return nil, false
		}
		return l.handle(ctx, id, next()), true
	case "tasks/get", "tasks/update", "tasks/cancel":
		if !p.declares() {
			return rpcError(id, codeMissingClientCapabilities, "Missing required client capability",
				map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}), true
		}
		if err := l.f.ensureAudited(ctx); err != nil {
			return rpcError(id, mcp.INTERNAL_ERROR, model.Public(err).Message, nil), true
		}
		switch f.method {
		case "tasks/get":
			return l.get(ctx, id, p.TaskID), true
		case "tasks/update":
			return l.update(ctx, id, p.TaskID), true
		default:
			return l.cancel(ctx, id, p.TaskID), true
		}
	}
	return nil, false
}

// handle turns submit_task's answer into a task handle bound to the relay
// task; a refusal stays the tool error it is.
func (l *taskLayer) handle(ctx context.Context, id any, resp mcp.JSONRPCMessage) mcp.JSONRPCMessage {
	var m struct {
		Result *struct {
			IsError    bool            `json:"isError"`
			Structured json.RawMessage `json:"structuredContent"`
			Meta       json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	b, err := json.Marshal(resp)
	if err != nil || json.Unmarshal(b, &m) != nil || m.Result == nil || m.Result.IsError {
		return resp
	}
	var t model.Task
	if json.Unmarshal(m.Result.Structured, &t) != nil || t.ID == "" {
		return resp
	}
	if err := l.f.svc.MCPTaskEvent(context.WithoutCancel(ctx), l.f.o.Agent, t.ID, model.MCPTaskCreated); err != nil {
		// The relay task exists and runs; without the audit row of its
		// MCP task the caller still gets today's answer, which is true.
		l.f.log.Warn("mcp: audit of an MCP task", "task_id", t.ID, "err", err)
		return resp
	}
	h := handle(t)
	h["resultType"] = "task"
	if len(m.Result.Meta) > 0 {
		h["_meta"] = m.Result.Meta
	}
	return mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: h}
}

// handle is the Task object of a relay task: its id, status and times.
func handle(t model.Task) map[string]any {
	status, msg := taskStatus(t)
	h := map[string]any{
		"taskId":         t.ID,
		"status":         status,
		"statusMessage":  msg,
		"createdAt":      t.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":  t.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"ttlMs":          nil, // kept as long as the relay keeps the task ([retention])
		"pollIntervalMs": TaskPollInterval.Milliseconds(),
	}
	return h
}

// taskStatus maps a relay task's state onto the extension's statuses.
func taskStatus(t model.Task) (string, string) {
	switch {
	case !t.State.Terminal():
		return "working", fmt.Sprintf("relay task %s is %s (%s → %s)", t.ID, t.State, t.Caller, t.Target)
	case t.State == model.StateCanceled:
		return "cancelled", fmt.Sprintf("relay task %s was canceled (%s)", t.ID, t.Code)
	case t.State == model.StateCompleted:
		return "completed", fmt.Sprintf("relay task %s completed", t.ID)
	}
	return "completed", fmt.Sprintf("relay task %s ended %s (%s); see the result", t.ID, t.State, t.Code)
}

// get answers tasks/get from the daemon: the task's status, and at its end
// what get_task gives, as the CallToolResult the submit would have had.
func (l *taskLayer) get(ctx context.Context, id any, taskID string) mcp.JSONRPCMessage {
	t, err := l.f.svc.GetTask(ctx, l.f.o.Agent, taskID)
	if err != nil {
		return l.taskError(id, "retrieve", taskID, err)
	}
	res := handle(t)
	res["resultType"] = "complete"
	if t.State.Terminal() && t.State != model.StateCanceled {
		r := l.f.toolResult("get_task", t)
		r.IsError = t.State != model.StateCompleted
		res["result"] = completeResult(r)
	}
	if t.State.Terminal() && t.Caller == l.f.o.Agent {
		// The end reaches the submitter, who holds the handle: that is the
		// delivery. The target reading a task is a read, not a delivery.
		l.mu.Lock()
		first := !l.delivered[t.ID]
		l.mu.Unlock()
		if first {
			if err := l.f.svc.MCPTaskEvent(context.WithoutCancel(ctx), l.f.o.Agent, t.ID, model.MCPTaskDelivered); err != nil {
				// Not answered as delivered when the delivery is not on record.
				return l.taskError(id, "retrieve", taskID, err)
			}
			l.mu.Lock()
			l.delivered[t.ID] = true
			l.mu.Unlock()
		}
	}
	return mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: res}
}

// completeResult is a CallToolResult as MCP 2026-07-28 gives it, with
// its resultType: the schema requires one on every result, the one a
// completed task carries included.
func completeResult(r *mcp.CallToolResult) any {
	b, err := json.Marshal(r)
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil {
		return r
	}
	m["resultType"] = "complete"
	return m
}

// update acknowledges tasks/update: a relay task never asks for input.
func (l *taskLayer) update(ctx context.Context, id any, taskID string) mcp.JSONRPCMessage {
	if _, err := l.f.svc.GetTask(ctx, l.f.o.Agent, taskID); err != nil {
		return l.taskError(id, "update", taskID, err)
	}
	return mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: map[string]any{"resultType": "complete"}}
}

// cancel cancels the caller's own relay task, as cancel_task does (and is
// audited as it is); a task that already ended is acknowledged and writes
// nothing (nothing changed), another agent's is not found. A cancel whose
// audit row could not be written is not answered as done.
func (l *taskLayer) cancel(ctx context.Context, id any, taskID string) mcp.JSONRPCMessage {
	t, err := l.f.svc.GetTask(ctx, l.f.o.Agent, taskID)
	if err != nil {
		return l.taskError(id, "cancel", taskID, err)
	}
	if t.Caller != l.f.o.Agent {
		// Visible as its target, but not its task: the MCP task is the
		// submitter's.
		return rpcError(id, codeInvalidParams, "Failed to cancel task: Task not found", nil)
	}
	if !t.State.Terminal() {
		if err := l.f.svc.MCPTaskEvent(context.WithoutCancel(ctx), l.f.o.Agent, t.ID, model.MCPTaskCancelRequested); err != nil {
			return l.taskError(id, "cancel", taskID, err)
		}
		if _, err := l.f.svc.CancelTask(ctx, l.f.o.Agent, taskID); err != nil && model.ErrorCode(err) != model.CodeTaskNotCancelable {
			return l.taskError(id, "cancel", taskID, err)
		}
	}
	return mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: map[string]any{"resultType": "complete"}}
}

// taskError is the JSON-RPC error of a task operation: invalid params for
// a task that is not there (or not the caller's), internal otherwise.
func (l *taskLayer) taskError(id any, op, taskID string, err error) mcp.JSONRPCMessage {
	switch model.ErrorCode(err) {
	case model.CodeNotFound, model.CodeInvalidArgs:
		return rpcError(id, codeInvalidParams, "Failed to "+op+" task: Task not found", nil)
	}
	pub := model.Public(err)
	if pub.Code == model.CodeInternal {
		l.f.log.Error("mcp: task operation failed", "op", op, "task_id", taskID, "err", err)
	}
	return rpcError(id, mcp.INTERNAL_ERROR, "Failed to "+op+" task: "+pub.Message, map[string]any{"code": pub.Code, "hint": pub.Hint})
}

func rpcError(id any, code int, msg string, data any) mcp.JSONRPCMessage {
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Error: mcp.NewJSONRPCErrorDetails(code, msg, data)}
}
