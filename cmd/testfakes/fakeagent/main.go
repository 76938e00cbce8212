// Command fakeagent is a scripted ACP agent for the dispatcher's tests,
// built on the ACP SDK's agent side and run as a real subprocess, exactly
// as production agents are.
//
// Its behaviour is chosen by its first argument when given (needed for what
// happens before any prompt: auth, modes), otherwise by the first word of
// each prompt:
//
//	echo ...               reply with the prompt text
//	perm-allow-reject      ask permission with {allow_once, reject_once}
//	perm-allow-only        ... with {allow_once, allow_always}
//	perm-always            ... with {allow_always, reject_always}
//	perm-none              ... with no options
//	perm-dup-reject        ... with {allow_once "go", reject_once "go"}: the
//	                       reject_once id is also an allow option's
//	perm-dup-other         ... with {reject_once "no", allow_once "a",
//	                       allow_always "a"}: another id is not unique
//	perm-abort             like perm-allow-reject, then end the turn "cancelled"
//	                       (each replies "selected:<optionId>" or "cancelled")
//	fs-read, fs-write      call the client's fs methods, reply with the error
//	terminal               call terminal/create, reply with the error
//	thought SECRET         send SECRET as a thought chunk, reply "done"
//	sleep SECONDS          wait SECONDS (a decimal), then reply "slept" (a
//	                       session/cancel ends the wait: "cancelled")
//	delegate RELAY HOME AS TARGET PROMPT...
//	                       start `RELAY mcp --as AS --home HOME` as a child (as
//	                       an agent's own MCP client would), send TARGET a
//	                       message and submit PROMPT to it through that facade,
//	                       wait for the task's end (get_task wait_seconds) and
//	                       reply "delegated TASK_ID STATE CODE" (delegate.go)
//	hang                   block until session/cancel, then stop "cancelled"
//	hang-ignore-cancel     block forever
//	crash                  send a chunk, then exit 3 mid-prompt
//	garbage                write a non-JSON line on stdout, then exit 2
//	garbage-continue       write a non-JSON line, then reply normally
//	refusal, max-tokens, max-turn-requests   end with that stop reason
//	cancelled-unasked      end with "cancelled" though nobody canceled
//	error                  answer session/prompt with an error
//	chunks-N               stream N chunks of 10 bytes, then end_turn
//	bytes-N                reply N bytes in chunks of 4 KiB
//	tools-N                report N tool calls (pending → completed)
//	tools-fail-N           report N tool calls (pending → failed)
//	stat GATE PATH...      once GATE exists, reply "PATH=exists" or
//	                       "PATH=missing" for each
//	elicit                 ask the client a form elicitation (and a URL one),
//	                       reply "elicitation:<action>,<action>"
//	foreign                send a chunk "FOREIGN TEXT", a tool call and a
//	                       permission request for session "sess-other",
//	                       which the client never opened, then reply "root
//	                       text" for its own session
//	foreign-mode           report current_mode_update bypassPermissions for
//	                       session "sess-other", then hang
//	flood BYTES SECONDS    for SECONDS (or until canceled), write session/update
//	                       lines of about BYTES each on stdout as fast as the
//	                       relay reads them — by turns a message chunk whose
//	                       text is BYTES long and a tool call whose title and
//	                       content are half that each — then log the count ("flooded") and
//	                       end the turn with a short reply
//	big-tool N             report a tool call whose id and title are N bytes,
//	                       ask permission for it with an N-byte reject option id
//	grandchild             start `sleep 300`, reply and write its pid to
//	                       $FAKEAGENT_PIDFILE, then hang
//	orphan                 start `sleep 300` through a shell that exits at once
//	                       (the sleep's parent is gone: it is reparented), write
//	                       its pid to $FAKEAGENT_PIDFILE, reply "orphan:<pid>",
//	                       then hang
//	escape                 start `sleep 300` in a new session (setsid) with an
//	                       empty environment, write its pid to
//	                       $FAKEAGENT_PIDFILE, reply "escaped:<pid>" and end the turn
//	escape-hang            the same, then hang
//	vandal PATH|pid:N...   act as an agent that never asks: write each PATH,
//	                       SIGKILL each pid N, and reply with what happened
//	mode                   reply "mode:<current session mode>"
//	switch-mode MODE       report current_mode_update MODE, then hang
//	switch-option VALUE    report config option mode = VALUE, then hang
//	text-mode MODE         say "[MODE] MODE" (a mode change told in text), then hang
//	stderr-crash           write a line to stderr, then exit 3
//	auth-prompt            answer session/prompt with auth_required
//
// When $FAKEAGENT_MODEL is set (a chat-completions base URL, the relay's
// scripted model; $FAKEAGENT_MODEL_KEY its key), every prompt is instead a turn driven by that model
// (modelTurn): the agent offers it tools, runs what it calls under
// $FAKEAGENT_POLICY and ends with its text.
//
// Without a startup-only behaviour the agent is compliant: it offers the
// session modes default, dontAsk, read-only and plan (current: default),
// mirrors its mode as the config option "mode", and takes any set_mode or
// mode option value, so that it runs under every verified hardening
// profile. Arguments starting with "-" (a profile's flags) are ignored.
//
// The first argument cursor or hermes runs a stand-in for that agent
// instead (standins.go).
//
// Startup-only behaviours (first argument): nomodes (offer no modes and
// no options), auth (auth_required at
// session/new), auth-init (at initialize), modes (offer session modes
// default and plan), modes-refuse (offer them but refuse set_mode),
// modes-die (offer them and exit, status 3, on set_mode),
// options (offer a select config option "mode": build, plan; start at
// build), hang-init (never answer initialize), hang-new (never answer
// session/new), v2 (claim ACP
// protocol version 2), die-first (the first process to create
// $FAKEAGENT_ONCE exits 1 before initialize; the others are compliant). A startup behaviour that is also a prompt behaviour
// (hang, echo, ...) applies to every prompt.
//
// The probe prompt "Reply with the single word OK." is answered "OK".
//
// Initialize reports agentInfo version $FAKEAGENT_VERSION when it is set,
// with the name $FAKEAGENT_NAME ("fakeagent" when unset).
//
// The start event carries the values of the variables $FAKEAGENT_ENVLOG
// names (comma-separated) that are set, and the names of every variable
// the agent got (env_names).
//
// With $FAKEAGENT_START_CHILD set to a path, the agent starts `sleep 300`
// in its process group as it starts and appends the child's pid to that
// file.
//
// Every event (start, initialize, session/new, set_mode, prompt,
// permission outcome, fs/terminal errors, cancel, exit) is appended as one
// JSON line to $FAKEAGENT_LOG when set (to stderr, each line after
// "fakeagent-event ", when it is "stderr"); start carries the names of the
// variables in the agent's environment (env, sorted).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch/procstat"
)

