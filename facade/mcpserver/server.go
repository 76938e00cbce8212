package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/strictjson"
	"github.com/hai-relay/relay/spec"
)

// Options configures the MCP stdio facade of one agent.
type Options struct {
	// Agent is the caller's identity, fixed at launch (`relay mcp --as
	// AGENT`). No tool takes a sender: every call is made as Agent.
	Agent string
	// Cwd is the working directory of submitted tasks that name none: the
	// facade's own working directory. Empty means os.Getwd(). Its
	// symlinks are resolved, as the relay resolves every task's cwd.
	Cwd string
	// Version is reported as the server's version ("dev" when empty).
	Version string
	// PID is the facade's process id for the connection audit (os.Getpid()
	// when zero).
	PID int
	// Logger receives internal errors, which callers never see (discarded
	// when nil).
	Logger *slog.Logger
	// Drain bounds how long Serve waits, once stdin has ended (or its
	// context is done), for the requests already read to finish; then they
	// are canceled. 0 means DefaultDrain.
	Drain time.Duration
}

// serverName is the serverInfo name the facade reports.
const serverName = "hai-relay"

// newMCP builds the MCP server of the facade: the eight relay tools,
// each calling svc as o.Agent; Serve puts it on stdio, behind the MCP
// tasks layer.
//
// Every tool validates its raw arguments itself (mcp-go does not enforce a
// schema's additionalProperties, types or bounds): an unknown argument, a
// wrong type or a missing required argument is a tool error with code
// invalid_args and svc is not called. Every failure, of the arguments or of
// svc, is an MCP tool error (isError: true) carrying {code, message, hint}
// as structured content and as JSON text, never a JSON-RPC error; errors
// without a code are shown as internal and logged.
//
// Connection audit: svc.Connected is called once per client session, when
// the client initializes and, for a client that skipped initialize (or when
// that first attempt failed), before its first tool call. A tool call is
// never served on a connection whose audit failed: the call fails with the
// audit's error instead (fail closed).
func newMCP(svc model.AgentService, o Options) (*server.MCPServer, *mcpFacade, error) {
	if svc == nil {
		return nil, nil, errors.New("mcpserver: nil service")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	f := &mcpFacade{
		svc:     svc,
		o:       o,
		log:     o.Logger,
		audited: map[string]bool{},
	}

	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, _ *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		// The audit runs beside the initialize answer, not before it, so it
		// costs the client no start-up time; a tool call waits for it (it
		// holds f.mu) and is never served unaudited.
		f.pending.Add(1)
		go func() {
			defer f.pending.Done()
			if err := f.ensureAudited(context.WithoutCancel(ctx)); err != nil {
				// Not fatal here: the next tool call retries, and fails
				// with this error if the audit still cannot be written.
				f.log.Warn("mcp: connection audit failed", "agent", o.Agent, "err", err)
			}
		}()
	})
	// A frame is checked whole (checkFrame) before mcp-go reads it with
	// encoding/json, which would pick the last of two "name"s, fold "NAME"
	// into "name" and replace a lone surrogate: by the stdio transport
	// (stdio.go), once per frame.
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		f.mu.Lock()
		delete(f.audited, s.SessionID())
		f.mu.Unlock()
	})

	// Not server.WithInputSchemaValidation: mcp-go (v1.6.0) reports a
	// failure as plain text (NewToolResultError), without the {code,
	// message, hint} structured content every tool error carries, from
	// before the handler with no hook to reshape it, and checks the
	// arguments after encoding/json decoded them (a key twice or a "TARGET"
	// already resolved). parseArgs enforces the same table that
	// advertises the schema, on the raw arguments, through
	// strictjson.Decode.
	s := server.NewMCPServer(serverName, o.Version,
		server.WithToolCapabilities(false),
		server.WithHooks(hooks),
		server.WithInstructions(mcpInstructions(o)),
		// The MCP tasks extension (tasks.go), in the capabilities of
		// initialize and server/discover.
		server.WithExtensions(map[string]any{tasksExtension: map[string]any{}}),
	)
	tools := mcpTools(o)
	st := make([]server.ServerTool, 0, len(tools))
	for _, t := range tools {
		st = append(st, server.ServerTool{Tool: t.tool(), Handler: f.handler(t)})
	}
	s.AddTools(st...)
	return s, f, nil
}

