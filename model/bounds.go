package model

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Bounds on every field a request may carry. Each is checked before
// anything is stored; spec's RequestBounds (a test file) lists them for
// spec/errors.md.
// Message bodies and prompts are bounded by limits.message_bytes (config),
// listings by limit 1..MaxPageSize, and a socket request body by 4 MiB.
const (
	// MaxAuthorityIDBytes is the storage bound of mission_id and lease_id.
	// Below it a malformed ID is stored and the task then rejected by the
	// missionLease gate (invalid_mission_id / invalid_lease_id, 1–128
	// characters), so the attempt is on record; above it the request is
	// refused and nothing is stored.
	MaxAuthorityIDBytes = 4096
	// MaxContextIDBytes bounds context_id (a relay-made C-… or the
	// caller's own thread name).
	MaxContextIDBytes = 256
	// MaxIdempotencyKeyBytes bounds idempotency_key.
	MaxIdempotencyKeyBytes = 256
	// MaxReferenceTaskIDs bounds how many reference_task_ids a task names;
	// each must be a task id (see ValidTaskID).
	MaxReferenceTaskIDs = 64
	// MaxArtifacts bounds how many artifacts a task or message carries.
	MaxArtifacts = 64
	// MaxArtifactURIBytes bounds an artifact's uri.
	MaxArtifactURIBytes = 4096
	// MaxArtifactNameBytes bounds an artifact's name.
	MaxArtifactNameBytes = 256
	// MaxArtifactMediaTypeBytes bounds an artifact's media_type (RFC 6838:
	// at most 127 characters each for type and subtype).
	MaxArtifactMediaTypeBytes = 255
	// MaxCwdBytes bounds cwd (Linux's PATH_MAX).
	MaxCwdBytes = 4096
	// MaxLookupIDBytes is the longest id a client sends to look something
	// up (get_task, cancel_task, relay tasks show): relay-made ids are
	// 28–30 bytes, so a longer one names nothing and is answered not_found
	// without being sent.
	MaxLookupIDBytes = 256
)

// The checks below run before anything is stored; each refusal is
// invalid_args naming the field and its bound (prompts and bodies, bounded
// by limits.message_bytes, are payload_too_large).

// tooLong refuses a field of n bytes over its bound.
func tooLong(field string, n, max int) error {
	return InvalidArgs("%s is %d bytes; at most %d are allowed", field, n, max)
}

// checkLen refuses v when it is longer than max bytes.
func checkLen(field, v string, max int) error {
	if len(v) > max {
		return tooLong(field, len(v), max)
	}
	return nil
}

// idShape says what a relay-made id looks like, for errors.
func idShape(prefix string) string {
	return fmt.Sprintf("%s- and %d characters of Crockford base32, as the relay made it", prefix, RelayIDDigits)
}

