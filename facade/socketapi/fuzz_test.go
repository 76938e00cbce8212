package socketapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hai-relay/relay/model"
)

// Fuzz targets of the socket API's request decoders (decode.go). The
// plain `go test` runs only the seeds below and those committed under
// testdata/fuzz/<Target>/ (a regression check); `just fuzz` runs each
// target for a minute.
//
// Every target checks the same contract:
//   - no panic, whatever the bytes;
//   - a refusal is a *model.Error with code invalid_args, or
//     payload_too_large exactly when the body is longer than the limit,
//     with a message and a hint, and a message that does not echo a large
//     input back (at most fuzzMaxErrorMessage bytes);
//   - an accepted body is one valid JSON object in valid UTF-8, and the
//     decoded value re-encodes to JSON that decodes to the same value.

// fuzzMax is the body limit the targets use: small, so that the
// payload_too_large path is reached too.
const fuzzMax = 2048

// fuzzMaxErrorMessage bounds an error message, whatever the input.
const fuzzMaxErrorMessage = 512

// apiFuzzSeeds are bodies every decoder target starts from: valid ones of
// each route and the hostile shapes of the reliability table.
func apiFuzzSeeds() []string {
	return []string{
		`{"to":"codex","body":"hi"}`,
		`{"to":"codex","body":"hi","context_id":"C-1","reply_to":"MSG-1","artifacts":[{"uri":"file:///repo/README.md","media_type":"text/markdown","name":"README"}]}`,
		`{"target":"claude","prompt":"echo hi","mission_id":"M-1","lease_id":"S-1","mode":"read_only","context_id":"C-1","reference_task_ids":["T-1"],"idempotency_key":"k","cwd":"/tmp"}`,
		`{"message_ids":["MSG-1","MSG-2"]}`,
		`{"agent":"claude","pid":12,"uid":1000,"kind":"mcp"}`,
		`{}`,
		``,
		`   `,
		`null`,
		`[]`,
		`"x"`,
		`{"to":"codex","body":"hi"} {}`,
		`{"to":"codex","body":"hi"}x`,
		`{"to":"codex","body":"hi","from":"gemini"}`,
		`{"to":1,"body":true}`,
		`{"message_ids":"MSG-1"}`,
		`{"message_ids":[1,2]}`,
		`{"pid":-1,"uid":1e400}`,
		`{"pid":99999999999999999999999}`,
		`{"to":"codex","body":"a\u0000b"}`,
		"{\"to\":\"codex\",\"body\":\"a\x00b\"}",
		"{\"to\":\"codex\",\"body\":\"\xff\xfe\"}",
		`{"to":"codex","body":"\ud800"}`,
		`{"to":"codex'; DROP TABLE messages; --","body":"1 OR 1=1"}`,
		`{"cwd":"../../etc","target":"claude","prompt":"x"}`,
		`{"artifacts":[{"uri":"file:///a/../../etc/passwd","x":1}]}`,
		`{"to":"codex","TO":"gemini","body":"x"}`,
		`{"to":"codex","to":"gemini","body":"x"}`,
		strings.Repeat("[", 64) + strings.Repeat("]", 64),
		`{"to":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"` + strings.Repeat("k", 1500) + `":1}`,
		`{"to":"codex","body":"` + strings.Repeat("x", fuzzMax) + `"}`,
		`{"to":"codex","body":"hi"}` + strings.Repeat(" ", fuzzMax-26),
		"\ufeff{}",
	}
}

// checkDecodeError checks a decoder's refusal of data.
func checkDecodeError(t *testing.T, data []byte, err error) {
	t.Helper()
	e, ok := err.(*model.Error)
	if !ok {
		t.Fatalf("error %T %v is not a *model.Error", err, err)
	}
	switch e.Code {
	case model.CodePayloadTooLarge:
		if len(data) <= fuzzMax {
			t.Fatalf("payload_too_large for %d bytes (limit %d)", len(data), fuzzMax)
		}
	case model.CodeInvalidArgs:
		if len(data) > fuzzMax {
			t.Fatalf("invalid_args for %d bytes, over the limit %d: want payload_too_large", len(data), fuzzMax)
		}
	default:
		t.Fatalf("code %s (%v), want invalid_args or payload_too_large", e.Code, err)
	}
	if e.Message == "" || e.Hint == "" {
		t.Fatalf("error without message or hint: %#v", e)
	}
	if len(e.Message) > fuzzMaxErrorMessage {
		t.Fatalf("error message of %d bytes echoes the input: %.200q…", len(e.Message), e.Message)
	}
}

