package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/modelserver"
	"github.com/hai-relay/relay/dispatch/verify"
	"github.com/hai-relay/relay/model"
)

// Real Claude Code (@anthropic-ai/claude-code, pinned in interop/) as the
// relay's MCP client, the way a user runs it: interactive in a terminal,
// and `claude -p`. Its model is the scripted server, so the "model" calls
// submit_task exactly as the prompt says and the test reads every turn
// Claude Code sends it.

// claudeCodeKey is the API key the tests give Claude Code; the scripted
// server does not check it, Claude Code's own approval list does.
const claudeCodeKey = "sk-ant-relay-test-0123456789abcdefghij"

// claudeCode is one Claude Code installation under test: its executable,
// a fresh HOME that has done the first run (onboarding, the API key
// approved, the project directory trusted), and an MCP config that runs
// this relay's facade as claude.
type claudeCode struct {
	exe, home, project, mcpConfig string
	model                         *modelserver.Server
}

func newClaudeCode(t *testing.T, bin, relayHome, project string, model *modelserver.Server) *claudeCode {
	t.Helper()
	exe, err := filepath.EvalSymlinks(filepath.Join(bin, "claude"))
	if err != nil {
		t.Fatalf("Claude Code is not installed in interop/ (%v): run ./scripts/test", err)
	}
	base := t.TempDir()
	c := &claudeCode{exe: exe, home: filepath.Join(base, "home"), project: project,
		mcpConfig: filepath.Join(base, "mcp.json"), model: model}
	if err := os.MkdirAll(c.home, 0o700); err != nil {
		t.Fatal(err)
	}
	state := map[string]any{
		"hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.332", "theme": "dark",
		"customApiKeyResponses": map[string]any{"approved": []string{claudeCodeKey[len(claudeCodeKey)-20:]}, "rejected": []string{}},
		"projects":              map[string]any{c.project: map[string]any{"hasTrustDialogAccepted": true}},
	}
	cfg := map[string]any{"mcpServers": map[string]any{"relay": map[string]any{
		"type": "stdio", "command": relayBin, "args": []string{"mcp", "--as", "claude", "--home", relayHome, "--no-autostart"}}}}
	for path, v := range map[string]any{filepath.Join(c.home, ".claude.json"): state, c.mcpConfig: cfg} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// command is Claude Code with args, offline but for the scripted model.
func (c *claudeCode) command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.exe, append([]string{"--mcp-config", c.mcpConfig, "--strict-mcp-config",
		"--allowedTools", "mcp__relay__submit_task", "mcp__relay__get_task"}, args...)...)
	cmd.Dir = c.project
	cmd.Env = []string{"HOME=" + c.home, "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color",
		"ANTHROPIC_BASE_URL=" + c.model.URL(), "ANTHROPIC_API_KEY=" + claudeCodeKey, "IS_SANDBOX=1",
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"NO_PROXY=127.0.0.1,localhost", "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
	return cmd
}

// waitTurn waits until the scripted model has had a request whose user
// text contains every one of want, and returns that text.
func (c *claudeCode) waitTurn(t *testing.T, d time.Duration, screen func() string, want ...string) modelserver.Request {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		for _, r := range c.model.Requests() {
			text := strings.Join(r.Turn.UserText, "\n")
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(text, w)
			}
			if ok {
				return r
			}
		}
		if time.Now().After(deadline) {
			var turns []string
			for _, r := range c.model.Requests() {
				turns = append(turns, fmt.Sprintf("user %q → results %q", r.Turn.UserText, r.Turn.ToolResults))
			}
			t.Fatalf("no turn of Claude Code's carried %q within %s\nturns:\n%s\nscreen:\n%s", want, d, strings.Join(turns, "\n"), screen())
		}
	}
}

