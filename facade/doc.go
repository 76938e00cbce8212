// Package facade holds the relay's transports, one package each: mcpserver,
// the MCP stdio server whose identity is fixed at launch, and socketapi,
// the HTTP/JSON API over the daemon's owner-only Unix socket, with a client
// that satisfies the same engine port (model.Service) as the in-process
// service. Neither imports the other: the MCP server talks to whatever
// model.AgentService it is given, and uses the socket client's raw answers
// only through the optional mcpserver.PassThrough interface. Both read
// what arrives from outside with strictjson.Decode, the relay's one strict
// JSON reading.
package facade
