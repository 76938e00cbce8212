package dispatch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/hai-relay/relay/dispatch/acpwire"
	"github.com/hai-relay/relay/model"
)

// Bounds on what a run keeps of the agent's output.
const (
	// maxResultBytes bounds the kept agent message text.
	maxResultBytes = acpwire.TextBytes
	// maxToolCalls bounds the kept tool calls (by distinct id).
	maxToolCalls = 500
	// maxToolField bounds each kept tool-call field (id, title, kind,
	// status) and a denial's title and kind: an agent's output, not its
	// free text, so a hostile agent cannot make one task's record huge.
	maxToolField = 512
	// maxQueuedDenials bounds denials waiting to be reported; beyond it
	// they are still denied, and logged, but not reported one by one.
	maxQueuedDenials = 4096
)

// client is the relay's acp.Client: deny-all, no fs, no terminal, and a
// SessionUpdate that never blocks. One per agent process.
//
// The zero value is usable (policy.go calls its fs and terminal handlers
// to derive the policy).
type client struct {
	// onUpdate, when set, is called (non-blocking) after every session
	// update; the stdout limiter uses it for flow control.
	onUpdate func()
	// awaitUpdates, when set, waits until the session updates received
	// before now have been processed (see acpwire.Limiter.AwaitProcessed).
	awaitUpdates func()
	// note writes a line to the task log; nil discards.
	note func(format string, args ...any)
	// modeText is the prefix of message chunks that report a mode change
	// (Rule.ModeText); "" when the agent uses current_mode_update only.
	modeText string

	mu           sync.Mutex
	text         strings.Builder
	truncated    bool
	tools        []model.ToolCall
	toolIdx      map[string]int
	toolsDropped int // updates about tool calls not kept
	denials      []model.Denial
	denialCount  int
	denialDrop   int
	denialSignal chan struct{}
	modes        modeState
	modeGuard    func(modeState) // called with every mode or option change once armed
	// sid is the session the relay opened ("" until session/new
	// answered); foreign records the other session ids the agent used,
	// and onForeign, when set, is called (once per id, not under mu)
	// when one appears.
	sid       acp.SessionId
	foreign   map[acp.SessionId]bool
	onForeign func(acp.SessionId)
}

var _ acp.Client = (*client)(nil)

// The unstable elicitation methods are answered too (acp.ClientExperimental
// would make the SDK route them here; without them it answers method not
// found): every elicitation is declined.
var _ interface {
	UnstableCreateElicitation(context.Context, acp.UnstableCreateElicitationRequest) (acp.UnstableCreateElicitationResponse, error)
	UnstableCompleteElicitation(context.Context, acp.UnstableCompleteElicitationNotification) error
} = (*client)(nil)

func newClient(note func(string, ...any)) *client {
	return &client{note: note, toolIdx: map[string]int{}, denialSignal: make(chan struct{}, 1)}
}

func (c *client) logf(format string, args ...any) {
	if c != nil && c.note != nil {
		c.note(format, args...)
	}
}

// RequestPermission answers at once with the deny-all decision and queues
// the denial for reporting.
func (c *client) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	outcome, optionID := decidePermission(p.Options)
	d := model.Denial{OptionID: model.Clip(string(optionID), maxToolField), Outcome: outcomeCancelled}
	if outcome.Selected != nil {
		d.Outcome = outcomeSelected
	}
	if p.ToolCall.Title != nil {
		d.ToolCallTitle = model.Clip(*p.ToolCall.Title, maxToolField)
	}
	if p.ToolCall.Kind != nil {
		d.ToolCallKind = model.Clip(string(*p.ToolCall.Kind), maxToolField)
	}
	callID := model.Clip(string(p.ToolCall.ToolCallId), maxToolField)
	if (d.ToolCallTitle == "" || d.ToolCallKind == "") && c.awaitUpdates != nil && !c.knowsTool(callID) {
		c.awaitUpdates() // the tool_call update may still be queued
	}
	foreign := c.noteSession(p.SessionId)
	c.mu.Lock()
	if i, ok := c.toolIdx[callID]; ok {
		if d.ToolCallTitle == "" {
			d.ToolCallTitle = c.tools[i].Title
		}
		if d.ToolCallKind == "" {
			d.ToolCallKind = c.tools[i].Kind
		}
		c.tools[i].Denied = true
	} else if callID != "" && !foreign {
		c.upsertTool(callID, &d.ToolCallTitle, &d.ToolCallKind, nil)
		if i, ok := c.toolIdx[callID]; ok {
			c.tools[i].Denied = true
		}
	}
	if foreign {
		d.ToolCallTitle = model.Clip("[session "+string(p.SessionId)+" not opened by the relay] "+d.ToolCallTitle, maxToolField)
	}
	c.mu.Unlock()
	c.queueDenial(d)
	c.logf("permission denied: tool call %q (%s), answer %s %s", d.ToolCallTitle, d.ToolCallKind, d.Outcome, d.OptionID)
	return acp.RequestPermissionResponse{Outcome: outcome}, nil
}