// checkAccepted checks an accepted body and the round trip of its value:
// decode(encode(v)) == v, through the same decoder.
func checkAccepted[T any](t *testing.T, data []byte, v T, decode func([]byte) (T, error)) {
	t.Helper()
	if len(data) > fuzzMax {
		t.Fatalf("accepted %d bytes, over the limit %d", len(data), fuzzMax)
	}
	if !utf8.Valid(data) {
		t.Fatalf("accepted a body that is not valid UTF-8: %q", data)
	}
	if !json.Valid(data) || bytes.TrimSpace(data)[0] != '{' {
		t.Fatalf("accepted a body that is not one JSON object: %q", data)
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("decoded value does not re-encode: %v", err)
	}
	back, err := decode(enc)
	if err != nil && len(enc) <= fuzzMax {
		t.Fatalf("re-encoded value %s is refused: %v", enc, err)
	}
	if err == nil && !reflect.DeepEqual(normalize(back), normalize(v)) {
		t.Fatalf("round trip changed the value\n in: %#v\nout: %#v\nvia %s", v, back, enc)
	}
}

// normalize makes nil and empty slices compare equal (omitempty drops an
// empty slice, which then decodes as nil).
func normalize(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice && rv.Len() == 0 {
		return nil
	}
	if rv.Kind() != reflect.Struct {
		return v
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	for i := 0; i < cp.NumField(); i++ {
		f := cp.Field(i)
		if f.Kind() == reflect.Slice && f.Len() == 0 && f.CanSet() {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return cp.Interface()
}

func addAPISeeds(f *testing.F) {
	for _, s := range apiFuzzSeeds() {
		f.Add([]byte(s))
	}
}

// fuzzDecoder fuzzes one request decoder: every input is refused with a
// proper error or accepted as checkAccepted requires.
func fuzzDecoder[T any](f *testing.F, dec func([]byte) (T, error)) {
	addAPISeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := dec(data)
		if err != nil {
			checkDecodeError(t, data, err)
			return
		}
		checkAccepted(t, data, v, dec)
	})
}

func FuzzDecodeSendRequest(f *testing.F) {
	fuzzDecoder(f, func(b []byte) (model.SendRequest, error) { return DecodeSendRequest(bytes.NewReader(b), fuzzMax) })
}

func FuzzDecodeSubmitRequest(f *testing.F) {
	fuzzDecoder(f, func(b []byte) (model.SubmitRequest, error) { return DecodeSubmitRequest(bytes.NewReader(b), fuzzMax) })
}

func FuzzDecodeAckRequest(f *testing.F) {
	fuzzDecoder(f, func(b []byte) (AckRequest, error) {
		ids, err := DecodeAckRequest(bytes.NewReader(b), fuzzMax)
		return AckRequest{MessageIDs: ids}, err
	})
}

func FuzzDecodeConn(f *testing.F) {
	fuzzDecoder(f, func(b []byte) (model.Conn, error) { return DecodeConn(bytes.NewReader(b), fuzzMax) })
}

func FuzzDecodeEmpty(f *testing.F) {
	addAPISeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		err := DecodeEmpty(bytes.NewReader(data), fuzzMax)
		if err != nil {
			checkDecodeError(t, data, err)
			return
		}
		if len(data) > fuzzMax {
			t.Fatalf("accepted %d bytes, over the limit", len(data))
		}
		if tr := bytes.TrimSpace(data); len(tr) != 0 && !json.Valid(tr) {
			t.Fatalf("accepted %q as an empty body", data)
		}
	})
}
