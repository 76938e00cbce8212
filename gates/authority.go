package gates

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/hai-relay/relay/model"
)

// NewRequestID returns a fresh random request ID (32 hex digits).
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b[:])
}

// NewAuthorityRequest builds the request of one consultation about t, with a
// fresh random request ID, asked at now, carrying t's delegation chain. An
// empty mode is sent as read_only, the documented default.
func NewAuthorityRequest(t model.Task, now time.Time) model.AuthorityRequest {
	mode := t.Mode
	if mode == "" {
		mode = model.ModeReadOnly
	}
	return model.AuthorityRequest{
		RequestID:    NewRequestID(),
		TaskID:       t.ID,
		MissionID:    t.MissionID,
		LeaseID:      t.LeaseID,
		Caller:       t.Caller,
		Target:       t.Target,
		Mode:         mode,
		RequestedAt:  now.UTC(),
		ParentTaskID: t.ParentTaskID,
		Chain:        t.Chain,
	}
}

// Authority is the authority gate: it consults a exactly once and turns the
// result into a verdict. It returns the answer too, with whatever was
// observed (exit code, elapsed time, stderr excerpt) even when the
// consultation failed, so the caller can audit it and hand it to
// GuardedClaude.
//
//   - a nil a: authority_not_configured (blocked);
//   - a Consult error: its code, one of authority_unavailable,
//     authority_timeout, authority_invalid_response or
//     authority_not_configured (blocked); any other error counts as
//     authority_unavailable;
//   - deny: authority_denied (rejected), with the adapter's own code in
//     Detail["adapter_code"] and its message in Detail["adapter_message"];
//   - allow: passed, with Detail["assurance"] (standard when the adapter
//     said nothing).
//
// The gate re-checks the answer of any Authority implementation: a deny
// without a code or an unknown assurance is authority_invalid_response.
// A request without an ID or time gets a fresh ID and the current time.
// Detail always carries request_id, exit_code, elapsed and, when the
// adapter wrote any, stderr (an excerpt).
func Authority(ctx context.Context, a model.Authority, req model.AuthorityRequest) (model.Verdict, model.AuthorityAnswer) {
	if a == nil {
		return fail(model.GateAuthority, model.CodeAuthorityNotConfigured,
			"no authority adapter is configured, so nothing may run", nil), model.AuthorityAnswer{ExitCode: -1}
	}
	if req.RequestID == "" {
		req.RequestID = NewRequestID()
	}
	if req.RequestedAt.IsZero() {
		req.RequestedAt = time.Now().UTC()
	}
	ans, err := a.Consult(ctx, req)

	detail := map[string]string{
		"request_id": req.RequestID,
		"exit_code":  strconv.Itoa(ans.ExitCode),
		"elapsed":    ans.Elapsed.Round(time.Microsecond).String(),
	}
	if ans.Stderr != "" {
		detail["stderr"] = ans.Stderr
	}
	if err != nil {
		code, msg := model.ErrorCode(err), err.Error()
		var e *model.Error
		if errors.As(err, &e) {
			msg = e.Message
			if e.Err != nil {
				detail["error"] = e.Err.Error()
			}
		}
		switch code {
		case model.CodeAuthorityUnavailable, model.CodeAuthorityTimeout,
			model.CodeAuthorityInvalidResponse, model.CodeAuthorityNotConfigured:
		default:
			detail["error_code"] = string(code)
			code = model.CodeAuthorityUnavailable
		}
		return fail(model.GateAuthority, code, msg, detail), ans
	}

	if !ans.Allow {
		if ans.DenyCode == "" {
			return fail(model.GateAuthority, model.CodeAuthorityInvalidResponse,
				"the authority denied without a code", detail), ans
		}
		detail["adapter_code"] = ans.DenyCode
		if ans.Message != "" {
			detail["adapter_message"] = ans.Message
		}
		msg := "the authority denied the task: " + ans.DenyCode
		if ans.Message != "" {
			msg += ": " + ans.Message
		}
		return fail(model.GateAuthority, model.CodeAuthorityDenied, msg, detail), ans
	}

	switch ans.Assurance {
	case "":
		ans.Assurance = model.AssuranceStandard
	case model.AssuranceStandard, model.AssuranceGuarded:
	default:
		return fail(model.GateAuthority, model.CodeAuthorityInvalidResponse,
			"the authority allowed with an unknown assurance "+strconv.Quote(string(ans.Assurance)), detail), ans
	}
	detail["assurance"] = string(ans.Assurance)
	return model.Verdict{Gate: model.GateAuthority, Passed: true,
		Message: "the authority allowed the task (assurance " + string(ans.Assurance) + ")",
		Detail:  detail}, ans
}
