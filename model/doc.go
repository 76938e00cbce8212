// Package model holds HAI-Relay's domain types: tasks, messages, agents, the
// lifecycle states and triggers, gate verdicts, audit events, the error type
// with its stable codes, and the port interfaces (store, dispatcher,
// authority) that the engine and its adapters meet at.
//
// It imports only the standard library, so every other package can depend on
// it without pulling in SQLite, MCP or ACP.
package model
