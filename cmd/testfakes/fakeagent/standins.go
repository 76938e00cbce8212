package main

// Stand-ins for agents that cannot be installed where the relay is built:
// Cursor's CLI (`agent acp`, a binary from Cursor's site) and Hermes Agent
// (`hermes acp`, a Python package). Each behaves as the agent's public
// docs say it does, misbehaviour included, so that a test shows a
// profile's switches are what stops it. Chosen by the first argument:
//
// cursor: Cursor's `agent acp`. Modes agent (current), plan, ask. It
// reads $CURSOR_CONFIG_DIR/cli-config.json (else ~/.cursor/cli-config.json)
// and the cwd's .cursor/cli.json (which adds permissions), and honours
// them as Cursor does: approvalMode unrestricted runs everything without
// asking; allowlist (the default) writes files without asking and asks
// before a shell command not allowed; a deny token (Write(...),
// Shell(...)) refuses the call, reported completed. Mode plan or ask
// blocks every write; a command still asks. Its own requests
// (cursor/ask_question, ...) block until the client answers.
//
// hermes: Hermes' `hermes acp`. Modes default (current), accept_edits,
// dont_ask, plan, observe. It reads $HERMES_HOME/config.yaml (else
// ~/.hermes/config.yaml): approvals.mode and model.base_url (else
// $OPENAI_BASE_URL), and logs the file's text. It asks only
// before write_file and patch (not in accept_edits or dont_ask); it runs
// terminal commands without asking unless approvals.mode is manual, and
// execute_code unless HERMES_EXEC_ASK=1; memory writes
// $HERMES_HOME/memories/MEMORY.md without asking. Mode plan or observe
// runs none of them. With a model.base_url and a prompt that is no script,
// the turn is driven by that chat-completions endpoint (its key in
// $OPENAI_API_KEY), offering write_file, patch, read_file, terminal,
// execute_code and memory.
//
// Scripted prompts, one command a line:
//
//	write PATH TEXT...      (cursor) the Write tool
//	shell CMD...            (cursor) the Shell tool
//	ask_question TEXT...    (cursor) send cursor/ask_question and wait
//	create_plan TEXT...     (cursor) send cursor/create_plan and wait
//	write_file PATH TEXT... (hermes)
//	terminal CMD...         (hermes)
//	execute_code CMD...     (hermes; run with sh -c)
//	memory TEXT...          (hermes)
//	read PATH               (both) read a file, answer with its text
//
// Each command's result is a line of the reply; each is logged as a
// "standin" event {tool, asked, ran, result}.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// standIn returns the agent to serve and its stdout and stdin: a stand-in
// when the first argument names one, else a itself.
func standIn(a *agent) (acp.Agent, io.Writer, io.Reader) {
	switch a.startup {
	case "cursor":
		w := &lockedWriter{w: os.Stdout}
		r := newExtReader(os.Stdin)
		return &cursorAgent{agent: a, out: w, in: r}, w, r
	case "hermes":
		return &hermesAgent{agent: a}, os.Stdout, os.Stdin
	}
	return a, os.Stdout, os.Stdin
}

// lockedWriter serializes the SDK's writes with the stand-in's own raw
// requests (the SDK sends only "_" extension methods; Cursor's are not).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// extReader passes stdin to the SDK, but for the answers to the
// stand-in's own requests (ids "standin-N"), which go to their waiters.
type extReader struct {
	br      *bufio.Reader
	pending []byte
	mu      sync.Mutex
	waiters map[string]chan json.RawMessage
}

func newExtReader(r io.Reader) *extReader {
	return &extReader{br: bufio.NewReader(r), waiters: map[string]chan json.RawMessage{}}
}

