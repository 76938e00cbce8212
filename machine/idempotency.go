package machine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strings"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// requestSHA256 returns the hex SHA-256 of r in canonical form: every
// field of the submit request, each length-prefixed in a fixed order, after
// the defaults validate applies (an empty mode is read_only). Lists count
// in the order given; an absent list and an empty one are the same. The
// bytes are hashed as given, so no two different values share a form.
// context_id is taken as asked: one request that names none and another
// that names the id the first was given are different requests. The
// parent task, for a request made inside one, counts as a field: written
// after the others only when there is one, so the hash of a top-level
// request is what it was before delegation chains were recorded.
func requestSHA256(r model.SubmitRequest) string {
	h := sha256.New()
	put := func(s string) { putLen(h, len(s)); h.Write([]byte(s)) }
	put("relay submit_task request v1")
	for _, f := range []string{r.Target, r.Prompt, r.MissionID, r.LeaseID, string(r.Mode),
		r.ContextID, r.Cwd, r.IdempotencyKey} {
		put(f)
	}
	putLen(h, len(r.ReferenceTaskIDs))
	for _, id := range r.ReferenceTaskIDs {
		put(id)
	}
	putLen(h, len(r.Artifacts))
	for _, a := range r.Artifacts {
		put(a.URI)
		put(a.MediaType)
		put(a.Name)
	}
	if r.ParentTaskID != "" {
		put("parent_task_id")
		put(r.ParentTaskID)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func putLen(h hash.Hash, n int) {
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutUvarint(b[:], uint64(n))])
}

// checkRetry decides whether r, whose idempotency_key found the caller's
// task first, is a retry of the request that created first (nil: answer
// with first) or a reuse of the key for another request
// (CodeIdempotencyConflict naming the fields that differ). A task stored
// before the relay kept request hashes is compared field by field with
// what it stored; its context_id only when r names one.
func checkRetry(r model.SubmitRequest, sum string, first model.Task) error {
	if first.RequestSHA256 == sum {
		return nil
	}
	diff := requestDiff(r, first)
	if first.RequestSHA256 == "" && len(diff) == 0 {
		return nil
	}
	if len(diff) == 0 {
		// Only context_id is not kept as asked: one request named it,
		// the other left it to the relay.
		diff = []string{"context_id"}
	}
	return model.Errorf(model.CodeIdempotencyConflict,
		"idempotency_key %q was used for task %s, whose request differs in %s",
		model.Echo(r.IdempotencyKey), first.ID, strings.Join(diff, ", ")).
		WithHint(spec.Hint(model.CodeIdempotencyConflict) + fmt.Sprintf(" (get_task %s shows the first)", first.ID))
}

// requestDiff names the fields of r that differ from what task t stored.
func requestDiff(r model.SubmitRequest, t model.Task) []string {
	var d []string
	add := func(differ bool, field string) {
		if differ {
			d = append(d, field)
		}
	}
	add(r.Target != t.Target, "target")
	add(r.Prompt != t.Prompt, "prompt")
	add(r.MissionID != t.MissionID, "mission_id")
	add(r.LeaseID != t.LeaseID, "lease_id")
	add(r.Mode != t.Mode, "mode")
	add(r.ContextID != "" && r.ContextID != t.ContextID, "context_id")
	add(r.Cwd != t.Cwd, "cwd")
	add(!slices.Equal(r.ReferenceTaskIDs, t.ReferenceTaskIDs), "reference_task_ids")
	add(!slices.Equal(r.Artifacts, t.Artifacts), "artifacts")
	add(r.ParentTaskID != t.ParentTaskID, "parent_task_id")
	return d
}
