// Package mcpserver is the relay's MCP facade: an MCP server over stdio
// (`relay mcp --as AGENT`) whose eight tools call a model.AgentService as
// one agent, fixed at launch. Its arguments are validated against the same
// table that advertises their schema; every failure is an MCP tool error
// carrying {code, message, hint}.
package mcpserver
