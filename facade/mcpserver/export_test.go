package mcpserver

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/hai-relay/relay/model"
)

// New builds the facade's MCP server (newMCP) for the tests that drive it
// in process, through HandleMessage or an in-process client: without the
// stdio transport and without the tasks layer that Serve puts in front.
func New(svc model.AgentService, o Options) (*server.MCPServer, error) {
	s, _, err := newMCP(svc, o)
	return s, err
}
