// Package facade holds the relay's transports: the MCP stdio server whose
// identity is fixed at launch, and the HTTP/JSON API over the daemon's
// owner-only Unix socket, with a client that satisfies the same engine port
// as the in-process service.
package facade