const probePrompt = "Reply with the single word OK."

type eventLog struct {
	mu     sync.Mutex
	f      *os.File
	prefix string // before each line (FAKEAGENT_LOG=stderr)
}

// StderrEventPrefix starts each event line on stderr (FAKEAGENT_LOG=stderr).
const StderrEventPrefix = "fakeagent-event "

func (l *eventLog) event(kind string, fields map[string]any) {
	if l == nil || l.f == nil {
		return
	}
	// The pid is the sandbox's pid namespace's; with the start time the
	// tests find the process as the host sees it (dispatchtest.HostPIDOf).
	m := map[string]any{"event": kind, "pid": os.Getpid(), "start": procStart(os.Getpid()), "pidns": pidNS(os.Getpid())}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.f.Write(append(append([]byte(l.prefix), b...), '\n'))
}

type agent struct {
	// conn is set once, before ready closes; handlers that talk back wait
	// for ready first.
	conn    *acp.AgentSideConnection
	ready   chan struct{}
	startup string
	log     *eventLog

	mu   sync.Mutex
	mode acp.SessionModeId
	cwd  string

	// canceled closes once session/cancel is logged. The SDK cancels the
	// prompt's context before it calls Cancel, so a turn that ends on
	// cancel waits for this, or the process could exit before the log
	// line is written.
	canceled   chan struct{}
	cancelOnce sync.Once
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	a.log.event("authenticate", nil)
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.log.event("initialize", map[string]any{
		"protocol": p.ProtocolVersion, "fs_read": p.ClientCapabilities.Fs.ReadTextFile,
		"fs_write": p.ClientCapabilities.Fs.WriteTextFile, "terminal": p.ClientCapabilities.Terminal,
		"auth_terminal": p.ClientCapabilities.Auth.Terminal,
	})
	switch a.startup {
	case "auth-init":
		return acp.InitializeResponse{}, acp.NewAuthRequired(nil)
	case "hang-init":
		<-ctx.Done()
		return acp.InitializeResponse{}, ctx.Err()
	case "v2":
		return acp.InitializeResponse{ProtocolVersion: 2}, nil
	}
	resp := acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber}
	if v, n := os.Getenv("FAKEAGENT_VERSION"), os.Getenv("FAKEAGENT_NAME"); v != "" || n != "" {
		if n == "" {
			n = "fakeagent"
		}
		resp.AgentInfo = &acp.Implementation{Name: n, Version: v}
	}
	return resp, nil
}

func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.log.event("cancel", map[string]any{"session": p.SessionId})
	a.cancelOnce.Do(func() { close(a.canceled) })
	return nil
}

// awaitCancelLogged waits briefly for session/cancel to be logged after the
// turn's context ended (it ends without one when the connection closes).
func (a *agent) awaitCancelLogged() {
	select {
	case <-a.canceled:
	case <-time.After(2 * time.Second):
	}
}

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, errors.New("not supported")
}

