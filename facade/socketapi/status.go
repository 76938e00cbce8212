package socketapi

import (
	"net/http"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// Status is the HTTP status the socket API answers an error with code c:
// the status of a request or engine code below, 422 Unprocessable Entity
// for a task code of the catalogue (spec.KindTask), and 500 for a code the
// catalogue does not know. spec/errors.md publishes these statuses (it is
// rendered with Status), so a status never changes for a code.
func Status(c model.Code) int {
	if s, ok := statuses[c]; ok {
		return s
	}
	if ci, ok := spec.Lookup(c); ok && ci.Kind == spec.KindTask {
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// statuses are the HTTP statuses of the request and engine codes.
var statuses = map[model.Code]int{
	// Request codes.
	model.CodeInvalidArgs:           http.StatusBadRequest,
	model.CodeUnknownAgent:          http.StatusNotFound,
	model.CodeInvalidRecipient:      http.StatusBadRequest,
	model.CodeBroadcastNotSupported: http.StatusBadRequest,
	model.CodePayloadTooLarge:       http.StatusRequestEntityTooLarge,
	model.CodeInvalidCwd:            http.StatusBadRequest,
	model.CodeNotFound:              http.StatusNotFound,
	model.CodeTaskNotCancelable:     http.StatusConflict,
	model.CodeIdempotencyConflict:   http.StatusConflict,
	model.CodeDaemonUnavailable:     http.StatusServiceUnavailable,
	model.CodeDaemonAlreadyRunning:  http.StatusConflict,
	model.CodeOutcomeUnknown:        http.StatusGatewayTimeout,
	model.CodeStorageFull:           http.StatusInsufficientStorage,
	model.CodeRecipientInboxFull:    http.StatusTooManyRequests,
	model.CodeIdentityMismatch:      http.StatusForbidden,
	model.CodeInternal:              http.StatusInternalServerError,
	// Engine codes.
	model.CodeStaleState:        http.StatusConflict,
	model.CodeInvalidTransition: http.StatusConflict,
	model.CodeInvalidConfig:     http.StatusInternalServerError,
	model.CodeAuditBroken:       http.StatusInternalServerError,
	model.CodeDatabaseCorrupt:   http.StatusInternalServerError,
}