func (e *extReader) Read(p []byte) (int, error) {
	for len(e.pending) == 0 {
		line, err := e.br.ReadBytes('\n')
		if len(line) > 0 && !e.take(line) {
			e.pending = line
		}
		if err != nil && len(e.pending) == 0 {
			return 0, err
		}
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	return n, nil
}

// take hands an answer to its waiter and reports whether it was one.
func (e *extReader) take(line []byte) bool {
	var m struct {
		ID     *string          `json:"id"`
		Method string           `json:"method"`
		Result json.RawMessage  `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method != "" || !strings.HasPrefix(*m.ID, "standin-") {
		return false
	}
	e.mu.Lock()
	ch := e.waiters[*m.ID]
	delete(e.waiters, *m.ID)
	e.mu.Unlock()
	if ch != nil {
		ch <- line
	}
	return true
}

var standinSeq atomic.Int64

type cursorAgent struct {
	*agent
	out *lockedWriter
	in  *extReader

	approval string   // approvalMode
	allow    []string // permissions.allow
	deny     []string // permissions.deny
}

func (c *cursorAgent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	_, _ = c.agent.Initialize(ctx, p)
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo: &acp.Implementation{Name: envOr("FAKEAGENT_NAME", "cursor-agent"), Version: envOr("FAKEAGENT_VERSION", "2026.10.22-27dcf5f")}}, nil
}

// cursorConfig is the part of Cursor's cli-config.json and .cursor/cli.json
// the stand-in reads.
type cursorConfig struct {
	ApprovalMode string `json:"approvalMode"`
	Permissions  struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
	} `json:"permissions"`
}

func (c *cursorAgent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	dir := os.Getenv("CURSOR_CONFIG_DIR")
	if dir == "" {
		dir = filepath.Join(os.Getenv("HOME"), ".cursor")
	}
	var cfg, project cursorConfig
	userErr := readJSON(filepath.Join(dir, "cli-config.json"), &cfg)
	projErr := readJSON(filepath.Join(p.Cwd, ".cursor", "cli.json"), &project)
	c.approval = cfg.ApprovalMode
	if c.approval == "" {
		c.approval = "allowlist"
	}
	c.allow = append(cfg.Permissions.Allow, project.Permissions.Allow...)
	c.deny = append(cfg.Permissions.Deny, project.Permissions.Deny...)
	c.log.event("session_new", map[string]any{"cwd": p.Cwd, "meta": p.Meta, "config_dir": dir,
		"user_config": userErr == nil, "project_config": projErr == nil, "approval": c.approval, "deny": c.deny})
	c.mu.Lock()
	c.cwd, c.mode = p.Cwd, "agent"
	c.mu.Unlock()
	return acp.NewSessionResponse{SessionId: "sess-cursor", Modes: &acp.SessionModeState{CurrentModeId: "agent",
		AvailableModes: []acp.SessionMode{{Id: "agent", Name: "Agent"}, {Id: "plan", Name: "Plan"}, {Id: "ask", Name: "Ask"}}}}, nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (c *cursorAgent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return setStandInMode(c.agent, p, "agent", "plan", "ask")
}

func (c *cursorAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, errors.New("no such option")
}

func setStandInMode(a *agent, p acp.SetSessionModeRequest, modes ...acp.SessionModeId) (acp.SetSessionModeResponse, error) {
	a.log.event("set_mode", map[string]any{"mode": p.ModeId})
	for _, m := range modes {
		if m == p.ModeId {
			a.mu.Lock()
			a.mode = m
			a.mu.Unlock()
			return acp.SetSessionModeResponse{}, nil
		}
	}
	return acp.SetSessionModeResponse{}, fmt.Errorf("no mode %q", p.ModeId)
}

func (a *agent) currentMode() acp.SessionModeId {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mode
}

// matches reports whether a Cursor permission token list has one for
// kind (Write, Shell) that matches arg.
func matches(tokens []string, kind, arg string) bool {
	for _, t := range tokens {
		inner, ok := strings.CutPrefix(t, kind+"(")
		if !ok || !strings.HasSuffix(inner, ")") {
			continue
		}
		pat := strings.TrimSuffix(inner, ")")
		if kind == "Shell" {
			pat, _, _ = strings.Cut(pat, ":")
			arg = strings.Fields(arg + " x")[0]
		}
		if pat == "**" || pat == "/**" && strings.HasPrefix(arg, "/") {
			return true
		}
		if ok, _ := path.Match(pat, arg); ok {
			return true
		}
	}
	return false
}

func (c *cursorAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	<-c.ready
	text := promptText(p)
	c.log.event("prompt", map[string]any{"text": text})
	var out []string
	for i, line := range strings.Split(text, "\n") {
		w := strings.Fields(line)
		if len(w) == 0 {
			continue
		}
		id := acp.ToolCallId(fmt.Sprintf("call-%d", i))
		rest := strings.TrimSpace(strings.TrimPrefix(line, w[0]))
		switch w[0] {
		case "write":
			out = append(out, c.write(ctx, p.SessionId, id, rest))
		case "shell":
			out = append(out, c.shell(ctx, p.SessionId, id, rest))
		case "read":
			out = append(out, readFile(rest))
		case "ask_question", "create_plan", "update_todos", "task":
			out = append(out, c.ext(ctx, "cursor/"+w[0], map[string]any{"sessionId": p.SessionId, "question": rest}))
		default:
			out = append(out, line)
		}
	}
	return c.reply(ctx, p.SessionId, strings.Join(out, "\n"))
}

func promptText(p acp.PromptRequest) string {
	for _, b := range p.Prompt {
		if b.Text != nil {
			return b.Text.Text
		}
	}
	return ""
}

func readFile(p string) string {
	b, err := os.ReadFile(strings.TrimSpace(p))
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// write is Cursor's Write tool: a deny token or mode plan/ask refuses it
// (reported completed, as Cursor does); otherwise it writes, without
// asking, in both allowlist and unrestricted.
func (c *cursorAgent) write(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, rest string) string {
	file, content, _ := strings.Cut(rest, " ")
	c.startTool(ctx, sid, id, "Write "+file, acp.ToolKindEdit)
	var res string
	switch mode := c.currentMode(); {
	case mode == "plan" || mode == "ask":
		res = "refused: edits are blocked in mode " + string(mode)
	case matches(c.deny, "Write", file):
		res = "refused: denied by permissions"
	default:
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			res = err.Error()
		} else {
			res = "written " + file
		}
	}
	c.endTool(ctx, sid, id, "Write", false, strings.HasPrefix(res, "written"), res)
	return res
}

// shell is Cursor's Shell tool: a deny token refuses it; unrestricted or
// an allow token runs it; otherwise it asks, in every mode.
func (c *cursorAgent) shell(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, cmd string) string {
	c.startTool(ctx, sid, id, "Shell "+cmd, acp.ToolKindExecute)
	asked := false
	var res string
	switch {
	case matches(c.deny, "Shell", cmd):
		res = "refused: denied by permissions"
	case c.approval == "unrestricted" || matches(c.allow, "Shell", cmd):
		res = runShell(ctx, cmd)
	default:
		asked = true
		if c.askPermission(ctx, sid, id, "allow-once", "allow-always", "reject-once") {
			res = runShell(ctx, cmd)
		} else {
			res = "rejected by the user"
		}
	}
	c.endTool(ctx, sid, id, "Shell", asked, strings.HasPrefix(res, "ran"), res)
	return res
}

func runShell(ctx context.Context, cmd string) string {
	out, err := exec.CommandContext(ctx, "sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return err.Error() + ": " + strings.TrimSpace(string(out))
	}
	return "ran: " + strings.TrimSpace(string(out))
}

func (a *agent) startTool(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, title string, kind acp.ToolKind) {
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.StartToolCall(id, title,
		acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusPending))})
}

// endTool reports the call completed, as Cursor does even for a refused
// one, and logs it.
func (a *agent) endTool(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, tool string, asked, ran bool, res string) {
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: acp.UpdateToolCall(id,
		acp.WithUpdateStatus(acp.ToolCallStatusCompleted))})
	a.log.event("standin", map[string]any{"tool": tool, "asked": asked, "ran": ran, "result": res})
}

// askPermission asks the client with the given option ids (allow ones
// first, the last a reject) and reports whether an allow one was picked.
func (a *agent) askPermission(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, opts ...string) bool {
	var options []acp.PermissionOption
	for i, o := range opts {
		kind := acp.PermissionOptionKindAllowOnce
		switch {
		case i == len(opts)-1:
			kind = acp.PermissionOptionKindRejectOnce
		case strings.Contains(o, "always"):
			kind = acp.PermissionOptionKindAllowAlways
		}
		options = append(options, acp.PermissionOption{Kind: kind, Name: o, OptionId: acp.PermissionOptionId(o)})
	}
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: sid,
		ToolCall: acp.ToolCallUpdate{ToolCallId: id}, Options: options})
	if err != nil || resp.Outcome.Selected == nil {
		return false
	}
	chosen := string(resp.Outcome.Selected.OptionId)
	return chosen != opts[len(opts)-1] && strings.HasPrefix(chosen, "allow")
}

// ext sends one of Cursor's own requests and waits for the answer, as
// Cursor blocks until it comes.
func (c *cursorAgent) ext(ctx context.Context, method string, params any) string {
	id := fmt.Sprintf("standin-%d", standinSeq.Add(1))
	ch := make(chan json.RawMessage, 1)
	c.in.mu.Lock()
	c.in.waiters[id] = ch
	c.in.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := c.out.Write(append(b, '\n')); err != nil {
		return method + ": " + err.Error()
	}
	var answer json.RawMessage
	select {
	case answer = <-ch:
	case <-ctx.Done():
		return method + ": canceled"
	case <-time.After(10 * time.Second):
		answer = json.RawMessage(`"no answer"`)
	}
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(answer, &m)
	code := 0
	if m.Error != nil {
		code = m.Error.Code
	}
	c.log.event("cursor_ext", map[string]any{"method": method, "answer": string(answer), "code": code})
	if code != 0 {
		return fmt.Sprintf("%s: declined (%d)", method, code)
	}
	return method + ": answered"
}

type hermesAgent struct {
	*agent
	approvals string // approvals.mode
	baseURL   string // model.base_url
	home      string // HERMES_HOME
}

func (h *hermesAgent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	_, _ = h.agent.Initialize(ctx, p)
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo: &acp.Implementation{Name: envOr("FAKEAGENT_NAME", "hermes-agent"), Version: envOr("FAKEAGENT_VERSION", "0.21.3")}}, nil
}

// yamlValue finds key's value in a block of a YAML file: the first
// "key:" line indented under a "section:" line at column 0. Enough for
// the stand-in, which reads what the relay writes.
func yamlValue(text, section, key string) string {
	in := false
	for _, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if l[0] != ' ' {
			in = strings.TrimSpace(l) == section+":"
			continue
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); in && ok && k == key {
			v = strings.TrimSpace(v)
			var s string
			if json.Unmarshal([]byte(v), &s) == nil {
				return s
			}
			return strings.Trim(v, `'`)
		}
	}
	return ""
}