func (a *agent) SetSessionConfigOption(_ context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if p.ValueId == nil || (a.startup != "options" && !a.compliant()) || p.ValueId.ConfigId != "mode" {
		return acp.SetSessionConfigOptionResponse{}, errors.New("no such option")
	}
	a.log.event("set_config_option", map[string]any{"id": p.ValueId.ConfigId, "value": p.ValueId.Value})
	a.mu.Lock()
	a.mode = acp.SessionModeId(p.ValueId.Value)
	a.mu.Unlock()
	return acp.SetSessionConfigOptionResponse{ConfigOptions: modeOption(p.ValueId.Value)}, nil
}

// compliant reports whether the agent plays a well-behaved adapter (no
// startup behaviour, or one that only shapes prompts): it offers every
// session mode the relay's hardening profiles select, mirrors its mode as
// the config option "mode", and takes any mode or option value.
func (a *agent) compliant() bool {
	switch a.startup {
	case "auth", "auth-init", "modes", "modes-refuse", "modes-die", "options", "nomodes", "v2", "hang-init", "hang-new":
		return false
	}
	return true
}

// compliantModes are the modes a compliant fake offers: those the verified
// profiles select.
var compliantModes = []acp.SessionMode{
	{Id: "default", Name: "Default"}, {Id: "dontAsk", Name: "Don't ask"},
	{Id: "read-only", Name: "Read only"}, {Id: "plan", Name: "Plan"},
}

// modeOption is the "options" startup's config options, mode at value.
func modeOption(value acp.SessionConfigValueId) []acp.SessionConfigOption {
	return []acp.SessionConfigOption{{Select: &acp.SessionConfigOptionSelect{
		Id: "mode", Name: "Mode", Type: "select", CurrentValue: value,
		Options: acp.SessionConfigSelectOptions{Ungrouped: &acp.SessionConfigSelectOptionsUngrouped{
			{Value: "build", Name: "Build"}, {Value: "plan", Name: "Plan"}}},
	}}}
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	var servers []string
	for _, m := range p.McpServers {
		if m.Stdio != nil {
			servers = append(servers, m.Stdio.Name+"="+m.Stdio.Command+" "+strings.Join(m.Stdio.Args, " "))
		}
	}
	a.log.event("session_new", map[string]any{"cwd": p.Cwd, "mcp_servers": len(p.McpServers), "servers": servers, "meta": p.Meta})
	a.mu.Lock()
	a.cwd = p.Cwd
	a.mu.Unlock()
	resp := acp.NewSessionResponse{SessionId: "sess-fake"}
	if a.compliant() {
		a.mu.Lock()
		a.mode = "default"
		a.mu.Unlock()
		resp.Modes = &acp.SessionModeState{CurrentModeId: "default", AvailableModes: compliantModes}
		resp.ConfigOptions = modeOption("default")
	}
	switch a.startup {
	case "auth":
		return acp.NewSessionResponse{}, acp.NewAuthRequired(map[string]any{"hint": "log in first"})
	case "hang-new":
		<-ctx.Done()
		return acp.NewSessionResponse{}, ctx.Err()
	case "nomodes":
	case "options":
		a.mu.Lock()
		a.mode = "build"
		a.mu.Unlock()
		resp.ConfigOptions = modeOption("build")
	case "modes", "modes-refuse", "modes-die":
		a.mu.Lock()
		a.mode = "default"
		a.mu.Unlock()
		resp.Modes = &acp.SessionModeState{
			CurrentModeId: "default",
			AvailableModes: []acp.SessionMode{
				{Id: "default", Name: "Default"},
				{Id: "plan", Name: "Plan"},
			},
		}
	}
	return resp, nil
}

func (a *agent) SetSessionMode(_ context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	a.log.event("set_mode", map[string]any{"mode": p.ModeId})
	if a.startup == "modes-refuse" {
		return acp.SetSessionModeResponse{}, errors.New("modes are fixed here")
	}
	if a.startup == "modes-die" {
		fmt.Fprintln(os.Stderr, "fakeagent: dying at set_mode")
		os.Exit(3)
	}
	if a.compliant() {
		// Like claude-agent-acp: the mode option follows.
		_ = a.conn.SessionUpdate(context.Background(), acp.SessionNotification{SessionId: p.SessionId, Update: acp.SessionUpdate{
			ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{ConfigOptions: modeOption(acp.SessionConfigValueId(p.ModeId))}}})
	}
	a.mu.Lock()
	a.mode = p.ModeId
	a.mu.Unlock()
	return acp.SetSessionModeResponse{}, nil
}

func (a *agent) say(ctx context.Context, sid acp.SessionId, text string) {
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateAgentMessageText(text)})
}