// A terminal for an interactive program: a pseudo-terminal of a fixed
// size whose output is kept, ANSI sequences removed, for the test to read.
type terminal struct {
	ptm  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]`)

// startInTerminal starts cmd on a new pseudo-terminal of cols×rows, as its
// controlling terminal. Cleanup kills it.
func startInTerminal(t *testing.T, cmd *exec.Cmd, cols, rows uint16) *terminal {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlockpt: %v", e)
	}
	n, err := unix.IoctlGetUint32(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(ptm.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatalf("set the window size: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pts: %v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	_ = pts.Close()
	term := &terminal{ptm: ptm, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 64<<10)
		for {
			n, err := ptm.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = ptm.Close()
		<-term.done
	})
	return term
}

// screen is everything the program wrote, without ANSI sequences.
func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return ansi.ReplaceAllString(term.out.String(), "")
}

// waitFor waits until the screen shows s.
func (term *terminal) waitFor(t *testing.T, d time.Duration, s string) {
	t.Helper()
	for deadline := time.Now().Add(d); !strings.Contains(term.screen(), s); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q within %s:\n%s", s, d, term.screen())
		}
	}
}

// typeLine types text, then Enter on its own, as a user does.
func (term *terminal) typeLine(t *testing.T, text string) {
	t.Helper()
	if _, err := term.ptm.WriteString(text); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // Claude Code takes a fast burst as a paste
	if _, err := term.ptm.WriteString("\r"); err != nil {
		t.Fatal(err)
	}
}

// Delegation as a round trip, with real Claude Code 2.1 delegating to the
// real Codex (codex-acp 2.x) through the relay: interactive, Claude Code
// declares the MCP tasks extension, so submit_task answers with a task
// handle; Claude Code moves the call to the background, its model's turn
// ends, and when Codex's read_only task completes Claude Code starts a
// turn of its own that carries Codex's answer. Nobody polls by hand, and
// the audit log holds the MCP task's life. `claude -p` does not declare
// the extension and gets the synchronous answer it always got.
func TestRealClaudeCodeMCPTasks(t *testing.T) {
	t.Parallel()
	bin, model := requireRealAgents(t), startScripted(t)
	rd := startRealDaemon(t, bin, model, []*realAgent{codexNext}, clean)
	// Claude Code's project is the delegate's cwd, with the file Codex is
	// asked to review.
	p := newAttemptPaths(t, rd.tasks)
	cc := newClaudeCode(t, bin, rd.home, p.Cwd, model)

	tag := nonce("codex")
	read, _ := verify.Script(codexNext.profile().Verify.Vocab, "read-control", p)
	delegate := scriptedPrompt(tag, read+"\n[[say codex reviewed it]]")
	submit := modelserver.ToolStep("mcp__relay__submit_task", map[string]any{
		"target": "codex", "prompt": delegate, "mission_id": "M-cc", "lease_id": "S-cc"})

	t.Run("interactive", func(t *testing.T) {
		term := startInTerminal(t, cc.command(), 180, 50)
		term.waitFor(t, 90*time.Second, "shift+tab to cycle")
		term.typeLine(t, submit+" [[say delegated to codex]]")

		// The call came back at once as a background task bound to the
		// relay task, while Codex still worked, and the turn ended.
		var id string
		started := regexp.MustCompile(`started server-side task (T-[0-9A-Z]+)`)
		for deadline := time.Now().Add(60 * time.Second); id == ""; time.Sleep(100 * time.Millisecond) {
			for _, r := range model.Requests() {
				for _, res := range r.Turn.ToolResults {
					if m := started.FindStringSubmatch(res); m != nil {
						id = m[1]
					}
				}
			}
			if id == "" && time.Now().After(deadline) {
				t.Fatalf("no tool result said the call moved to the background\nscreen:\n%s", term.screen())
			}
		}

		// Claude Code's own turn, with Codex's answer: the model's words
		// and the token of the file it read.
		turn := cc.waitTurn(t, 4*time.Minute, term.screen, "<task-notification>", id, "<status>completed</status>", "codex reviewed it")
		note := strings.Join(turn.Turn.UserText, "\n")
		// The round trip: from the task's end to Claude Code's next model
		// request (BENCHMARKS.md, "The delegator's round trip"). Measured,
		// not asserted: a timed unit test on a 2-core machine is noise.
		var show struct {
			Events []struct {
				To string    `json:"to"`
				At time.Time `json:"at"`
			} `json:"events"`
		}
		cliJSON(t, rd.home, &show, "tasks", "show", id)
		if n := len(show.Events); n > 0 && show.Events[n-1].To == "completed" {
			t.Logf("round trip: the task ended %s, Claude Code's turn with its end began %s later",
				show.Events[n-1].At.Format(time.RFC3339Nano), turn.At.Sub(show.Events[n-1].At).Round(time.Millisecond))
		}
		if !strings.Contains(note, p.Token) || !strings.Contains(note, `"state":"completed"`) || !strings.Contains(note, `"target":"codex"`) {
			t.Errorf("the notification turn does not carry Codex's completed answer and the file's token %s:\n%s", p.Token, note)
		}
		if v := dispatchtest.Violations(p); len(v) > 0 {
			t.Errorf("the read_only task changed the disk: %v", v)
		}
		// The audit log: the handle was given before the task ended, and
		// the end was delivered once.
		kinds := auditKinds(t, rd.home, id)
		created, ended, delivered := slices.Index(kinds, "mcp.task.created"), slices.Index(kinds, "task.completed"), slices.Index(kinds, "mcp.task.delivered")
		if created < 0 || ended < created || delivered < ended || countAudit(t, rd.home, "mcp.task.delivered", id) != 1 {
			t.Errorf("audit of %s: %v; want mcp.task.created, then the task's end, then one mcp.task.delivered", id, kinds)
		}
	})

	t.Run("print", func(t *testing.T) {
		out, err := cc.command("-p", submit+" [[say done]]").CombinedOutput()
		if err != nil {
			t.Fatalf("claude -p: %v\n%s", err, out)
		}
		// The tool result is the task itself, as submit_task always gave.
		if !strings.Contains(string(out), `"task_id":"T-`) || strings.Contains(string(out), "server-side task") {
			t.Errorf("claude -p: want the synchronous submit_task answer:\n%s", out)
		}
	})
}

// auditKinds is the kinds of a task's audit rows in order, the final
// transition named task.STATE.
func auditKinds(t *testing.T, home, taskID string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "relay.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT kind, data FROM audit_log WHERE task_id = ? ORDER BY seq`, taskID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var kind, payload string
		if err := rows.Scan(&kind, &payload); err != nil {
			t.Fatal(err)
		}
		var p struct{ To model.State }
		if kind == "task.transition" && json.Unmarshal([]byte(payload), &p) == nil && p.To.Terminal() {
			kind = "task." + string(p.To)
		}
		kinds = append(kinds, kind)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return kinds
}
