package socketapi

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/hai-relay/relay/facade/mcpserver"
	"github.com/hai-relay/relay/model"
)

// The socket client gives the MCP server the daemon's answers as they came,
// a waiting get_task's too.
var (
	_ mcpserver.PassThrough = (*Client)(nil)
	_ interface {
		WaitTaskJSON(context.Context, string, string, time.Duration) (json.RawMessage, error)
	} = (*Client)(nil)
)

// serveMCP serves the MCP facade over svc, as claude, with mcpserver.Serve
// on a pair of pipes, as `relay mcp` serves its stdin and stdout; it
// returns the client's ends. When the test ends the facade's stdin is
// closed and Serve returns.
func serveMCP(tb testing.TB, svc model.AgentService) (fromFacade io.ReadCloser, toFacade io.WriteCloser) {
	tb.Helper()
	fromFacade, stdout := io.Pipe()
	stdin, toFacade := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.Serve(context.Background(), svc,
			mcpserver.Options{Agent: "claude", Cwd: "/home/u/project", Version: "test", PID: 4242}, stdin, stdout)
		stdout.Close()
	}()
	tb.Cleanup(func() {
		toFacade.Close()   // the end of its stdin
		fromFacade.Close() // and a client that no longer reads
		if err := <-served; err != nil {
			tb.Errorf("mcpserver.Serve: %v", err)
		}
	})
	return fromFacade, toFacade
}

// passMCPClient starts an MCP client of the facade over svc (serveMCP),
// initialized.
func passMCPClient(tb testing.TB, svc model.AgentService) *client.Client {
	tb.Helper()
	fromFacade, toFacade := serveMCP(tb, svc)
	c := client.NewClient(transport.NewIO(fromFacade, toFacade, io.NopCloser(nil)))
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	var ir mcp.InitializeRequest
	ir.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	ir.Params.ClientInfo = mcp.Implementation{Name: "socketapi-test", Version: "0"}
	if _, err := c.Initialize(ctx, ir); err != nil {
		tb.Fatalf("Initialize: %v", err)
	}
	return c
}

// passMCPCall calls a tool and fails the test on a protocol error.
func passMCPCall(tb testing.TB, c *client.Client, name string, args any) *mcp.CallToolResult {
	tb.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		tb.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

// TestMCPPassThroughMatchesTyped: the tools whose daemon answers the facade
// passes on as they came (send_message, check_inbox, get_task, list_tasks)
// return exactly what the typed path returns for the same service: the
// same structured content and the same text, empty listings included.
func TestMCPPassThroughMatchesTyped(t *testing.T) {
	t.Parallel()
	for _, empty := range []bool{false, true} {
		svc := &apiFakeService{empty: empty}
		srv := apiServe(t, svc, ServerOptions{})
		viaSocket := passMCPClient(t, apiNewClient(t, srv.sock, ClientOptions{Agent: "claude"}))
		inProcess := passMCPClient(t, svc)
		calls := []struct {
			tool string
			args map[string]any
		}{
			{"send_message", map[string]any{"to": "codex", "body": "hello", "reply_to": "MSG-0"}},
			{"check_inbox", map[string]any{"limit": 7}},
			{"get_task", map[string]any{"task_id": "T-7"}},
			{"get_task", map[string]any{"task_id": "T-7", "wait_seconds": 5}},
			{"list_tasks", map[string]any{"state": "working"}},
		}
		for _, c := range calls {
			a := passMCPCall(t, viaSocket, c.tool, c.args)
			b := passMCPCall(t, inProcess, c.tool, c.args)
			if a.IsError || b.IsError {
				t.Fatalf("%s: errors %v / %v: %+v %+v", c.tool, a.IsError, b.IsError, a.Content, b.Content)
			}
			if !reflect.DeepEqual(a.StructuredContent, b.StructuredContent) || !reflect.DeepEqual(a.Content, b.Content) {
				t.Errorf("%s (empty %v): passed through %+v / %+v\ntyped %+v / %+v", c.tool, empty,
					a.StructuredContent, a.Content, b.StructuredContent, b.Content)
			}
		}
	}
}

// TestMCPDrainOutlastsAClientCall: an MCP server at the end of its stdin
// waits for its requests longer than the socket client bounds a call, so
// that in practice none is cut (mcpserver.DefaultDrain says so).
func TestMCPDrainOutlastsAClientCall(t *testing.T) {
	t.Parallel()
	if mcpserver.DefaultDrain != 2*DefaultClientTimeout {
		t.Errorf("mcpserver.DefaultDrain = %v, want twice DefaultClientTimeout (%v)", mcpserver.DefaultDrain, DefaultClientTimeout)
	}
}