func (a *agent) reply(ctx context.Context, sid acp.SessionId, text string) (acp.PromptResponse, error) {
	a.say(ctx, sid, text)
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	var text string
	var links []string
	for _, b := range p.Prompt {
		switch {
		case b.Text != nil && text == "":
			text = b.Text.Text
		case b.ResourceLink != nil:
			mt := ""
			if b.ResourceLink.MimeType != nil {
				mt = *b.ResourceLink.MimeType
			}
			links = append(links, b.ResourceLink.Name+"|"+b.ResourceLink.Uri+"|"+mt)
		}
	}
	<-a.ready
	a.log.event("prompt", map[string]any{"text": text, "links": links})
	sid := p.SessionId
	words := strings.Fields(text)
	behaviour := a.startup
	switch behaviour {
	case "", "auth", "auth-init", "modes", "modes-refuse", "modes-die", "options", "v2":
		behaviour = ""
		if len(words) > 0 {
			behaviour = words[0]
		}
	}
	if text == probePrompt && a.startup != "hang" && a.startup != "hang-ignore-cancel" {
		return a.reply(ctx, sid, "OK")
	}
	if url := os.Getenv("FAKEAGENT_MODEL"); url != "" {
		return a.modelTurn(ctx, sid, url, text)
	}

	switch {
	case behaviour == "echo":
		return a.reply(ctx, sid, text)
	case behaviour == "vandal":
		return a.reply(ctx, sid, vandal(words[1:]))
	case strings.HasPrefix(behaviour, "perm-"):
		return a.permission(ctx, sid, behaviour)
	case behaviour == "fs-read":
		a.mu.Lock()
		path := filepath.Join(a.cwd, "README")
		a.mu.Unlock()
		_, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: sid, Path: path})
		return a.reply(ctx, sid, a.clientErr("fs_read", err))
	case behaviour == "fs-write":
		a.mu.Lock()
		path := filepath.Join(a.cwd, "pwned")
		a.mu.Unlock()
		_, err := a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: sid, Path: path, Content: "x"})
		return a.reply(ctx, sid, a.clientErr("fs_write", err))
	case behaviour == "terminal":
		_, err := a.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: sid, Command: "ls"})
		return a.reply(ctx, sid, a.clientErr("terminal_create", err))
	case behaviour == "thought":
		secret := "no-secret"
		if len(words) > 1 {
			secret = words[1]
		}
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateAgentThoughtText("thinking about " + secret)})
		return a.reply(ctx, sid, "done")
	case behaviour == "sleep" && len(words) > 1:
		secs, _ := strconv.ParseFloat(words[1], 64)
		select {
		case <-time.After(time.Duration(secs * float64(time.Second))):
			return a.reply(ctx, sid, "slept")
		case <-ctx.Done():
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
	case behaviour == "delegate" || behaviour == "delegate-via":
		return a.delegate(ctx, sid, words)
	case behaviour == "hang":
		a.say(ctx, sid, "hanging")
		<-ctx.Done()
		a.awaitCancelLogged()
		a.log.event("prompt_canceled", nil)
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "hang-ignore-cancel":
		a.say(ctx, sid, "hanging, deaf")
		for {
			time.Sleep(time.Hour)
		}
	case behaviour == "crash":
		a.say(ctx, sid, "about to crash")
		a.log.event("crash", nil)
		os.Exit(3)
		panic("unreachable")
	case behaviour == "garbage" || behaviour == "garbage-continue":
		_, _ = os.Stdout.Write([]byte("this is not json {\n"))
		a.log.event("garbage", nil)
		if behaviour == "garbage" {
			time.Sleep(50 * time.Millisecond)
			os.Exit(2)
		}
		return a.reply(ctx, sid, "still here")
	case behaviour == "refusal":
		a.say(ctx, sid, "I will not")
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	case behaviour == "max-tokens":
		a.say(ctx, sid, "out of tokens")
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
	case behaviour == "max-turn-requests":
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, nil
	case behaviour == "cancelled-unasked":
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "error":
		return acp.PromptResponse{}, errors.New("model exploded")
	case behaviour == "auth-prompt":
		return acp.PromptResponse{}, acp.NewAuthRequired(nil)
	case strings.HasPrefix(behaviour, "chunks-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(behaviour, "chunks-"))
		for i := 0; i < n; i++ {
			a.say(ctx, sid, fmt.Sprintf("%09d\n", i))
		}
		a.log.event("chunks_sent", map[string]any{"n": n})
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case strings.HasPrefix(behaviour, "bytes-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(behaviour, "bytes-"))
		chunk := strings.Repeat("é", 2048) // 4 KiB, two-byte runes
		for n > 0 {
			c := chunk
			if n < len(c) {
				c = c[:n]
			}
			a.say(ctx, sid, c)
			n -= len(c)
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case behaviour == "big-tool" && len(words) > 1:
		n, _ := strconv.Atoi(words[1])
		id := acp.ToolCallId(strings.Repeat("i", n))
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(id,
			strings.Repeat("t", n), acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending))})
		_, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: sid, ToolCall: acp.ToolCallUpdate{ToolCallId: id},
			Options: []acp.PermissionOption{{Kind: acp.PermissionOptionKindRejectOnce, Name: "no", OptionId: acp.PermissionOptionId(strings.Repeat("o", n))}}})
		if err != nil {
			return a.reply(ctx, sid, "permission error: "+err.Error())
		}
		return a.reply(ctx, sid, "big tool done")
	case behaviour == "flood" && len(words) > 2:
		size, _ := strconv.Atoi(words[1])
		secs, _ := strconv.ParseFloat(words[2], 64)
		return a.flood(ctx, sid, size, time.Duration(secs*float64(time.Second)))
	case strings.HasPrefix(behaviour, "tools-") && !strings.HasPrefix(behaviour, "tools-fail-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(behaviour, "tools-"))
		for i := 0; i < n; i++ {
			id := acp.ToolCallId(fmt.Sprintf("tc-%d", i))
			_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(id,
				fmt.Sprintf("Read file %d", i), acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending))})
			_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(id,
				acp.WithUpdateStatus(acp.ToolCallStatusCompleted))})
		}
		return a.reply(ctx, sid, fmt.Sprintf("%d tools", n))
	case strings.HasPrefix(behaviour, "tools-fail-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(behaviour, "tools-fail-"))
		for i := 0; i < n; i++ {
			id := acp.ToolCallId(fmt.Sprintf("tc-%d", i))
			_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(id,
				fmt.Sprintf("Run command %d", i), acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusPending))})
			_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(id,
				acp.WithUpdateStatus(acp.ToolCallStatusFailed))})
		}
		return a.reply(ctx, sid, "bwrap: execvp codex-linux-sandbox: No such file or directory")
	case behaviour == "stat":
		// stat GATE PATH...: once GATE exists (at most 10 s), "PATH=exists"
		// or "PATH=missing" for each, as the agent's process sees its
		// filesystem.
		for end := time.Now().Add(10 * time.Second); len(words) > 1 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Lstat(words[1]); err == nil {
				break
			}
		}
		var seen []string
		for _, p := range words[min(2, len(words)):] {
			state := "missing"
			if _, err := os.Lstat(p); err == nil {
				state = "exists"
			}
			seen = append(seen, p+"="+state)
		}
		return a.reply(ctx, sid, strings.Join(seen, " "))
	case behaviour == "elicit":
		form, err := a.conn.UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{Form: &acp.UnstableCreateElicitationForm{
			Mode: "form", Message: "Allow writes outside the sandbox?",
			RequestedSchema: acp.UnstableElicitationSchema{Type: "object", Properties: map[string]any{"ok": map[string]any{"type": "boolean"}}}}})
		url, uerr := a.conn.UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{Url: &acp.UnstableCreateElicitationUrl{
			Mode: "url", ElicitationId: "el-1", Message: "Log in", Url: "https://example.invalid/login"}})
		action := func(r acp.UnstableCreateElicitationResponse, err error) string {
			switch {
			case err != nil:
				return "error"
			case r.Accept != nil:
				return "accept"
			case r.Decline != nil:
				return "decline"
			case r.Cancel != nil:
				return "cancel"
			}
			return "none"
		}
		a.log.event("elicitation", map[string]any{"form": action(form, err), "url": action(url, uerr)})
		return a.reply(ctx, sid, "elicitation:"+action(form, err)+","+action(url, uerr))
	case behaviour == "foreign":
		other := acp.SessionId("sess-other")
		a.say(ctx, other, "FOREIGN TEXT")
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: other, Update: acp.StartToolCall("sub-1", "Write outside",
			acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending))})
		resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: other,
			ToolCall: acp.ToolCallUpdate{ToolCallId: "sub-1"},
			Options: []acp.PermissionOption{{Kind: acp.PermissionOptionKindAllowOnce, Name: "allow", OptionId: "allow"},
				{Kind: acp.PermissionOptionKindRejectOnce, Name: "reject", OptionId: "reject"}}})
		outcome := "error"
		if err == nil && resp.Outcome.Selected != nil {
			outcome = "selected:" + string(resp.Outcome.Selected.OptionId)
		} else if err == nil {
			outcome = "cancelled"
		}
		a.log.event("permission", map[string]any{"session": other, "outcome": outcome})
		return a.reply(ctx, sid, "root text")
	case behaviour == "foreign-mode":
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: "sess-other", Update: acp.SessionUpdate{
			CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: "bypassPermissions"}}})
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "grandchild":
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			return a.reply(ctx, sid, "grandchild error: "+err.Error())
		}
		pid := cmd.Process.Pid
		if f := os.Getenv("FAKEAGENT_PIDFILE"); f != "" {
			writePID(f, pid)
		}
		a.log.event("grandchild", map[string]any{"child": pid})
		a.say(ctx, sid, fmt.Sprintf("grandchild:%d", pid))
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "orphan":
		out, err := exec.Command("sh", "-c", "sleep 300 >/dev/null 2>&1 </dev/null & echo $!").Output()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || pid == 0 {
			return a.reply(ctx, sid, fmt.Sprintf("orphan error: %v %q", err, out))
		}
		if f := os.Getenv("FAKEAGENT_PIDFILE"); f != "" {
			writePID(f, pid)
		}
		a.log.event("orphan", map[string]any{"child": pid})
		a.say(ctx, sid, fmt.Sprintf("orphan:%d", pid))
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "escape" || behaviour == "escape-hang":
		// A descendant that leaves the agent's session and process group
		// and drops the relay's environment tag.
		cmd := exec.Command("sleep", "300")
		cmd.Env = []string{}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return a.reply(ctx, sid, "escape error: "+err.Error())
		}
		pid := cmd.Process.Pid
		if f := os.Getenv("FAKEAGENT_PIDFILE"); f != "" {
			writePID(f, pid)
		}
		a.log.event("escaped", map[string]any{"child": pid})
		if behaviour == "escape" {
			return a.reply(ctx, sid, fmt.Sprintf("escaped:%d", pid))
		}
		a.say(ctx, sid, fmt.Sprintf("escaped:%d", pid))
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "switch-mode" && len(words) > 1:
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.SessionUpdate{
			CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: acp.SessionModeId(words[1])}}})
		a.log.event("switched", map[string]any{"mode": words[1]})
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "text-mode" && len(words) > 1:
		a.say(ctx, sid, "[MODE] "+words[1])
		a.log.event("switched", map[string]any{"text_mode": words[1]})
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "switch-option" && len(words) > 1:
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.SessionUpdate{
			ConfigOptionUpdate: &acp.SessionConfigOptionUpdate{ConfigOptions: modeOption(acp.SessionConfigValueId(words[1]))}}})
		a.log.event("switched", map[string]any{"option": words[1]})
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case behaviour == "stderr-crash":
		fmt.Fprintln(os.Stderr, "Error: \x1b[31mthe model endpoint refused the key\x1b[0m")
		fmt.Fprintln(os.Stderr, "    at main (fake.js:1:1)")
		os.Exit(3)
		panic("unreachable")
	case behaviour == "mode":
		a.mu.Lock()
		m := a.mode
		a.mu.Unlock()
		return a.reply(ctx, sid, "mode:"+string(m))
	default:
		return a.reply(ctx, sid, text)
	}
}