func (h *hermesAgent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	h.home = os.Getenv("HERMES_HOME")
	if h.home == "" {
		h.home = filepath.Join(os.Getenv("HOME"), ".hermes")
	}
	b, err := os.ReadFile(filepath.Join(h.home, "config.yaml"))
	h.approvals = yamlValue(string(b), "approvals", "mode")
	if h.approvals == "" {
		h.approvals = "smart"
	}
	h.baseURL = yamlValue(string(b), "model", "base_url")
	if h.baseURL == "" {
		h.baseURL = os.Getenv("OPENAI_BASE_URL")
	}
	_, plugins := os.Stat(filepath.Join(p.Cwd, ".hermes", "plugins"))
	h.log.event("session_new", map[string]any{"cwd": p.Cwd, "meta": p.Meta, "hermes_home": h.home, "config": err == nil, "config_text": string(b),
		"approvals": h.approvals, "base_url": h.baseURL, "exec_ask": os.Getenv("HERMES_EXEC_ASK"),
		"skip_mcp": os.Getenv("HERMES_ACP_SKIP_CONFIGURED_MCP"), "project_plugins": plugins == nil && os.Getenv("HERMES_ENABLE_PROJECT_PLUGINS") != ""})
	h.mu.Lock()
	h.cwd, h.mode = p.Cwd, "default"
	h.mu.Unlock()
	return acp.NewSessionResponse{SessionId: "sess-hermes", Modes: &acp.SessionModeState{CurrentModeId: "default",
		AvailableModes: []acp.SessionMode{{Id: "default", Name: "Default"}, {Id: "accept_edits", Name: "Accept edits"},
			{Id: "dont_ask", Name: "Don't ask"}, {Id: "plan", Name: "Plan"}, {Id: "observe", Name: "Observe"}}}}, nil
}

