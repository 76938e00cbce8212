// Command mcpfloor is the floor the relay's MCP facade is measured
// against: a minimal mcp-go stdio server with one send_message tool that
// stores nothing. Benchmarks build it themselves and compare the relay's
// cold start and round trips with it, in the same run.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	s := server.NewMCPServer("mcpfloor", "0")
	s.AddTool(mcp.NewTool("send_message",
		mcp.WithString("to", mcp.Required()),
		mcp.WithString("body", mcp.Required()),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultStructured(map[string]any{"message_id": "MSG-0", "state": "stored"}, `{"message_id":"MSG-0","state":"stored"}`), nil
	})
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
