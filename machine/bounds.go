package machine

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hai-relay/relay/model"
)

// The bounds of every request field are model's Max… constants; the checks
// here run before anything is stored, and each refusal is invalid_args
// naming the field and its bound (prompts and bodies, bounded by
// limits.message_bytes, are payload_too_large).

// tooLong refuses a field of n bytes over its bound.
func tooLong(field string, n, max int) error {
	return invalidArgs(fmt.Sprintf("%s is %d bytes; at most %d are allowed", field, n, max))
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
	return fmt.Sprintf("%s- and %d characters of Crockford base32, as the relay made it", prefix, model.RelayIDDigits)
}

// checkSubmitBounds bounds a task's fields other than its prompt. A
// mission or lease ID within its storage bound is left to the missionLease
// gate, which rejects a malformed one after the task is on record.
func checkSubmitBounds(r *model.SubmitRequest) error {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"mission_id", r.MissionID, model.MaxAuthorityIDBytes},
		{"lease_id", r.LeaseID, model.MaxAuthorityIDBytes},
		{"context_id", r.ContextID, model.MaxContextIDBytes},
		{"idempotency_key", r.IdempotencyKey, model.MaxIdempotencyKeyBytes},
		{"cwd", r.Cwd, model.MaxCwdBytes},
	} {
		if err := checkLen(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	if n := len(r.ReferenceTaskIDs); n > model.MaxReferenceTaskIDs {
		return invalidArgs(fmt.Sprintf("reference_task_ids has %d ids; at most %d are allowed", n, model.MaxReferenceTaskIDs))
	}
	for i, id := range r.ReferenceTaskIDs {
		if !model.ValidTaskID(id) {
			return invalidArgs(fmt.Sprintf("reference_task_ids[%d] %q is not a task id (%s)", i, model.Echo(id), idShape(model.TaskIDPrefix)))
		}
	}
	return nil
}

// CheckSendBounds bounds a message's fields other than its body (the
// service checks the body against limits.message_bytes).
func CheckSendBounds(r model.SendRequest) error {
	if err := checkLen("context_id", r.ContextID, model.MaxContextIDBytes); err != nil {
		return err
	}
	if r.ReplyTo != "" && !model.ValidMessageID(r.ReplyTo) {
		return invalidArgs(fmt.Sprintf("reply_to %q is not a message id (%s)", model.Echo(r.ReplyTo), idShape(model.MessageIDPrefix)))
	}
	return nil
}

// CheckArtifacts validates artifact references: at most model.MaxArtifacts,
// each with an absolute URI that points at content rather than carrying it
// (no data: URIs), and every field within its bound. The content is never
// fetched.
func CheckArtifacts(as []model.Artifact) error {
	if len(as) > model.MaxArtifacts {
		return invalidArgs(fmt.Sprintf("artifacts has %d items; at most %d are allowed", len(as), model.MaxArtifacts))
	}
	for i, a := range as {
		for _, f := range []struct {
			name, v string
			max     int
		}{
			{"uri", a.URI, model.MaxArtifactURIBytes},
			{"name", a.Name, model.MaxArtifactNameBytes},
			{"media_type", a.MediaType, model.MaxArtifactMediaTypeBytes},
		} {
			if err := checkLen(fmt.Sprintf("artifacts[%d].%s", i, f.name), f.v, f.max); err != nil {
				return err
			}
		}
		u, err := url.Parse(a.URI)
		if a.URI == "" || err != nil || u.Scheme == "" {
			return invalidArgs(fmt.Sprintf("artifacts[%d].uri %q is not an absolute URI", i, model.Echo(a.URI)))
		}
		if strings.EqualFold(u.Scheme, "data") {
			return invalidArgs(fmt.Sprintf("artifacts[%d].uri is a data: URI; artifacts are references, never content", i))
		}
	}
	return nil
}