// flood writes prebuilt session/update lines of about size bytes straight
// to stdout (the SDK's encoder would spend the time the relay is meant to
// spend) until d has passed or the turn is canceled. Nothing else writes
// to stdout meanwhile: the turn is the agent's only activity.
func (a *agent) flood(ctx context.Context, sid acp.SessionId, size int, d time.Duration) (acp.PromptResponse, error) {
	big, half := strings.Repeat("flood ", size/6), strings.Repeat("flood ", size/12)
	line := func(u acp.SessionUpdate) []byte {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": acp.ClientMethodSessionUpdate,
			"params": acp.SessionNotification{SessionId: sid, Update: u}})
		if err != nil {
			panic(err)
		}
		return append(b, '\n')
	}
	lines := [][]byte{
		line(acp.UpdateAgentMessageText(big)),
		line(acp.StartToolCall("flood-tool", half, acp.WithStartKind(acp.ToolKindEdit),
			acp.WithStartContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(half))}))),
	}
	var n, bytes int
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; n++ {
		l := lines[n%len(lines)]
		if _, err := os.Stdout.Write(l); err != nil {
			break
		}
		bytes += len(l)
	}
	a.log.event("flooded", map[string]any{"lines": n, "bytes": bytes})
	if ctx.Err() != nil {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	return a.reply(ctx, sid, fmt.Sprintf(" flooded %d lines", n))
}