// Serve serves the facade over stdio (newline-delimited JSON-RPC on in
// and out) until in reaches EOF or ctx is done; both are a normal end and
// return nil, as is a client that stopped reading out.
//
// Every request read is finished and answered before Serve returns,
// however the client left: requests run on a context that neither the end
// of in nor ctx cancels (the daemon client bounds each call), so a client
// that closes stdin right after its requests gets every answer, and no
// request it was told failed was carried out. Requests still running
// o.Drain after the end are canceled. A client that no longer reads out
// gets no more answers; its requests still run to the end. When ctx ends
// before in does, one goroutine stays blocked reading in until in is
// closed or the process exits.
func Serve(ctx context.Context, svc model.AgentService, o Options, in io.Reader, out io.Writer) error {
	s, f, err := newMCP(svc, o)
	if err != nil {
		return err
	}
	// A client that initializes and leaves at once is still audited.
	defer f.pending.Wait()
	drain := o.Drain
	if drain <= 0 {
		drain = DefaultDrain
	}
	if err := serveStdio(ctx, s, newTaskLayer(f), in, out, drain, f.log); err != nil {
		return fmt.Errorf("facade: serve mcp: %w", err)
	}
	return nil
}

// checkFrame checks one JSON-RPC request as it came, with
// strictjson.Check. A refusal is the JSON-RPC error invalid request (-32600),
// its message naming invalid_args; mcp-go then answers it with no handler
// run. One exception keeps the tools' own answer: when the defect is in
// the arguments a tools/call hands its tool — those mcp-go's decoding
// picks, so that the tool refuses exactly them — the frame passes and the
// tool answers invalid_args as a tool error, like any bad argument.
func checkFrame(raw json.RawMessage) error {
	err := strictjson.Check(raw, nil)
	if err == nil {
		return nil
	}
	var call struct {
		Method string `json:"method"`
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &call) == nil && call.Method == string(mcp.MethodToolsCall) &&
		len(call.Params.Arguments) > 0 && strictjson.Check(call.Params.Arguments, nil) != nil {
		return nil // the tool refuses these arguments itself
	}
	return fmt.Errorf("%s: the request is refused: %v", model.CodeInvalidArgs, err)
}

// withDefaults validates o and fills its defaults.
func (o Options) withDefaults() (Options, error) {
	if !spec.ValidAgentName(o.Agent) {
		return o, fmt.Errorf("facade: invalid agent identity %q: agent names are 1–64 characters of [a-z0-9_-] starting with a letter or digit, and %q is reserved", o.Agent, model.RelayAgent)
	}
	if o.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, fmt.Errorf("facade: working directory: %w", err)
		}
		o.Cwd = wd
	}
	if !filepath.IsAbs(o.Cwd) {
		return o, fmt.Errorf("facade: default cwd %q is not absolute", o.Cwd)
	}
	// os.Getwd answers $PWD, which may name the directory through a
	// symlink: the default is shown (submit_task's description) as the
	// path the relay stores, with its symlinks resolved. One that cannot
	// be resolved is left for submit to refuse (invalid_cwd).
	if resolved, err := filepath.EvalSymlinks(o.Cwd); err == nil {
		o.Cwd = resolved
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// mcpFacade is the state shared by the tool handlers of one MCP server.
type mcpFacade struct {
	svc model.AgentService
	o   Options
	log *slog.Logger

	// mu guards audited: the session ids whose connection is audited. It is
	// held across svc.Connected so that one session is audited once.
	mu      sync.Mutex
	audited map[string]bool
	// pending counts connection audits still running in the background.
	pending sync.WaitGroup
}

// ensureAudited records the connection of ctx's client session once.
func (f *mcpFacade) ensureAudited(ctx context.Context) error {
	id := ""
	if s := server.ClientSessionFromContext(ctx); s != nil {
		id = s.SessionID()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.audited[id] {
		return nil
	}
	c := model.Conn{Agent: f.o.Agent, PID: f.o.PID, UID: os.Getuid(), Kind: "mcp"}
	if err := f.svc.Connected(ctx, c); err != nil {
		return err
	}
	f.audited[id] = true
	return nil
}

// handler wraps one tool: argument validation, the connection audit, the
// service call and the mapping of its answer to an MCP result. It never
// returns a Go error, so no domain failure becomes a JSON-RPC error.
func (f *mcpFacade) handler(t mcpTool) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, _ error) {
		defer func() {
			if r := recover(); r != nil {
				res = f.toolError(t.name, fmt.Errorf("panic in %s: %v", t.name, r))
			}
		}()
		a, err := parseArgs(t, req)
		if err != nil {
			return f.toolError(t.name, err), nil
		}
		if err := f.ensureAudited(ctx); err != nil {
			return f.toolError(t.name, err), nil
		}
		out, err := t.call(ctx, f, a)
		if err != nil {
			return f.toolError(t.name, err), nil
		}
		return f.toolResult(t.name, out), nil
	}
}

