package mcpserver

import (
	"context"
	"fmt"
	"io"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ExampleServe serves the facade over stdio (here a pair of pipes, as
// `relay mcp` serves its own stdin and stdout) to an MCP client. The
// identity is fixed at launch, so a sender argument is refused as a tool
// error, not silently dropped.
func ExampleServe() {
	fromFacade, stdout := io.Pipe()
	stdin, toFacade := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- Serve(context.Background(), mcpNewFake(), Options{Agent: "claude", Cwd: "/srv/repo"}, stdin, stdout)
		stdout.Close()
	}()
	c := client.NewClient(transport.NewIO(fromFacade, toFacade, io.NopCloser(nil)))
	defer func() {
		c.Close() // closes the facade's stdin: Serve answers what it read, then returns
		<-served
	}()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
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