func (h *hermesAgent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return setStandInMode(h.agent, p, "default", "accept_edits", "dont_ask", "plan", "observe")
}

func (h *hermesAgent) SetSessionConfigOption(_ context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil // unknown ids are accepted silently, as Hermes does
}

var hermesScript = map[string]bool{"write_file": true, "terminal": true, "execute_code": true, "memory": true, "read": true}

func (h *hermesAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	<-h.ready
	text := promptText(p)
	h.log.event("prompt", map[string]any{"text": text})
	if first := strings.Fields(text); h.baseURL != "" && (len(first) == 0 || !hermesScript[first[0]]) {
		return h.modelDriven(ctx, p.SessionId, text)
	}
	var out []string
	for i, line := range strings.Split(text, "\n") {
		w := strings.Fields(line)
		if len(w) == 0 {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(line, w[0]))
		var args map[string]any
		switch w[0] {
		case "write_file":
			file, content, _ := strings.Cut(rest, " ")
			args = map[string]any{"path": file, "content": content}
		case "terminal", "execute_code":
			args = map[string]any{"command": rest, "code": rest}
		case "memory":
			args = map[string]any{"content": rest}
		case "read":
			w[0], args = "read_file", map[string]any{"path": rest}
		default:
			out = append(out, line)
			continue
		}
		out = append(out, h.tool(ctx, p.SessionId, acp.ToolCallId(fmt.Sprintf("call-%d", i)), w[0], args))
	}
	return h.reply(ctx, p.SessionId, strings.Join(out, "\n"))
}