// CheckBounds bounds a task's fields other than its prompt (bounded by
// limits.message_bytes), its cwd's directory and its artifacts
// (CheckArtifacts). A mission or lease ID within its storage bound is
// left to the missionLease gate, which rejects a malformed one after the
// task is on record.
func (r SubmitRequest) CheckBounds() error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"mission_id", r.MissionID, MaxAuthorityIDBytes},
		{"lease_id", r.LeaseID, MaxAuthorityIDBytes},
		{"context_id", r.ContextID, MaxContextIDBytes},
		{"idempotency_key", r.IdempotencyKey, MaxIdempotencyKeyBytes},
		{"cwd", r.Cwd, MaxCwdBytes},
	} {
		if err := checkLen(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	if n := len(r.ReferenceTaskIDs); n > MaxReferenceTaskIDs {
		return InvalidArgs("reference_task_ids has %d ids; at most %d are allowed", n, MaxReferenceTaskIDs)
	}
	for i, id := range r.ReferenceTaskIDs {
		if !ValidTaskID(id) {
			return InvalidArgs("reference_task_ids[%d] %q is not a task id (%s)", i, Echo(id), idShape(TaskIDPrefix))
		}
	}
	return nil
}

// CheckBounds bounds a message's fields other than its body (checked
// against limits.message_bytes) and its artifacts (CheckArtifacts).
func (r SendRequest) CheckBounds() error {
	if err := checkLen("context_id", r.ContextID, MaxContextIDBytes); err != nil {
		return err
	}
	if r.ReplyTo != "" && !ValidMessageID(r.ReplyTo) {
		return InvalidArgs("reply_to %q is not a message id (%s)", Echo(r.ReplyTo), idShape(MessageIDPrefix))
	}
	return nil
}

// CheckArtifacts validates artifact references: at most MaxArtifacts,
// each with an absolute URI that points at content rather than carrying it
// (no data: URIs), and every field within its bound. The content is never
// fetched.
func CheckArtifacts(as []Artifact) error {
	if len(as) > MaxArtifacts {
		return InvalidArgs("artifacts has %d items; at most %d are allowed", len(as), MaxArtifacts)
	}
	for i, a := range as {
		for _, f := range []struct {
			name, v string
			max     int
		}{
			{"uri", a.URI, MaxArtifactURIBytes},
			{"name", a.Name, MaxArtifactNameBytes},
			{"media_type", a.MediaType, MaxArtifactMediaTypeBytes},
		} {
			if err := checkLen(fmt.Sprintf("artifacts[%d].%s", i, f.name), f.v, f.max); err != nil {
				return err
			}
		}
		u, err := url.Parse(a.URI)
		if a.URI == "" || err != nil || u.Scheme == "" {
			return InvalidArgs("artifacts[%d].uri %q is not an absolute URI", i, Echo(a.URI))
		}
		if strings.EqualFold(u.Scheme, "data") {
			return InvalidArgs("artifacts[%d].uri is a data: URI; artifacts are references, never content", i)
		}
	}
	return nil
}

// DefaultMessageBytes is the default of limits.message_bytes (config): the
// largest message body or task prompt, in bytes.
const DefaultMessageBytes = 256 << 10 // 262144

// The prefixes of the relay's ids.
const (
	TaskIDPrefix    = "T"
	MessageIDPrefix = "MSG"
	ContextIDPrefix = "C"
)

// RelayIDDigits is the number of Crockford base32 digits after an id's
// prefix and dash (a ULID).
const RelayIDDigits = 26

// ValidTaskID reports whether id has the shape of a relay-made task id:
// "T-" and 26 digits of Crockford base32 (upper case).
func ValidTaskID(id string) bool { return validRelayID(id, TaskIDPrefix) }

// ValidMessageID reports whether id has the shape of a relay-made message
// id: "MSG-" and 26 digits of Crockford base32 (upper case).
func ValidMessageID(id string) bool { return validRelayID(id, MessageIDPrefix) }

func validRelayID(id, prefix string) bool {
	if len(id) != len(prefix)+1+RelayIDDigits || id[:len(prefix)] != prefix || id[len(prefix)] != '-' {
		return false
	}
	for i := len(prefix) + 1; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U':
		default:
			return false
		}
	}
	return true
}

// MaxTaskWait bounds the wait of AgentService.WaitTask (get_task's
// wait_seconds): below the tool-call timeouts of common MCP clients
// (Codex's default is 60 s), so that a model can delegate and wait in one
// call.
const MaxTaskWait = 50 * time.Second

// DefaultProbeTimeout and DefaultVerifyTimeout bound an agent probe and a
// hardening verification that name no timeout of their own: the
// dispatcher stops the agent then, and the socket API holds the request
// open as long (plus its margin).
const (
	DefaultProbeTimeout = 60 * time.Second
	// A verification runs up to a dozen sessions, three at a time (an
	// OpenCode start alone is seconds of CPU): a bound, not the time it
	// takes.
	DefaultVerifyTimeout = 3 * time.Minute
)