// permission reports a tool call, asks permission with the options the
// behaviour names, records the answer and replies with it.
func (a *agent) permission(ctx context.Context, sid acp.SessionId, behaviour string) (acp.PromptResponse, error) {
	opt := func(kind acp.PermissionOptionKind, id string) acp.PermissionOption {
		return acp.PermissionOption{Kind: kind, Name: id, OptionId: acp.PermissionOptionId(id)}
	}
	var options []acp.PermissionOption
	switch behaviour {
	case "perm-allow-reject", "perm-abort":
		options = []acp.PermissionOption{opt(acp.PermissionOptionKindAllowOnce, "allow"), opt(acp.PermissionOptionKindRejectOnce, "reject")}
	case "perm-allow-only":
		options = []acp.PermissionOption{opt(acp.PermissionOptionKindAllowOnce, "allow"), opt(acp.PermissionOptionKindAllowAlways, "allow-always")}
	case "perm-always":
		options = []acp.PermissionOption{opt(acp.PermissionOptionKindAllowAlways, "allow-always"), opt(acp.PermissionOptionKindRejectAlways, "reject-always")}
	case "perm-dup-reject":
		options = []acp.PermissionOption{opt(acp.PermissionOptionKindAllowOnce, "go"), opt(acp.PermissionOptionKindRejectOnce, "go")}
	case "perm-dup-other":
		options = []acp.PermissionOption{opt(acp.PermissionOptionKindRejectOnce, "no"), opt(acp.PermissionOptionKindAllowOnce, "a"), opt(acp.PermissionOptionKindAllowAlways, "a")}
	default:
		options = []acp.PermissionOption{}
	}
	id := acp.ToolCallId("call-1")
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(id, "Write config.json",
		acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending))})
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: sid,
		// Title and kind deliberately omitted: the client must take them
		// from the tool call it was told about.
		ToolCall: acp.ToolCallUpdate{ToolCallId: id},
		Options:  options,
	})
	if err != nil {
		a.log.event("permission", map[string]any{"error": err.Error()})
		return a.reply(ctx, sid, "permission error: "+err.Error())
	}
	answer := "cancelled"
	status := acp.ToolCallStatusFailed
	ev := map[string]any{"outcome": "cancelled"}
	if s := resp.Outcome.Selected; s != nil {
		answer = "selected:" + string(s.OptionId)
		ev = map[string]any{"outcome": "selected", "option_id": string(s.OptionId)}
		for _, o := range options {
			if o.OptionId == s.OptionId && (o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways) {
				status = acp.ToolCallStatusCompleted
				ev["allowed"] = true
			}
		}
	}
	a.log.event("permission", ev)
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(id, acp.WithUpdateStatus(status))})
	if behaviour == "perm-abort" { // a denial aborts the turn (codex-acp)
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	return a.reply(ctx, sid, answer)
}