// tool runs one of Hermes' tools as Hermes would.
func (h *hermesAgent) tool(ctx context.Context, sid acp.SessionId, id acp.ToolCallId, name string, args map[string]any) string {
	str := func(k string) string { v, _ := args[k].(string); return v }
	mode := h.currentMode()
	kind := map[string]acp.ToolKind{"write_file": acp.ToolKindEdit, "patch": acp.ToolKindEdit, "read_file": acp.ToolKindRead,
		"terminal": acp.ToolKindExecute, "execute_code": acp.ToolKindExecute, "memory": acp.ToolKindOther}[name]
	if kind == "" {
		return "unknown tool " + name
	}
	h.startTool(ctx, sid, id, name, kind)
	ask := false
	switch name {
	case "write_file", "patch":
		ask = mode != "accept_edits" && mode != "dont_ask"
	case "terminal":
		ask = h.approvals == "manual"
	case "execute_code":
		ask = os.Getenv("HERMES_EXEC_ASK") == "1"
	}
	var res string
	switch {
	case name != "read_file" && (mode == "plan" || mode == "observe"):
		res = "blocked: mode " + string(mode) + " does not run " + name
	case ask && !h.askPermission(ctx, sid, id, "allow_once", "allow_always", "deny"):
		res = "the user denied " + name
	default:
		res = h.run(ctx, name, str)
	}
	ran := res != "" && !strings.HasPrefix(res, "blocked") && !strings.HasPrefix(res, "the user denied")
	h.endTool(ctx, sid, id, name, ask, ran, res)
	return res
}

func (h *hermesAgent) run(ctx context.Context, name string, str func(string) string) string {
	switch name {
	case "read_file":
		return readFile(str("path"))
	case "write_file":
		if err := os.WriteFile(str("path"), []byte(str("content")), 0o644); err != nil {
			return err.Error()
		}
		return "wrote " + str("path")
	case "patch":
		b, err := os.ReadFile(str("path"))
		if err != nil {
			return err.Error()
		}
		if err := os.WriteFile(str("path"), bytes.Replace(b, []byte(str("old_string")), []byte(str("new_string")), 1), 0o644); err != nil {
			return err.Error()
		}
		return "patched " + str("path")
	case "terminal":
		return runShell(ctx, str("command"))
	case "execute_code":
		return runShell(ctx, str("code"))
	case "memory":
		dir := filepath.Join(h.home, "memories")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err.Error()
		}
		f, err := os.OpenFile(filepath.Join(dir, "MEMORY.md"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err.Error()
		}
		defer f.Close()
		_, _ = fmt.Fprintln(f, str("content"))
		return "remembered in " + f.Name()
	}
	return "unknown tool " + name
}

// modelDriven runs the turn against the chat-completions endpoint of
// Hermes' config (the relay's scripted model in a verification).
func (h *hermesAgent) modelDriven(ctx context.Context, sid acp.SessionId, prompt string) (acp.PromptResponse, error) {
	tools := []string{"write_file", "patch", "read_file", "terminal", "execute_code", "memory"}
	text, err := chatTurns(ctx, strings.TrimSuffix(h.baseURL, "/")+"/chat/completions", os.Getenv("OPENAI_API_KEY"), tools, prompt,
		func(id, name string, args map[string]any) string {
			return h.tool(ctx, sid, acp.ToolCallId(id), name, args)
		})
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return h.reply(ctx, sid, text)
}
