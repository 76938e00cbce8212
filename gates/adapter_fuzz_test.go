package gates

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/spec"
)

// FuzzParseResponse fuzzes the authority response parser with whatever an
// adapter might write on stdout. The plain `go test` runs the seeds (and
// testdata/fuzz/FuzzParseResponse/); `just fuzz` runs it for a minute. It
// checks:
//   - no panic;
//   - a refusal names its reason (why), briefly: Consult turns every
//     refusal into authority_invalid_response (TestAuthorityAdapterModes
//     covers that mapping through a real subprocess) and the reason is
//     part of the message, so it must not echo a large answer back;
//   - an accepted answer is exactly one JSON object (with JSON whitespace
//     around it), its decision is allow or deny, a deny has a well-formed
//     code, its assurance is absent, standard or guarded;
//   - an accepted answer re-encodes (as spec.AuthorityResponse) to output
//     that parses to the same answer.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"decision":"allow","assurance":"guarded"}`,
		`{"decision":"allow","assurance":"standard"}` + "\n",
		`{"decision":"allow"}`,
		`{"decision":"deny","code":"lease_expired","message":"expired"}`,
		`{"decision":"allow","ttl":30,"nested":{"decision":"deny"},"list":[1,2]}`,
		`{"decision":"allow","assurance":null,"message":null,"code":null}`,
		``, `null`, `[]`, `"allow"`, `{}`, `{"decision":"maybe"}`, `{"decision":"deny"}`,
		`{"decision":"deny","code":"lease expired"}`, `{"decision":"allow","assurance":""}`,
		`{"decision":"allow","decision":"deny","code":"x"}`,
		`{"decision":"allow"} trailing`, `{"decision":"allow"}{"decision":"allow"}`,
		"\ufeff{\"decision\":\"allow\"}", "{\"decision\":\"allow\"}\x00",
		"{\"decision\":\"allow\",\"message\":\"\xff\xfe\"}",
		`{"decision":"deny","code":"x","message":"` + strings.Repeat("m", 5000) + `"}`,
		`{"decision":"` + strings.Repeat("d", 5000) + `"}`,
		`{"decision":"allow","x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"decision":"allow","assurance":"guarded"` + strings.Repeat(` `, 1000) + `}`,
		`{"decision":"allow",}`, `{"decision":"allow"`, `{"decision":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		resp, why, _ := parseResponse(out)
		if why != "" {
			if len(why) > 256 || !utf8.ValidString(why) {
				t.Fatalf("reason of %d bytes (valid UTF-8: %v): %.200q", len(why), utf8.ValidString(why), why)
			}
			// The error Consult builds from it, whose detail the audit
			// stores: bounded whatever the output (at most 256 bytes of
			// it, quoted: 4 characters a byte at worst).
			e := authErr(model.CodeAuthorityInvalidResponse, stdoutErr(nil, out), "the authority adapter's answer is invalid: %s", why)
			if e.Code != model.CodeAuthorityInvalidResponse || e.Hint == "" || len(e.Message) > 512 || len(e.Err.Error()) > 256*4+64 {
				t.Fatalf("error of %d bytes, detail of %d: %.300q", len(e.Message), len(e.Err.Error()), e.Error())
			}
			return
		}
		if !json.Valid(out) || bytes.TrimLeft(out, " \t\r\n")[0] != '{' {
			t.Fatalf("accepted %q, which is not one JSON object", out)
		}
		switch resp.Decision {
		case spec.DecisionAllow:
			if resp.Code != "" {
				t.Fatalf("allow kept a code: %+v", resp)
			}
		case spec.DecisionDeny:
			if !ValidID(resp.Code) {
				t.Fatalf("deny with code %q accepted", resp.Code)
			}
		default:
			t.Fatalf("decision %q accepted", resp.Decision)
		}
		switch model.Assurance(resp.Assurance) {
		case "", model.AssuranceStandard, model.AssuranceGuarded:
		default:
			t.Fatalf("assurance %q accepted", resp.Assurance)
		}
		enc, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		back, why, err := parseResponse(enc)
		if why != "" {
			t.Fatalf("re-encoded answer %s refused: %s (%v)", enc, why, err)
		}
		if back != resp {
			t.Fatalf("round trip changed the answer\n in: %+v\nout: %+v", resp, back)
		}
	})
}
