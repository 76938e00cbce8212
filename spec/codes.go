package spec

import (
	"sync"

	"github.com/hai-relay/relay/model"
)

// CodeKind says what a code is attached to.
type CodeKind string

// The kinds of code.
const (
	// KindTask codes end a task in the state they name.
	KindTask CodeKind = "task"
	// KindRequest codes refuse a request; nothing is created.
	KindRequest CodeKind = "request"
	// KindEngine codes are the engine's own typed refusals.
	KindEngine CodeKind = "engine"
)

// CodeInfo is one entry of the error catalogue.
type CodeInfo struct {
	Code model.Code
	Kind CodeKind
	// State is the terminal state a task code leads to ("" for other kinds).
	State   model.State
	Meaning string
	// Hint is the default hint shown with the code. It may hold the slots
	// {agent} (the task's target) and {task} (its id), which only a task
	// code's hint may use: FillHint fills them, and no slot ever reaches
	// a user.
	Hint string
	// Causes are hints for the causes a task's message can name, tried in
	// order before Hint (TaskHint): a hint never contradicts its message.
	Causes []CauseHint
}

// Catalogue lists every stable code. spec/errors.md is generated from it.
func Catalogue() []CodeInfo {
	t := func(c model.Code, s model.State, meaning, hint string) CodeInfo {
		return CodeInfo{Code: c, Kind: KindTask, State: s, Meaning: meaning, Hint: hint}
	}
	r := func(c model.Code, meaning, hint string) CodeInfo {
		return CodeInfo{Code: c, Kind: KindRequest, Meaning: meaning, Hint: hint}
	}
	e := func(c model.Code, meaning, hint string) CodeInfo {
		return CodeInfo{Code: c, Kind: KindEngine, Meaning: meaning, Hint: hint}
	}
	unsafeMode := t(model.CodeAgentUnsafeMode, model.StateFailed, "the agent's session was, or switched to, a mode its hardening profile does not accept for the task's mode; it was stopped (before the prompt, or at once during the run)", "read the task message for the mode seen; check {agent}'s own settings (a default mode or approval mode) and `relay agents` for its profile")
	unsafeMode.Causes = []CauseHint{{Marker: AdapterCauseMarker,
		Hint: "the cause is {agent}'s adapter, not your settings: install a version its hardening profile was verified on (`relay agents` shows what is installed and what each profile covers), then run `relay agents verify {agent}`"}}
	return []CodeInfo{
		t(model.CodeMissingMissionID, model.StateRejected, "the task has no mission ID", "pass mission_id (an HAI-MCP mission, M-…)"),
		t(model.CodeMissingLeaseID, model.StateRejected, "the task has no lease ID", "pass lease_id (an HAI-MCP lease, S-…)"),
		t(model.CodeInvalidMissionID, model.StateRejected, "the mission ID is not 1–128 characters of [A-Za-z0-9._:-]", "pass mission_id exactly as the authority issued it"),
		t(model.CodeInvalidLeaseID, model.StateRejected, "the lease ID is not 1–128 characters of [A-Za-z0-9._:-]", "pass lease_id exactly as the authority issued it"),
		t(model.CodeDelegationCycle, model.StateRejected, "the task was submitted inside another task (its caller's facade runs under that task's agent) and its target already takes part in the delegation chain, as a caller or a target: a delegation loop, refused before any agent started (the delegation gate's verdict keeps the chain)", "do the work yourself, or answer the agent that delegated it to you; `relay tasks show {task}` shows the chain"),
		t(model.CodeDelegationTooDeep, model.StateRejected, "the task was submitted inside a delegation chain already limits.max_delegation_depth deep (a top-level task is depth 1): refused before any agent started (the delegation gate's verdict keeps the chain)", "do the work yourself instead of delegating it further, or raise [limits] max_delegation_depth in config.toml; `relay tasks show {task}` shows the chain"),
		t(model.CodeACPDenialNotEnforced, model.StateBlocked, "the dispatcher would not deny every permission request, or would advertise fs/terminal", "this is a relay defect; report it"),
		t(model.CodeAgentDisabled, model.StateBlocked, "the target agent is disabled by policy", "set enabled = true under [agents.{agent}] in config.toml"),
		t(model.CodeAgentNotConfigured, model.StateBlocked, "the target agent's adapter binary is not found on the daemon's PATH", "install the agent's ACP adapter in a directory of the daemon's PATH (`relay daemon status` shows it; `relay daemon --pin-path` pins your shell's), or set [agents.{agent}] command to its absolute path in config.toml"),
		t(model.CodeAgentNotVerified, model.StateBlocked, "the target agent has require_verified = true and its last hardening verification did not pass, is older than verified_within, or was made on another adapter version than the one installed now", "run `relay agents verify {agent}` (docs/agents/verify.md)"),
		t(model.CodeAuthorityNotConfigured, model.StateBlocked, "no authority adapter is configured, so nothing may run", "set [authority] command in config.toml"),
		t(model.CodeAuthorityUnavailable, model.StateBlocked, "the authority adapter could not be started or exited non-zero", "`relay tasks show {task}` shows the adapter's exit status and stderr; run it by hand with a request on stdin"),
		t(model.CodeAuthorityTimeout, model.StateBlocked, "the authority adapter did not answer within authority.timeout", "raise [authority] timeout or fix the adapter"),
		t(model.CodeAuthorityInvalidResponse, model.StateBlocked, "the authority adapter's answer was not one valid JSON decision of at most 64 KiB, read one way only (no key twice or differing from another only in case, no lone surrogate or invalid UTF-8)", "check the adapter's output against the request and response types in spec/authority.go"),
		t(model.CodeAuthorityDenied, model.StateRejected, "the authority adapter denied the task (its own code is kept with the verdict)", "ask the authority why; `relay tasks show {task}` shows the adapter's own code in its verdict"),
		t(model.CodeStateChangingRequiresGuardedClaude, model.StateRejected, "state_changing tasks run only on claude with the authority's guarded assurance", "submit read_only, or target claude under a guarded lease"),
		t(model.CodeDispatchFailed, model.StateFailed, "the target agent could not be started or its ACP session set up", "run `relay agents probe {agent}` and read the task's agent log (`relay tasks show {task}` names it)"),
		t(model.CodeDispatchInterrupted, model.StateFailed, "the daemon stopped while the task was authorized or working; its outcome is unknown", "submit a follow-up task in the same context_id if it is still needed"),
		t(model.CodeAgentCrashed, model.StateFailed, "the agent process exited, closed its output or spoke garbage mid-task", "read the task's agent log (`relay tasks show {task}` names it), then run `relay agents probe {agent}`"),
		t(model.CodeAgentRefused, model.StateFailed, "the agent ended its turn with stop reason refusal, or as cancelled after the relay denied it a permission (the only way some agents take a no)", "rephrase the task or choose another agent; a read_only task cannot write"),
		t(model.CodeAgentMaxTokens, model.StateFailed, "the agent ended its turn with stop reason max_tokens", "narrow the task"),
		t(model.CodeAgentMaxTurnRequests, model.StateFailed, "the agent ended its turn with stop reason max_turn_requests", "narrow the task"),
		t(model.CodeAgentAuthRequired, model.StateFailed, "the agent needs its user to log in; the relay never authenticates for it", "log in to {agent} with its own login command (the message names it), then submit again"),
		unsafeMode,
		t(model.CodeAgentStartTimeout, model.StateFailed, "the agent did not get through its start-up (initialize, session/new and setting the session's mode) within limits.start_timeout; it was killed and its dispatch slot freed", "run `relay agents probe {agent}` and read the task's agent log (`relay tasks show {task}` names it; the agent may be waiting for a login or a prompt of its own); raise [limits] start_timeout if it is only slow to start"),
		t(model.CodeAgentSandboxUnavailable, model.StateFailed, "the sandbox every agent runs in could not be made on this machine (bubblewrap is missing, or cannot make user namespaces for the daemon's user), so the agent was not started: no agent ever runs with less than the sandbox holds", "install bubblewrap (Debian, Ubuntu: sudo apt-get install bubblewrap), or let it make user namespaces; the task's message says which"),
		t(model.CodeTaskTimeout, model.StateFailed, "the task ran longer than limits.task_timeout and was stopped", "raise [limits] task_timeout or split the task"),
		t(model.CodeCanceledBySubmitter, model.StateCanceled, "the submitter canceled the task", "nothing more happens to it; submit a new task in the same context_id if the work is still needed"),
		t(model.CodeCanceledByOperator, model.StateCanceled, "an operator canceled the task", "ask the operator why (`relay tasks show {task}` shows when); submit a new task in the same context_id if the work is still needed"),

		r(model.CodeInvalidArgs, "the request's arguments are missing, malformed or unknown, or could be read more than one way (a key twice or differing from another only in case, a lone surrogate, invalid UTF-8, two identities)", model.InvalidArgsHint),
		r(model.CodeUnknownAgent, "no agent of that name is known", "use list_agents to see the known agents"),
		r(model.CodeInvalidRecipient, "the recipient is not allowed (for example yourself)", "send to another agent"),
		r(model.CodeBroadcastNotSupported, "messages go to exactly one agent", "send one message per recipient"),
		r(model.CodePayloadTooLarge, "the payload exceeds its limit", "shorten it, or pass an artifact reference instead of the content"),
		r(model.CodeInvalidCwd, "cwd is not an existing absolute directory", "pass an absolute path to an existing directory"),
		r(model.CodeNotFound, "no such task or message, or one that is not yours to see: both get the same answer", "list_tasks / check_inbox show what you can see"),
		r(model.CodeTaskNotCancelable, "the task is already in a terminal state", "a follow-up is a new task in the same context_id"),
		r(model.CodeIdempotencyConflict, "the caller already used this idempotency_key for a task whose request differs (any field: target, prompt, mission_id, lease_id, mode, context_id, cwd, reference_task_ids, artifacts); nothing is created", "retry with exactly the first request to get its task, or use a new idempotency_key for a new task"),
		r(model.CodeDaemonUnavailable, "no relay daemon of yours answers on this home: none runs, or the home, a file in it or the daemon behind its socket belongs to another user (the client refuses those and sends nothing); also a request that did not reach it whole, or a read whose answer was lost. Nothing was carried out or changed: a retry is safe", "start one with `relay daemon`; if the message names another owner, pass a --home only you can write"),
		r(model.CodeDaemonAlreadyRunning, "`relay daemon` was started on a home where a relay daemon already runs (it holds the home's lock); the new one did not start and the running one is left alone", "use the running daemon (`relay daemon status` shows it), stop it first with `relay daemon stop`, or pass another --home"),
		r(model.CodeOutcomeUnknown, "the request reached the relay daemon but its answer was lost (the connection closed, or no answer came in time): it may have been carried out. The client reports it; the daemon never answers it", "look before you retry: list_tasks shows your tasks (a submit_task sent again with the same idempotency_key returns the first task, never a second); `relay messages list --from` with an agent's name shows the messages it sent"),
		r(model.CodeStorageFull, "the disk holding the relay's database is full, or its free space is under the reserve kept for acknowledgements, reads and pruning ([storage] min_free_bytes; then only new messages and tasks are refused), or the daemon's file-size limit is reached: the write was not stored; reads go on working, and nothing acknowledged before is lost", "free space on the filesystem of the relay home, or remove acknowledged messages and ended tasks with `relay prune`; writes work again once there is room, without a restart"),
		r(model.CodeRecipientInboxFull, "the sender's unacknowledged messages to the recipient already reach the sender's share of its quota ([limits] inbox_sender_share, default 25%), or all senders' reach the quota itself ([limits] inbox_messages, or inbox_bytes of message bodies): the message was not stored. Other senders keep their shares; the relay's own end-of-task notices are never refused", "the recipient must read and acknowledge its messages (check_inbox, which lists the senders at their share, then ack_messages) before it can receive more from this sender; an operator may raise [limits] inbox_sender_share, inbox_messages or inbox_bytes in config.toml"),
		r(model.CodeIdentityMismatch, "the facade's process runs inside a task's sandbox (a facade the task's agent started), and acts only as that task's target; it claimed another agent's identity: nothing was done, and the refusal is audited", "an agent inside a task speaks as itself: start `relay mcp --as` with the task's target agent"),
		r(model.CodeInternal, "an internal error; details are in the daemon log", "see the daemon log in the relay home"),

		e(model.CodeStaleState, "another transition changed the task first (compare-and-set lost)", "read the task again"),
		e(model.CodeInvalidTransition, "the trigger is not permitted from the task's current state", "terminal states never change"),
		e(model.CodeInvalidConfig, "config.toml cannot be read, is malformed, or has an unknown key, a wrong type or a bad value", "fix the key named in the message"),
		e(model.CodeAuditBroken, "the audit hash chain does not verify", "the named row was changed, removed or reordered"),
		e(model.CodeDatabaseCorrupt, "the database file is not a SQLite database, or fails SQLite's integrity check (quick_check, run at a start after a stop that was not clean); the relay refuses to open it and leaves it untouched", "move the file aside and put back relay.db from a backup; a damaged database can be salvaged with `sqlite3 relay.db .recover | sqlite3 recovered.db`"),
	}
}

// Lookup returns the catalogue entry of a code.
func Lookup(c model.Code) (CodeInfo, bool) {
	ci, ok := byCode()[c]
	return ci, ok
}

// byCode indexes the catalogue once: every task the service answers
// looks its code up (TaskHint), a listing up to a thousand times.
var byCode = sync.OnceValue(func() map[model.Code]CodeInfo {
	m := map[model.Code]CodeInfo{}
	for _, ci := range Catalogue() {
		m[ci.Code] = ci
	}
	return m
})

// Hint returns the default hint of a code, for an error that concerns no
// task (FillHint with no facts). A task's hint is TaskHint's.
func Hint(c model.Code) string {
	return FillHint(c, HintFacts{})
}
