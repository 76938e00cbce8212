package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/dispatch/scripted"
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
// approved, the project trusted), a project directory, and an MCP config
// that runs this relay's facade as claude.
type claudeCode struct {
	exe, home, project, mcpConfig string
	model                         *scripted.Server
}

func newClaudeCode(t *testing.T, relayHome string, model *scripted.Server) *claudeCode {
	t.Helper()
	bin := requireRealAgents(t)
	exe, err := filepath.EvalSymlinks(filepath.Join(bin, "claude"))
	if err != nil {
		t.Fatalf("Claude Code is not installed in interop/ (%v): run ./scripts/test", err)
	}
	base := t.TempDir()
	c := &claudeCode{exe: exe, home: filepath.Join(base, "home"), project: filepath.Join(base, "project"),
		mcpConfig: filepath.Join(base, "mcp.json"), model: model}
	for _, d := range []string{c.home, c.project} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
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
func (c *claudeCode) waitTurn(t *testing.T, d time.Duration, screen func() string, want ...string) string {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		for _, r := range c.model.Requests() {
			text := strings.Join(r.Turn.UserText, "\n")
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(text, w)
			}
			if ok {
				return text
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

// Delegation as a round trip, with real Claude Code 2.1: interactive, it
// declares the MCP tasks extension, so submit_task answers with a task
// handle; Claude Code moves the call to the background, its model's turn
// ends, and when the relay task completes Claude Code starts a turn of its
// own that carries the delegate's result. Nobody polls by hand. `claude
// -p` does not declare the extension and gets the synchronous answer it
// always got.
func TestRealClaudeCodeMCPTasks(t *testing.T) {
	t.Parallel()
	home := newHome(t, fullConfig(t, "allow-guarded", ""))
	launchDaemon(t, home)
	model := startScripted(t)
	cc := newClaudeCode(t, home, model)

	submit := func(prompt string) string {
		return scripted.ToolStep("mcp__relay__submit_task", map[string]any{
			"target": "codex", "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1"})
	}

	t.Run("interactive", func(t *testing.T) {
		term := startInTerminal(t, cc.command(), 180, 50)
		term.waitFor(t, 90*time.Second, "shift+tab to cycle")
		// The delegate takes 6 s: far longer than a tool call's answer.
		term.typeLine(t, submit("after 6s the answer is 42")+" [[say delegated]]")

		// The call came back at once as a background task bound to the
		// relay task, and the turn ended.
		first := cc.waitTurn(t, 60*time.Second, term.screen, "after 6s the answer is 42")
		var id string
		for deadline := time.Now().Add(30 * time.Second); id == ""; time.Sleep(100 * time.Millisecond) {
			for _, r := range model.Requests() {
				for _, res := range r.Turn.ToolResults {
					if m := regexp.MustCompile(`started server-side task (T-[0-9A-Z]+)`).FindStringSubmatch(res); m != nil {
						id = m[1]
					}
				}
			}
			if id == "" && time.Now().After(deadline) {
				t.Fatalf("the tool result never said the call moved to the background\nfirst turn: %q\nscreen:\n%s", first, term.screen())
			}
		}
		if st := shownState(t, home, id); st == "completed" {
			t.Fatalf("relay task %s had already completed when the call returned; the test proves nothing", id)
		}

		// Claude Code's own turn, with the result.
		note := cc.waitTurn(t, 90*time.Second, term.screen, "<task-notification>", id, "<status>completed</status>", `"result":"the answer is 42"`)
		if !strings.Contains(note, `"state":"completed"`) {
			t.Errorf("the notification turn does not carry the task's final state:\n%s", note)
		}
		if st := shownState(t, home, id); st != "completed" {
			t.Errorf("relay task %s: %s, want completed", id, st)
		}
		for kind, want := range map[string]int{"mcp.task.created": 1, "mcp.task.delivered": 1} {
			if n := countAudit(t, home, kind, id); n != want {
				t.Errorf("%s rows of %s: %d, want %d", kind, id, n, want)
			}
		}
	})

	t.Run("print", func(t *testing.T) {
		cmd := cc.command("-p", submit("echo printed")+" [[say done]]")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude -p: %v\n%s", err, out)
		}
		// The tool result is the task itself, as submit_task always gave.
		if !strings.Contains(string(out), `"task_id":"T-`) || strings.Contains(string(out), "server-side task") {
			t.Errorf("claude -p: want the synchronous submit_task answer:\n%s", out)
		}
	})
}

// shownState is the task's state as `relay tasks show` gives it.
func shownState(t *testing.T, home, id string) string {
	t.Helper()
	out, err := exec.Command(relayBin, "--home", home, "tasks", "show", id, "--json").Output()
	if err != nil {
		t.Fatalf("relay tasks show %s: %v", id, err)
	}
	var task struct{ State string }
	if err := json.Unmarshal(out, &task); err != nil {
		t.Fatalf("relay tasks show %s --json: %v\n%s", id, err, out)
	}
	return task.State
}