// modelTurn plays a real agent driven by a model: it sends the prompt to
// the chat-completions API at url (the relay's scripted model), offering
// the tools named in $FAKEAGENT_TOOLS (default write,read,edit,shell),
// runs each tool call the model makes under $FAKEAGENT_POLICY, sends the
// result back, and ends the turn with the model's text. Policies: obey
// (the default: run every call), ask (ask permission first; run only if allowed),
// refuse (run nothing, answer "refused by policy"). A call of a tool not
// offered is answered "no such tool".
func (a *agent) modelTurn(ctx context.Context, sid acp.SessionId, url, prompt string) (acp.PromptResponse, error) {
	tools := strings.Split(envOr("FAKEAGENT_TOOLS", "write,read,edit,shell"), ",")
	policy := envOr("FAKEAGENT_POLICY", "obey")
	text, err := chatTurns(ctx, url+"/v1/chat/completions", os.Getenv("FAKEAGENT_MODEL_KEY"), tools, prompt,
		func(id, name string, args map[string]any) string {
			result := a.runTool(ctx, sid, id, name, args, tools, policy)
			a.log.event("tool", map[string]any{"name": name, "result": result})
			return result
		})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return a.reply(ctx, sid, text)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// runTool runs one of modelTurn's tools: write {path, content}, read
// {path}, edit {path, old, new}, shell {command}.
func (a *agent) runTool(ctx context.Context, sid acp.SessionId, id, name string, args map[string]any, tools []string, policy string) string {
	if !slices.Contains(tools, name) {
		return "no such tool: " + name
	}
	str := func(k string) string { v, _ := args[k].(string); return v }
	if name != "read" {
		switch policy {
		case "refuse":
			return "refused by policy"
		case "ask":
			tid := acp.ToolCallId(id)
			_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(tid, name,
				acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending))})
			resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: sid,
				ToolCall: acp.ToolCallUpdate{ToolCallId: tid},
				Options: []acp.PermissionOption{{Kind: acp.PermissionOptionKindAllowOnce, Name: "allow", OptionId: "allow"},
					{Kind: acp.PermissionOptionKindRejectOnce, Name: "reject", OptionId: "reject"}}})
			if err != nil || resp.Outcome.Selected == nil || resp.Outcome.Selected.OptionId != "allow" {
				return "the user refused"
			}
		}
	}
	switch name {
	case "write":
		if err := os.WriteFile(str("path"), []byte(str("content")), 0o644); err != nil {
			return err.Error()
		}
		return "written"
	case "read":
		b, err := os.ReadFile(str("path"))
		if err != nil {
			return err.Error()
		}
		return string(b)
	case "edit":
		b, err := os.ReadFile(str("path"))
		if err != nil {
			return err.Error()
		}
		if err := os.WriteFile(str("path"), []byte(strings.Replace(string(b), str("old"), str("new"), 1)), 0o644); err != nil {
			return err.Error()
		}
		return "edited"
	case "shell":
		out, err := exec.CommandContext(ctx, "sh", "-c", str("command")).CombinedOutput()
		if err != nil {
			return err.Error() + ": " + string(out)
		}
		return "ran: " + string(out)
	}
	return "unknown tool " + name
}

