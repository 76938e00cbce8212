package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// suiteClient is the MCP client the suite drives servers with: newline-
// delimited JSON-RPC over a child's stdio, one call at a time, decoding only
// what the suite reads. It is deliberately thin. mcp-go's client, used
// before, parses every tool result three times (map, re-marshal, struct):
// 2.6 ms of CPU for a 50-task list_tasks answer, more than the relay took
// to produce it, so the latency rows measured the client. The relay and
// every floor are driven by this same client.
type suiteClient struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	next int64
	done chan struct{} // closed when the process was waited for
	// stderr keeps the start of the server's stderr, for an error.
	stderr headBuffer

	closeOnce sync.Once
}

// startSuiteClient starts argv and initializes it as an MCP server.
func startSuiteClient(ctx context.Context, argv []string) (*suiteClient, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &suiteClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), done: make(chan struct{})}
	cmd.Stderr = &c.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(c.done) }()
	init := map[string]any{
		"protocolVersion": mcp.LATEST_PROTOCOL_VERSION,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "relay-bench", "version": "0"},
	}
	if _, err := c.request(ctx, "initialize", init); err != nil {
		c.Close() // waits for the process: its stderr is complete
		return nil, fmt.Errorf("initialize %s: %w (stderr: %q)", argv[0], err, c.stderr.String())
	}
	if err := c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *suiteClient) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.in.Write(append(b, '\n'))
	return err
}

// suiteRPCReply is a JSON-RPC answer, its result left raw.
type suiteRPCReply struct {
	ID     *int64          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// request sends one request and reads lines until its answer; server
// notifications and requests on the way are skipped. ctx ending kills the
// server (a blocked read cannot be interrupted otherwise).
func (c *suiteClient) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.next++
	id := c.next
	if err := c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return nil, fmt.Errorf("%s: write: %w", method, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.cmd.Process.Kill() })
	defer stop()
	for {
		line, err := c.out.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			var rest []byte
			rest, err = c.out.ReadBytes('\n')
			line = append(append([]byte(nil), line...), rest...)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%s: read: %w", method, err)
		}
		var r suiteRPCReply
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s: bad answer line: %w", method, err)
		}
		if r.ID == nil || *r.ID != id {
			continue
		}
		if r.Error != nil {
			return nil, fmt.Errorf("%s: JSON-RPC error %d: %s", method, r.Error.Code, r.Error.Message)
		}
		return r.Result, nil
	}
}

// call calls a tool and decodes its structured result into out (nil: only
// checked for a tool error).
func (c *suiteClient) call(ctx context.Context, name string, args map[string]any, out any) error {
	raw, err := c.request(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return err
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%s: bad result: %w", name, err)
	}
	if res.IsError {
		var text []string
		for _, ct := range res.Content {
			text = append(text, ct.Text)
		}
		return fmt.Errorf("%s: tool error: %s", name, strings.Join(text, ""))
	}
	if out == nil {
		return nil
	}
	if len(res.Structured) > 0 {
		return json.Unmarshal(res.Structured, out)
	}
	if len(res.Content) > 0 {
		return json.Unmarshal([]byte(res.Content[0].Text), out)
	}
	return fmt.Errorf("%s: empty result", name)
}

// Close closes the server's stdin (an MCP stdio server exits at its end)
// and waits for it, killing it after 10 s.
func (c *suiteClient) Close() error {
	c.closeOnce.Do(func() {
		_ = c.in.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
	})
	return nil
}

// headBuffer keeps the first 4 KiB written to it (the head of a server's
// stderr is where its reason for not starting is).
type headBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := 4096 - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
