package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// delegate is the behaviour "delegate RELAY HOME AS TARGET PROMPT...": as an
// agent whose own MCP client runs the relay's facade, it starts `RELAY mcp
// --as AS --home HOME --no-autostart` as its child, and through it sends
// TARGET a message, submits PROMPT to TARGET (mission M-1, lease S-1, in
// the session's cwd) and waits for that task's end with get_task
// wait_seconds. It replies "delegated TASK_ID STATE CODE", or "delegate
// error: …".
//
// "delegate-via WRAP RELAY HOME AS TARGET PROMPT..." starts the facade
// through WRAP, comma-separated: "zombie" (under a process whose main
// thread has exited while another thread runs: its /proc state is Z),
// "deep:N" (under N shells, each the child of the one before).
func (a *agent) delegate(ctx context.Context, sid acp.SessionId, words []string) (acp.PromptResponse, error) {
	var wrap []string
	if words[0] == "delegate-via" && len(words) > 1 {
		var err error
		if wrap, err = wrapper(words[1]); err != nil {
			return a.reply(ctx, sid, "delegate error: "+err.Error())
		}
		words = words[1:]
	}
	if len(words) < 6 {
		return a.reply(ctx, sid, "delegate error: want delegate RELAY HOME AS TARGET PROMPT...")
	}
	bin, home, as, target, prompt := words[1], words[2], words[3], words[4], strings.Join(words[5:], " ")
	a.mu.Lock()
	cwd := a.cwd
	a.mu.Unlock()
	text, err := delegateThrough(ctx, append(wrap, bin), home, as, target, prompt, cwd)
	if err != nil {
		a.log.event("delegate_error", map[string]any{"err": err.Error()})
		return a.reply(ctx, sid, "delegate error: "+err.Error())
	}
	a.log.event("delegated", map[string]any{"answer": text})
	return a.reply(ctx, sid, text)
}

// wrapper returns the command prefix a "delegate-via" WRAP names.
func wrapper(spec string) ([]string, error) {
	var out []string
	for _, w := range strings.Split(spec, ",") {
		switch {
		case w == "zombie":
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			out = append(out, self, "zombie-leader")
		case strings.HasPrefix(w, "deep:"):
			// Each shell runs the next as its child and then exits with
			// its status (no exec: every level stays a process).
			script := filepath.Join(os.TempDir(), "nest.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\nn=$1; shift\nif [ \"$n\" -gt 0 ]; then sh \"$0\" $((n-1)) \"$@\"; exit $?; fi\nexec \"$@\"\n"), 0o755); err != nil {
				return nil, err
			}
			out = append(out, "sh", script, strings.TrimPrefix(w, "deep:"))
		default:
			return nil, fmt.Errorf("unknown wrap %q", w)
		}
	}
	return out, nil
}

// zombieLeader runs args as its child, stdio inherited, and ends its own
// main thread while another thread waits for the child: the process lives
// on with its leader a zombie, and exits with the child.
func zombieLeader(args []string) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "zombie-leader:", err)
		os.Exit(127)
	}
	go func() {
		_ = cmd.Wait()
		os.Exit(cmd.ProcessState.ExitCode())
	}()
	// The main goroutine is locked to the main thread (init): its exit
	// ends that thread alone.
	_, _, _ = syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
}

func delegateThrough(ctx context.Context, command []string, home, as, target, prompt, cwd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	args := append(command[1:], "mcp", "--as", as, "--home", home, "--no-autostart")
	c, err := client.NewStdioMCPClient(command[0], os.Environ(), args...)
	if err != nil {
		return "", fmt.Errorf("start the facade: %w", err)
	}
	defer c.Close()
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	ir.Params.ClientInfo = mcp.Implementation{Name: "fakeagent", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	call := func(tool string, args map[string]any) (map[string]any, error) {
		var req mcp.CallToolRequest
		req.Params.Name, req.Params.Arguments = tool, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tool, err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		if res.IsError {
			return nil, fmt.Errorf("%s: %s", tool, b)
		}
		return out, nil
	}
	if _, err := call("send_message", map[string]any{"to": target, "body": "delegating: " + prompt}); err != nil {
		return "", err
	}
	task, err := call("submit_task", map[string]any{"target": target, "prompt": prompt, "mission_id": "M-1", "lease_id": "S-1", "cwd": cwd})
	if err != nil {
		return "", err
	}
	id, _ := task["task_id"].(string)
	for range 3 {
		if task, err = call("get_task", map[string]any{"task_id": id, "wait_seconds": 50}); err != nil {
			return "", err
		}
		switch task["state"] {
		case "completed", "failed", "canceled", "rejected", "blocked":
			return fmt.Sprintf("delegated %s %s %s", id, task["state"], task["code"]), nil
		}
	}
	return "", fmt.Errorf("task %s did not end: %v", id, task["state"])
}

func init() {
	if len(os.Args) > 1 && os.Args[1] == "zombie-leader" {
		runtime.LockOSThread() // the main goroutine stays on the main thread
	}
}