// clientErr records and renders the error a client method returned.
func (a *agent) clientErr(kind string, err error) string {
	if err == nil {
		a.log.event(kind, map[string]any{"ok": true})
		return kind + " ok"
	}
	ev := map[string]any{"error": err.Error()}
	var re *acp.RequestError
	if errors.As(err, &re) {
		ev["code"] = re.Code
	}
	a.log.event(kind, ev)
	return kind + " error: " + err.Error()
}

// envNames returns the names of the variables in the agent's
// environment, sorted (never their values).
func envNames() []string {
	var names []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "zombie-leader" {
		zombieLeader(os.Args[2:])
		select {} // the other thread exits the process
	}
	a := &agent{ready: make(chan struct{}), canceled: make(chan struct{})}
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		a.startup = os.Args[1] // flags a hardening profile appends are ignored
	}
	if p := os.Getenv("FAKEAGENT_LOG"); p == "stderr" {
		// To the task's log in the relay home, where a test can read it
		// when nothing of its own is writable in the agent's sandbox.
		a.log = &eventLog{f: os.Stderr, prefix: StderrEventPrefix}
	} else if p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			os.Exit(1)
		}
		a.log = &eventLog{f: f}
	}
	env := map[string]any{}
	for _, k := range strings.Split(os.Getenv("FAKEAGENT_ENVLOG"), ",") {
		if v, ok := os.LookupEnv(k); ok && k != "" {
			env[k] = v
		}
	}
	a.log.event("start", map[string]any{"args": os.Args[1:], "env": env, "env_names": envNames()})
	if f := os.Getenv("FAKEAGENT_START_CHILD"); f != "" {
		// A child in the agent's process group from the start, for the
		// tests that check a group killed before any prompt.
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err == nil {
			if pf, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
				fmt.Fprintf(pf, "%d %d %s\n", cmd.Process.Pid, procStart(cmd.Process.Pid), pidNS(cmd.Process.Pid))
				pf.Close()
			}
		}
	}
	fmt.Fprintln(os.Stderr, "fakeagent: started", os.Args[1:])
	if a.startup == "die-first" {
		// The first of its processes to start dies before initialize, as
		// an agent racing another to create its state on a first run.
		if f, err := os.OpenFile(os.Getenv("FAKEAGENT_ONCE"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			fmt.Fprintln(os.Stderr, "fakeagent: dying first")
			os.Exit(1)
		}
	}
	impl, stdout, stdin := standIn(a) // standins.go
	conn := acp.NewAgentSideConnection(impl, stdout, stdin)
	conn.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	a.conn = conn
	close(a.ready)
	<-conn.Done()
	a.log.event("exit", nil)
}

// writePID writes pid, its start time and its pid namespace to the file
// f, as "PID START NS":
// the pid is the sandbox's namespace's (dispatchtest.HostPID).
func writePID(f string, pid int) {
	_ = os.WriteFile(f, []byte(fmt.Sprintf("%d %d %s", pid, procStart(pid), pidNS(pid))), 0o600)
}

// pidNS names the pid namespace of process pid ("pid:[INODE]"), as the
// host names it too.
func pidNS(pid int) string {
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return ns
}

// procStart returns the start time of process pid (/proc stat field 22).
func procStart(pid int) uint64 {
	st, _ := procstat.Read(pid)
	return st.Start
}

// vandal acts as an agent that never asks: it writes "x" to each PATH of
// args and sends SIGKILL to each "pid:N", without any permission request,
// and reports each outcome on a line ("wrote PATH", "killed N", or
// "failed ...: why").
func vandal(args []string) string {
	var out []string
	for _, arg := range args {
		if p, ok := strings.CutPrefix(arg, "pid:"); ok {
			pid, _ := strconv.Atoi(p)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				out = append(out, fmt.Sprintf("failed kill %d: %v", pid, err))
			} else {
				out = append(out, fmt.Sprintf("killed %d", pid))
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(arg), 0o755); err == nil || os.IsExist(err) {
			if err = os.WriteFile(arg, []byte("x"), 0o644); err == nil {
				out = append(out, "wrote "+arg)
				continue
			}
			out = append(out, fmt.Sprintf("failed %s: %v", arg, err))
			continue
		} else {
			out = append(out, fmt.Sprintf("failed %s: %v", arg, err))
		}
	}
	return strings.Join(out, "\n")
}