// toolResult returns out as structured content and as the same JSON text.
// A json.RawMessage is the daemon's answer, passed on as it came.
func (f *mcpFacade) toolResult(tool string, out any) *mcp.CallToolResult {
	b, ok := out.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(out); err != nil {
			return f.toolError(tool, fmt.Errorf("marshal %s result: %w", tool, err))
		}
	}
	return mcp.NewToolResultStructured(b, string(b))
}

// PassThrough is what a service can add to model.AgentService when its
// answers to the four tools whose results are large or frequent
// (send_message, check_inbox, get_task, list_tasks) already are those
// results as JSON, byte for byte: the socket client (socketapi.Client) is
// one, as the daemon's API and the tools share their shapes. The server
// checks for it with a type assertion on the service it was given and
// passes such answers on instead of decoding and encoding them again (a
// 50-task list_tasks answer cost 0.3 ms of decoding and 0.15 ms of
// encoding). A service without it (the in-process one, tests) gets the
// typed path; both give the same result.
//
// Each method returns the JSON of what the AgentService method of the
// same name returns: a model.Message, a model.Inbox, a model.Task, and
// {"tasks": [...]} for ListTasksJSON.
type PassThrough interface {
	SendMessageJSON(ctx context.Context, caller string, r model.SendRequest) (json.RawMessage, error)
	CheckInboxJSON(ctx context.Context, caller string, unreadOnly bool, limit int) (json.RawMessage, error)
	GetTaskJSON(ctx context.Context, caller, id string) (json.RawMessage, error)
	ListTasksJSON(ctx context.Context, caller string, state model.State, limit int, before string) (json.RawMessage, error)
}

// passThrough returns the service as a PassThrough, or nil when it is not
// one.
func (f *mcpFacade) passThrough() PassThrough {
	p, _ := f.svc.(PassThrough)
	return p
}

// passRaw returns a pass-through answer as the tool's result, a
// json.RawMessage, which toolResult passes on as it came.
func passRaw(raw json.RawMessage, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// toolError returns err as an MCP tool error: isError with {code, message,
// hint} as structured content and as JSON text. Only the public form of
// err is shown; an error without a code is logged and shown as internal.
func (f *mcpFacade) toolError(tool string, err error) *mcp.CallToolResult {
	pub := spec.PublicError(err)
	if pub.Code == model.CodeInternal {
		f.log.Error("mcp: tool failed", "tool", tool, "agent", f.o.Agent, "err", err)
	} else {
		f.log.Debug("mcp: tool refused", "tool", tool, "agent", f.o.Agent, "code", string(pub.Code), "err", err)
	}
	b, mErr := json.Marshal(pub)
	if mErr != nil { // cannot happen: three strings
		b = []byte(`{"code":"internal","message":"internal error","hint":""}`)
	}
	res := mcp.NewToolResultStructured(json.RawMessage(b), string(b))
	res.IsError = true
	return res
}
