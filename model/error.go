package model

import (
	"errors"
	"fmt"
)

// Code is a stable, snake_case error or outcome code. Codes are part of the
// public contract: spec/errors.md lists every one with the state it leads to.
type Code string

// Task codes: recorded on a task when it ends in failed, rejected, blocked
// or canceled.
const (
	CodeMissingMissionID                   Code = "missing_mission_id"
	CodeMissingLeaseID                     Code = "missing_lease_id"
	CodeInvalidMissionID                   Code = "invalid_mission_id"
	CodeInvalidLeaseID                     Code = "invalid_lease_id"
	CodeACPDenialNotEnforced               Code = "acp_denial_not_enforced"
	CodeAgentDisabled                      Code = "agent_disabled"
	CodeAgentNotConfigured                 Code = "agent_not_configured"
	CodeAgentNotVerified                   Code = "agent_not_verified"
	CodeAuthorityNotConfigured             Code = "authority_not_configured"
	CodeAuthorityUnavailable               Code = "authority_unavailable"
	CodeAuthorityTimeout                   Code = "authority_timeout"
	CodeAuthorityInvalidResponse           Code = "authority_invalid_response"
	CodeAuthorityDenied                    Code = "authority_denied"
	CodeDelegationCycle                    Code = "delegation_cycle"
	CodeDelegationTooDeep                  Code = "delegation_too_deep"
	CodeStateChangingRequiresGuardedClaude Code = "state_changing_requires_guarded_claude"
	CodeDispatchFailed                     Code = "dispatch_failed"
	CodeDispatchInterrupted                Code = "dispatch_interrupted"
	CodeAgentCrashed                       Code = "agent_crashed"
	CodeAgentRefused                       Code = "agent_refused"
	CodeAgentMaxTokens                     Code = "agent_max_tokens"
	CodeAgentMaxTurnRequests               Code = "agent_max_turn_requests"
	CodeAgentAuthRequired                  Code = "agent_auth_required"
	CodeAgentUnsafeMode                    Code = "agent_unsafe_mode"
	CodeAgentStartTimeout                  Code = "agent_start_timeout"
	// CodeAgentSandboxUnavailable: the sandbox every agent runs in
	// (bubblewrap's namespaces) cannot be made here, so nothing ran: no
	// agent ever runs with less than the sandbox holds.
	CodeAgentSandboxUnavailable Code = "agent_sandbox_unavailable"
	CodeTaskTimeout             Code = "task_timeout"
	CodeCanceledBySubmitter     Code = "canceled_by_submitter"
	CodeCanceledByOperator      Code = "canceled_by_operator"
)

// Request codes: a request was refused and nothing was created.
const (
	CodeInvalidArgs           Code = "invalid_args"
	CodeUnknownAgent          Code = "unknown_agent"
	CodeInvalidRecipient      Code = "invalid_recipient"
	CodeBroadcastNotSupported Code = "broadcast_not_supported"
	CodePayloadTooLarge       Code = "payload_too_large"
	CodeInvalidCwd            Code = "invalid_cwd"
	CodeNotFound              Code = "not_found"
	CodeTaskNotCancelable     Code = "task_not_cancelable"
	CodeIdempotencyConflict   Code = "idempotency_conflict"
	CodeDaemonUnavailable     Code = "daemon_unavailable"
	// CodeDaemonAlreadyRunning: `relay daemon` was started on a home whose
	// daemon already runs (the home lock is held); nothing was started.
	CodeDaemonAlreadyRunning Code = "daemon_already_running"
	// CodeOutcomeUnknown: the request reached the daemon but its answer was
	// lost; it may have been carried out. Unlike daemon_unavailable, a blind
	// retry may do it twice.
	CodeOutcomeUnknown Code = "outcome_unknown"
	// CodeStorageFull: the write was refused because the disk (or the
	// daemon's quota or file-size limit) is full; nothing of it was
	// stored, and reads go on working.
	CodeStorageFull Code = "storage_full"
	// CodeRecipientInboxFull: a message was refused because its
	// recipient's unacknowledged messages already reach the recipient's
	// quota ([limits] inbox_messages or inbox_bytes); nothing was stored.
	CodeRecipientInboxFull Code = "recipient_inbox_full"
	// CodeIdentityMismatch: a facade whose process runs inside a task's
	// sandbox claimed another identity than that task's target; nothing
	// was done, and the refusal is audited.
	CodeIdentityMismatch Code = "identity_mismatch"
	CodeInternal         Code = "internal"
)