// queueDenial counts a denial and queues it for reporting.
func (c *client) queueDenial(d model.Denial) {
	c.mu.Lock()
	c.denialCount++
	queued := len(c.denials) < maxQueuedDenials
	if queued {
		c.denials = append(c.denials, d)
	} else {
		c.denialDrop++
	}
	c.mu.Unlock()
	if queued {
		select {
		case c.denialSignal <- struct{}{}:
		default:
		}
	}
}

// Outcomes of what the relay refuses that is not a permission request.
const (
	outcomeDeclined = "declined" // an elicitation, an extension request
	outcomeRefused  = "refused"  // a session the relay did not open
)

// clientMethods are the requests an agent may send the relay's client;
// the SDK answers any other with method not found, without calling it.
var clientMethods = map[string]bool{
	acp.ClientMethodSessionRequestPermission: true, acp.ClientMethodSessionUpdate: true,
	acp.ClientMethodFsReadTextFile: true, acp.ClientMethodFsWriteTextFile: true,
	acp.ClientMethodTerminalCreate: true, acp.ClientMethodTerminalKill: true, acp.ClientMethodTerminalOutput: true,
	acp.ClientMethodTerminalRelease: true, acp.ClientMethodTerminalWaitForExit: true,
	acp.ClientMethodElicitationCreate: true, acp.ClientMethodElicitationComplete: true,
}

// noteRequest records a request the relay's client does not serve as a
// denial: an agent's own extension request (Cursor's cursor/ask_question,
// cursor/create_plan, cursor/update_todos, cursor/task, "_" methods, MCP
// over ACP), which blocks the agent until it is answered. The SDK answers
// it at once with method not found, the relay's no. Called by the
// stdout limiter for every request, before the SDK sees it.
func (c *client) noteRequest(method string) {
	if clientMethods[method] {
		return
	}
	d := model.Denial{ToolCallTitle: model.Clip("agent request "+sanitizeLine(method), maxToolField),
		ToolCallKind: "extension", Outcome: outcomeDeclined}
	c.queueDenial(d)
	c.logf("declined the agent's request %q: not served by the relay (answered method not found)", sanitizeLine(method))
}

// UnstableCreateElicitation declines: the relay puts no question to any
// user, and answers none for one. The request is recorded as denied.
func (c *client) UnstableCreateElicitation(_ context.Context, p acp.UnstableCreateElicitationRequest) (acp.UnstableCreateElicitationResponse, error) {
	what := "form"
	msg := ""
	switch {
	case p.Form != nil:
		msg = p.Form.Message
	case p.Url != nil:
		what, msg = "url", p.Url.Message+" ("+p.Url.Url+")"
	}
	d := model.Denial{ToolCallTitle: model.Clip("elicitation ("+what+"): "+sanitizeLine(msg), maxToolField),
		ToolCallKind: "elicitation", Outcome: outcomeDeclined}
	c.queueDenial(d)
	c.logf("elicitation declined: %q", d.ToolCallTitle)
	return acp.UnstableCreateElicitationResponse{Decline: &acp.UnstableCreateElicitationDecline{}}, nil
}

// UnstableCompleteElicitation only logs: no elicitation was ever accepted.
func (c *client) UnstableCompleteElicitation(_ context.Context, p acp.UnstableCompleteElicitationNotification) error {
	c.logf("elicitation %q reported complete; the relay declined every elicitation", p.ElicitationId)
	return nil
}

