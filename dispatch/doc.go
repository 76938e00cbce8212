// Package dispatch is the relay's ACP client side: it starts one agent
// process per authorized task, answers every permission request with a
// denial, and reports the run back through the engine's RunReporter. It also
// holds the agent registry and its four health signals.
//
// A run, from Dispatch to Finished:
//
//	spawn (inside the sandbox, package dispatch/sandbox: bubblewrap leads
//	its own process group, Pdeathsig, stderr → bounded task log)
//	initialize (protocol 1; no fs, no terminal) → session/new (task cwd, no MCP)
//	→ session/set_mode (read_only tasks, when the agent offers plan/ask/read-only)
//	→ RunReporter.Started → session/prompt → stop reason → teardown → Finished
//
// Timeouts, Cancel and Stop send session/cancel, wait CancelGrace, then
// kill the whole process group; garbage on the agent's stdout kills at
// once. Every run ends with the group killed and the agent reaped before
// Finished is reported. Only the agent's message text, its stop reason and
// its tool calls' titles, kinds and statuses are kept; thoughts never are.
//
// No agent process outlives its run or the daemon: the leader is
// bubblewrap, which Pdeathsig kills when the daemon dies, and the agent
// and every descendant (those that left the group and its environment
// too) are in the sandbox's pid namespace, which the kernel empties when
// bubblewrap's pid 1 ends. A run record under Home/run, kept while the
// group may be alive, lets the next daemon's Reap kill a group left
// behind.
//
// Files: policy.go (capabilities and the deny-all decision, from which
// Policy is derived), client.go (the acp.Client; what the agent's stdout
// may make a run hold is package dispatch/acpwire's, wired in front of the
// SDK's reader), startup.go (a task's start-up deadline), proc.go
// (process start, group kill, bounded log), session.go (one agent
// session), dispatcher.go
// (Dispatch, Cancel, Stop), runrec.go (run records and Reap), probe.go
// (live probe), rule.go (what a session does with its hardening rule:
// its files, its own directory, its mode state), session_sandbox.go
// (makes and starts the sandbox package dispatch/hardening plans),
// verify.go (what an offline hardening verification needs of dispatch;
// package dispatch/verify runs it, against package dispatch/modelserver),
// registry.go. The hardening profiles, their rules and masks, and the
// sandbox's launch plan are package dispatch/hardening's.
package dispatch