// Engine codes: typed refusals of the lifecycle engine itself.
const (
	// CodeStaleState: a compare-and-set state write found the task in
	// another state than expected; another transition won.
	CodeStaleState Code = "stale_state"
	// CodeInvalidTransition: the trigger is not permitted from the task's
	// current state (every trigger, for a terminal state).
	CodeInvalidTransition Code = "invalid_transition"
	// CodeInvalidConfig: the configuration file is malformed.
	CodeInvalidConfig Code = "invalid_config"
	// CodeAuditBroken: the audit hash chain does not verify.
	CodeAuditBroken Code = "audit_broken"
	// CodeDatabaseCorrupt: the database file is not a SQLite database, or
	// fails SQLite's integrity check; the relay refuses to open it and
	// leaves it as it is.
	CodeDatabaseCorrupt Code = "database_corrupt"
)

// AllTaskCodes lists every code a task can end with.
func AllTaskCodes() []Code {
	return []Code{CodeMissingMissionID, CodeMissingLeaseID, CodeInvalidMissionID,
		CodeInvalidLeaseID, CodeDelegationCycle, CodeDelegationTooDeep, CodeACPDenialNotEnforced, CodeAgentDisabled,
		CodeAgentNotConfigured, CodeAgentNotVerified, CodeAuthorityNotConfigured, CodeAuthorityUnavailable,
		CodeAuthorityTimeout, CodeAuthorityInvalidResponse, CodeAuthorityDenied,
		CodeStateChangingRequiresGuardedClaude, CodeDispatchFailed,
		CodeDispatchInterrupted, CodeAgentCrashed, CodeAgentRefused,
		CodeAgentMaxTokens, CodeAgentMaxTurnRequests, CodeAgentAuthRequired,
		CodeAgentUnsafeMode, CodeAgentStartTimeout, CodeAgentSandboxUnavailable, CodeTaskTimeout, CodeCanceledBySubmitter, CodeCanceledByOperator}
}

// AllRequestCodes lists every code a refused request can carry.
func AllRequestCodes() []Code {
	return []Code{CodeInvalidArgs, CodeUnknownAgent, CodeInvalidRecipient,
		CodeBroadcastNotSupported, CodePayloadTooLarge, CodeInvalidCwd, CodeNotFound,
		CodeTaskNotCancelable, CodeIdempotencyConflict, CodeDaemonUnavailable, CodeDaemonAlreadyRunning, CodeOutcomeUnknown, CodeStorageFull, CodeRecipientInboxFull, CodeIdentityMismatch, CodeInternal}
}

// AllEngineCodes lists the engine's own refusal codes.
func AllEngineCodes() []Code {
	return []Code{CodeStaleState, CodeInvalidTransition, CodeInvalidConfig, CodeAuditBroken, CodeDatabaseCorrupt}
}

// AllCodes lists every code.
func AllCodes() []Code {
	all := append(AllTaskCodes(), AllRequestCodes()...)
	return append(all, AllEngineCodes()...)
}

// Error is the relay's one error type: a stable code, a message for humans
// and a hint saying what to do about it. Internal details are wrapped in Err
// for logs and never shown to a caller.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
	Err     error  `json:"-"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the wrapped internal error.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a code and a formatted message. Every
// string argument longer than ErrorArgBytes is clipped (see Clip): a
// message names what was wrong, it never carries a caller's input back
// whole. Call sites quoting a request value clip it further with Echo.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, echoArgs(args)...)}
}

// InvalidArgsHint is the hint of every invalid_args error (spec's
// catalogue lists it with the code).
const InvalidArgsHint = "check the tool's input schema"

// InvalidArgs builds an invalid_args error with a formatted message (as
// Errorf) and InvalidArgsHint: the one constructor of that code, for every
// layer and transport.
func InvalidArgs(format string, args ...any) *Error {
	return Errorf(CodeInvalidArgs, format, args...).WithHint(InvalidArgsHint)
}

// WithHint returns e with its hint set.
func (e *Error) WithHint(hint string) *Error { e.Hint = hint; return e }

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e.Code
	}
	return CodeInternal
}

// Public returns the caller-safe form of err: its code, message and hint,
// each at most MaxErrorText bytes (clipped as Clip does). An error without
// a code becomes a generic internal error so that nothing internal leaks.
func Public(err error) *Error {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return &Error{Code: e.Code, Message: Clip(e.Message, MaxErrorText), Hint: Clip(e.Hint, MaxErrorText)}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Hint: "see the daemon log for details"}
}

// ErrStaleState is returned (wrapped in an *Error with CodeStaleState) when a
// compare-and-set state write affects no row.
var ErrStaleState = errors.New("stale state")