// setSession records the session the relay opened: updates and requests
// for any other are the agent's own sessions (subagents), refused.
func (c *client) setSession(sid acp.SessionId) {
	c.mu.Lock()
	c.sid = sid
	c.mu.Unlock()
}

// noteSession reports whether id is a session the relay did not open; the
// first time it sees one it records a refusal and calls onForeign.
func (c *client) noteSession(id acp.SessionId) bool {
	c.mu.Lock()
	if c.sid == "" || id == c.sid || id == "" {
		c.mu.Unlock()
		return false
	}
	first := !c.foreign[id]
	if first {
		if c.foreign == nil {
			c.foreign = map[acp.SessionId]bool{}
		}
		c.foreign[id] = true
	}
	on := c.onForeign
	c.mu.Unlock()
	if first {
		c.queueDenial(model.Denial{ToolCallTitle: model.Clip("session "+string(id)+" (not opened by the relay)", maxToolField),
			ToolCallKind: "session", Outcome: outcomeRefused})
		c.logf("refused session %q: the relay opened only %q; its updates are not kept, its requests are denied", id, c.sid)
		if on != nil {
			on(id)
		}
	}
	return true
}

func (c *client) knowsTool(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.toolIdx[id]
	return ok
}

// denied returns how many permission requests were denied.
func (c *client) denied() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.denialCount
}

// takeDenials returns and clears the queued denials.
func (c *client) takeDenials() []model.Denial {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := c.denials
	c.denials = nil
	return ds
}

// SessionUpdate keeps the agent's message text and its tool calls' titles,
// kinds and statuses. It never blocks: a mutex and an append. Thoughts are
// dropped unread; nothing else is mirrored.
func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	if c.onUpdate != nil {
		defer c.onUpdate()
	}
	u := n.Update
	if c.noteSession(n.SessionId) {
		// A session the relay did not open: nothing of it is kept, but a
		// mode change in it is as unsafe as one in the relay's own.
		if u.CurrentModeUpdate != nil || u.ConfigOptionUpdate != nil {
			c.mu.Lock()
			g := c.modeGuard
			st := c.modes.clone()
			c.mu.Unlock()
			if g != nil {
				st.foreignMode = string(n.SessionId)
				g(st)
			}
		}
		return nil
	}
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil {
			if c.modeText != "" && strings.HasPrefix(t.Text, c.modeText) {
				id := acp.SessionModeId(strings.TrimSpace(strings.TrimPrefix(t.Text, c.modeText)))
				c.logf("the agent reports session mode %q (in its message text)", id)
				c.updateModes(func(m *modeState) { m.mode, m.hasMode = id, true })
				return nil
			}
			c.mu.Lock()
			c.appendText(t.Text)
			c.mu.Unlock()
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		c.mu.Lock()
		c.upsertTool(string(tc.ToolCallId), &tc.Title, (*string)(&tc.Kind), (*string)(&tc.Status))
		c.mu.Unlock()
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		c.mu.Lock()
		c.upsertTool(string(tu.ToolCallId), tu.Title, (*string)(tu.Kind), (*string)(tu.Status))
		c.mu.Unlock()
	case u.CurrentModeUpdate != nil:
		id := u.CurrentModeUpdate.CurrentModeId
		c.logf("the agent reports session mode %q", id)
		c.updateModes(func(m *modeState) { m.mode, m.hasMode = id, true })
	case u.ConfigOptionUpdate != nil:
		opts := u.ConfigOptionUpdate.ConfigOptions
		c.logf("the agent reports new config option values")
		c.updateModes(func(m *modeState) { m.setOptions(opts) })
	default:
		// AgentThoughtChunk (never kept), UserMessageChunk, Plan, commands,
		// session info and usage: not part of the result.
	}
	return nil
}

// updateModes applies a change to the session's mode state and runs the
// armed guard on the result.
func (c *client) updateModes(f func(*modeState)) {
	c.mu.Lock()
	f(&c.modes)
	st := c.modes.clone()
	g := c.modeGuard
	c.mu.Unlock()
	if g != nil {
		g(st)
	}
}

// setModeState sets the mode state from session/new's answer.
func (c *client) setModeState(st modeState) {
	c.updateModes(func(m *modeState) { *m = st.clone() })
}

