package socketapi

import (
	"net/http"
	"testing"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// TestStatus: every code of the catalogue has an HTTP error status, and
// each is the one the socket API has always answered (spec/errors.md
// publishes them; spec's golden test renders it with Status).
func TestStatus(t *testing.T) {
	t.Parallel()
	want := map[model.Code]int{
		model.CodeInvalidArgs:           400,
		model.CodeUnknownAgent:          404,
		model.CodeInvalidRecipient:      400,
		model.CodeBroadcastNotSupported: 400,
		model.CodePayloadTooLarge:       413,
		model.CodeInvalidCwd:            400,
		model.CodeNotFound:              404,
		model.CodeTaskNotCancelable:     409,
		model.CodeIdempotencyConflict:   409,
		model.CodeDaemonUnavailable:     503,
		model.CodeDaemonAlreadyRunning:  409,
		model.CodeOutcomeUnknown:        504,
		model.CodeStorageFull:           507,
		model.CodeRecipientInboxFull:    429,
		model.CodeIdentityMismatch:      403,
		model.CodeInternal:              500,
		model.CodeStaleState:            409,
		model.CodeInvalidTransition:     409,
		model.CodeInvalidConfig:         500,
		model.CodeAuditBroken:           500,
		model.CodeDatabaseCorrupt:       500,
	}
	for _, ci := range spec.Catalogue() {
		got := Status(ci.Code)
		if http.StatusText(got) == "" || got < 400 {
			t.Errorf("code %s has HTTP status %d, want an error status", ci.Code, got)
		}
		w, ok := want[ci.Code]
		if ci.Kind == spec.KindTask {
			w, ok = http.StatusUnprocessableEntity, !ok
		}
		if !ok {
			t.Errorf("code %s (%s) has no status in this test", ci.Code, ci.Kind)
			continue
		}
		if got != w {
			t.Errorf("Status(%s) = %d, want %d", ci.Code, got, w)
		}
	}
	for _, c := range model.AllCodes() {
		if _, ok := spec.Lookup(c); !ok {
			t.Errorf("code %s is not in the catalogue", c)
		}
	}
	if got := Status("no_such_code"); got != http.StatusInternalServerError {
		t.Errorf("Status(no_such_code) = %d, want 500", got)
	}
}
