package spec

import (
	"fmt"

	"github.com/hai-relay/relay/model"
)

// FieldBound is the bound of one request field, as spec/errors.md lists it.
type FieldBound struct {
	// Field is the argument's name, as the tools and the socket API take it.
	Field string
	// Where lists the requests that carry it.
	Where string
	// Bound says what is accepted.
	Bound string
	// Beyond is what a value past the bound gets.
	Beyond string
}

// RequestBounds lists the bound of every field a request may carry, from
// model's Max… constants. Each is checked before anything is stored (by
// model/bounds.go's checks); this list is their documentation,
// spec/errors.md's table, which RenderErrorsMarkdown (a test file too)
// writes, so it lives with the tests.
func RequestBounds() []FieldBound {
	bytes := func(n int) string { return fmt.Sprintf("at most %d bytes", n) }
	taskID := fmt.Sprintf("`%s-` and %d characters of Crockford base32 (an id the relay made)", model.TaskIDPrefix, model.RelayIDDigits)
	msgID := fmt.Sprintf("`%s-` and %d characters of Crockford base32 (an id the relay made)", model.MessageIDPrefix, model.RelayIDDigits)
	const ia = "`invalid_args`, naming the field and the bound"
	messageBytes := fmt.Sprintf("1 byte to `limits.message_bytes` (default %d)", model.DefaultMessageBytes)
	return []FieldBound{
		{"request body", "every socket API request", "at most 4 MiB (MCP: one line of at most 16 MiB, or 8 × `limits.message_bytes`)", "`payload_too_large`"},
		{"body", "send_message", messageBytes, "`payload_too_large`"},
		{"prompt", "submit_task", messageBytes, "`payload_too_large`"},
		{"to, target", "send_message, submit_task", "one known agent name (1–64 characters of [a-z0-9_-])", "`unknown_agent` (or `invalid_args`, `invalid_recipient`, `broadcast_not_supported`)"},
		{"mission_id, lease_id", "submit_task", bytes(model.MaxAuthorityIDBytes) + " to be stored; below that, one that is not 1–128 characters of [A-Za-z0-9._:-] is stored and the task rejected by the missionLease gate", ia + " (nothing stored); `invalid_mission_id` / `invalid_lease_id` on the task below it"},
		{"context_id", "send_message, submit_task", bytes(model.MaxContextIDBytes) + " (a relay-made `C-…` or a thread name of your own)", ia},
		{"idempotency_key", "submit_task", bytes(model.MaxIdempotencyKeyBytes) + "; one key names one request of its caller", ia + "; the key reused with any other field changed: `idempotency_conflict` (nothing stored)"},
		{"reference_task_ids", "submit_task", fmt.Sprintf("at most %d ids, each %s", model.MaxReferenceTaskIDs, taskID), ia + " or the shape"},
		{"reply_to", "send_message", msgID + ", of a message you sent or received", "`invalid_args` naming the shape; `not_found` for a well-formed id you cannot see"},
		{"artifacts", "send_message, submit_task", fmt.Sprintf("at most %d", model.MaxArtifacts), ia},
		{"artifacts[i].uri", "send_message, submit_task", bytes(model.MaxArtifactURIBytes) + ", absolute, not `data:`", ia},
		{"artifacts[i].name", "send_message, submit_task", bytes(model.MaxArtifactNameBytes), ia},
		{"artifacts[i].media_type", "send_message, submit_task", bytes(model.MaxArtifactMediaTypeBytes), ia},
		{"cwd", "submit_task", bytes(model.MaxCwdBytes) + ", a clean absolute path to an existing directory", ia + "; `invalid_cwd` within it"},
		{"mode, state", "submit_task, list_tasks", "one of the listed values", "`invalid_args`"},
		{"limit", "check_inbox, list_tasks", fmt.Sprintf("1–%d", model.MaxPageSize), "`invalid_args`"},
		{"message_ids", "ack_messages", fmt.Sprintf("1–%d ids", model.MaxPageSize), "`invalid_args`; `not_found` for an id that is not a message to you"},
		{"wait_seconds", "get_task", fmt.Sprintf("an integer from 0 to %d (seconds; the socket API's `wait`: a duration up to %s)", int(model.MaxTaskWait.Seconds()), model.MaxTaskWait), "`invalid_args`"},
		{"task_id", "get_task, cancel_task, `relay tasks show/cancel`", taskID + "; any other id names no task", fmt.Sprintf("`not_found`, with no query (the client answers it without sending one over %d bytes)", model.MaxLookupIDBytes)},
	}
}