// setMode records a session/set_mode the agent accepted; the mode config
// option, when the agent has one, follows (its update may come later).
func (c *client) setMode(id acp.SessionModeId) {
	c.updateModes(func(m *modeState) {
		m.mode, m.hasMode = id, true
		if _, ok := m.options[modeOptionID]; ok {
			m.options[modeOptionID] = acp.SessionConfigValueId(id)
		}
	})
}

// setOptions records config option values the agent answered with.
func (c *client) setOptions(opts []acp.SessionConfigOption) {
	c.updateModes(func(m *modeState) { m.setOptions(opts) })
}

// modeState returns a copy of the session's mode state.
func (c *client) modeState() modeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modes.clone()
}

// armModeGuard installs g, called with every later change of the mode
// state, and returns the state as it is when g takes over.
func (c *client) armModeGuard(g func(modeState)) modeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modeGuard = g
	return c.modes.clone()
}

// appendText appends s within maxResultBytes, cutting on a rune boundary.
// c.mu is held.
func (c *client) appendText(s string) {
	if c.truncated {
		return
	}
	room := maxResultBytes - c.text.Len()
	if len(s) > room {
		cut := room
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
		c.truncated = true
	}
	c.text.WriteString(s)
}

// upsertTool records a tool call by id, within maxToolCalls. c.mu is held.
func (c *client) upsertTool(id string, title, kind, status *string) {
	id = model.Clip(id, maxToolField)
	i, ok := c.toolIdx[id]
	if !ok {
		if len(c.tools) >= maxToolCalls {
			c.toolsDropped++
			return
		}
		if c.toolIdx == nil {
			c.toolIdx = map[string]int{}
		}
		c.tools = append(c.tools, model.ToolCall{ID: id})
		i = len(c.tools) - 1
		c.toolIdx[id] = i
	}
	tc := &c.tools[i]
	if title != nil && *title != "" {
		tc.Title = model.Clip(*title, maxToolField)
	}
	if kind != nil && *kind != "" {
		tc.Kind = model.Clip(*kind, maxToolField)
	}
	if status != nil && *status != "" {
		tc.Status = model.Clip(*status, maxToolField)
	}
}

// result returns what the run keeps.
func (c *client) result() (model.TaskResult, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := model.TaskResult{Text: c.text.String()}
	if len(c.tools) > 0 {
		res.ToolCalls = append([]model.ToolCall(nil), c.tools...)
	}
	var notes []string
	if c.truncated {
		notes = append(notes, fmt.Sprintf("reply truncated to %d KiB", maxResultBytes>>10))
	}
	if c.toolsDropped > 0 {
		notes = append(notes, fmt.Sprintf("tool calls beyond the first %d not kept", maxToolCalls))
	}
	if c.denialDrop > 0 {
		notes = append(notes, fmt.Sprintf("%d denial(s) not reported individually (see the task log)", c.denialDrop))
	}
	return res, strings.Join(notes, "; ")
}

// refuse is the answer to every fs and terminal request: they were not
// advertised.
func (c *client) refuse(method string) error {
	c.logf("refused %s: not advertised by the relay", method)
	return acp.NewMethodNotFound(method)
}

// ReadTextFile refuses: fs was not advertised.
func (c *client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, c.refuse(acp.ClientMethodFsReadTextFile)
}

// WriteTextFile refuses: fs was not advertised.
func (c *client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, c.refuse(acp.ClientMethodFsWriteTextFile)
}

// CreateTerminal refuses: terminal was not advertised.
func (c *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, c.refuse(acp.ClientMethodTerminalCreate)
}

// KillTerminal refuses: terminal was not advertised.
func (c *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, c.refuse(acp.ClientMethodTerminalKill)
}

// TerminalOutput refuses: terminal was not advertised.
func (c *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, c.refuse(acp.ClientMethodTerminalOutput)
}

// ReleaseTerminal refuses: terminal was not advertised.
func (c *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, c.refuse(acp.ClientMethodTerminalRelease)
}

// WaitForTerminalExit refuses: terminal was not advertised.
func (c *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, c.refuse(acp.ClientMethodTerminalWaitForExit)
}
