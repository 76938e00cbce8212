// Package acpwire bounds what an agent's stdout can make a run hold before
// the ACP SDK reads it: every line checked as JSON-RPC (protocol garbage
// is fatal), long lines cut as they arrive, string by string, never held
// whole (clip.go), and flow control of the notifications and requests in
// flight, in count and in bytes, so that backpressure reaches the agent
// through the pipe (limiter.go). It knows the wire, not the relay: package
// dispatch wires a Limiter between each agent's stdout and the SDK.
package acpwire
