package mcpserver

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// ExampleNew serves the facade to an in-process MCP client. The
// identity is fixed at launch, so a sender argument is refused as a tool
// error, not silently dropped.
func ExampleNew() {
	s, err := New(mcpNewFake(), Options{Agent: "claude", Cwd: "/srv/repo"})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := client.NewInProcessClient(s)
	defer c.Close()
	ctx := context.Background()
	_ = c.Start(ctx)
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	ir.Params.ClientInfo = mcp.Implementation{Name: "example", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		fmt.Println(err)
		return
	}

	var req mcp.CallToolRequest
	req.Params.Name = "send_message"
	req.Params.Arguments = map[string]any{"to": "codex", "body": "hi", "from": "codex"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.IsError)
	fmt.Println(res.Content[0].(mcp.TextContent).Text)
	// Output:
	// true
	// {"code":"invalid_args","message":"send_message: unknown argument \"from\"","hint":"no tool takes a sender or caller: this facade's identity is fixed at launch (\"claude\"); remove \"from\""}
}
