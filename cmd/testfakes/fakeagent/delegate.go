package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
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
func (a *agent) delegate(ctx context.Context, sid acp.SessionId, words []string) (acp.PromptResponse, error) {
	if len(words) < 6 {
		return a.reply(ctx, sid, "delegate error: want delegate RELAY HOME AS TARGET PROMPT...")
	}
	bin, home, as, target, prompt := words[1], words[2], words[3], words[4], strings.Join(words[5:], " ")
	a.mu.Lock()
	cwd := a.cwd
	a.mu.Unlock()
	text, err := delegateThrough(ctx, bin, home, as, target, prompt, cwd)
	if err != nil {
		a.log.event("delegate_error", map[string]any{"err": err.Error()})
		return a.reply(ctx, sid, "delegate error: "+err.Error())
	}
	a.log.event("delegated", map[string]any{"answer": text})
	return a.reply(ctx, sid, text)
}

func delegateThrough(ctx context.Context, bin, home, as, target, prompt, cwd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := client.NewStdioMCPClient(bin, os.Environ(), "mcp", "--as", as, "--home", home, "--no-autostart")
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
