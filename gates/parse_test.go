package gates

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestParseResponse covers the response grammar in-process; the adapter
// tests cover the same through a real subprocess.
func TestParseResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out       string
		ok        bool
		decision  string
		assurance string
		code      string
	}{
		{`{"decision":"allow","assurance":"guarded"}`, true, "allow", "guarded", ""},
		{`{"decision":"allow","assurance":"standard"}` + "\n", true, "allow", "standard", ""},
		{`{"decision":"allow"}`, true, "allow", "", ""},
		{" \r\n\t" + `{"decision":"allow"} ` + "\n\n", true, "allow", "", ""},
		{`{"decision":"allow","assurance":null}`, true, "allow", "", ""},
		{`{"decision":"allow","code":"ignored_on_allow"}`, true, "allow", "", ""},
		{`{"decision":"allow","ttl":30,"nested":{"decision":"deny"},"list":[1,2]}`, true, "allow", "", ""},
		{`{"decision":"allow","message":"\ud83d\ude00 ok"}`, true, "allow", "", ""}, // a surrogate pair is one character
		{`{"decision":"deny","code":"lease_expired","message":"expired"}`, true, "deny", "", "lease_expired"},
		{`{"decision":"deny","code":"contract_version_mismatch"}`, true, "deny", "", "contract_version_mismatch"},
		{`{"code":"x","decision":"deny"}`, true, "deny", "", "x"},

		{``, false, "", "", ""},
		{"  \n", false, "", "", ""},
		{`null`, false, "", "", ""},
		{`"allow"`, false, "", "", ""},
		{`[{"decision":"allow"}]`, false, "", "", ""},
		{`{}`, false, "", "", ""},
		{`{"decision":null}`, false, "", "", ""},
		{`{"decision":""}`, false, "", "", ""},
		{`{"decision":"Allow"}`, false, "", "", ""},
		{`{"DECISION":"allow"}`, false, "", "", ""},
		{`{"decision":"maybe"}`, false, "", "", ""},
		{`{"decision":true}`, false, "", "", ""},
		{`{"decision":"allow","assurance":""}`, false, "", "", ""},
		{`{"decision":"allow","assurance":"GUARDED"}`, false, "", "", ""},
		{`{"decision":"allow","assurance":1}`, false, "", "", ""},
		{`{"decision":"allow","message":{}}`, false, "", "", ""},
		{`{"decision":"deny"}`, false, "", "", ""},
		{`{"decision":"deny","code":""}`, false, "", "", ""},
		{`{"decision":"deny","code":null}`, false, "", "", ""},
		{`{"decision":"deny","code":"lease expired"}`, false, "", "", ""},
		{`{"decision":"deny","code":"` + strings.Repeat("c", 129) + `"}`, false, "", "", ""},
		{`{"decision":"deny","code":"x","assurance":"bogus"}`, false, "", "", ""},
		{`{"decision":"allow","decision":"deny","code":"x"}`, false, "", "", ""},
		{`{"decision":"allow"} x`, false, "", "", ""},
		{`{"decision":"allow"}{"decision":"allow"}`, false, "", "", ""},
		{`{"decision":"allow"}` + "\n" + `{"decision":"deny","code":"x"}`, false, "", "", ""},
		{`{"decision":"allow"`, false, "", "", ""},
		{`{"decision":"allow",}`, false, "", "", ""},
		{"\ufeff" + `{"decision":"allow"}`, false, "", "", ""},
		{`{"decision":"allow"}` + "\x00", false, "", "", ""},
		// Nothing that encoding/json would alter or choose among: keys
		// differing only in case (either could be "the" decision), a key
		// twice at any depth, lone surrogates, invalid UTF-8.
		{`{"decision":"allow","Decision":"deny"}`, false, "", "", ""},
		{`{"DECISION":"deny","decision":"allow"}`, false, "", "", ""},
		{`{"decision":"allow","assurance":"guarded","ASSURANCE":"standard"}`, false, "", "", ""},
		{`{"decision":"allow","trace":{"id":1,"id":2}}`, false, "", "", ""},
		{`{"decision":"deny","code":"x","message":"\ud800"}`, false, "", "", ""},
		{`{"decision":"deny","code":"x","message":"\udc00 expired"}`, false, "", "", ""},
		{`{"decision":"deny","code":"x","message":"\ud800\u0041"}`, false, "", "", ""},
		{`{"decision":"allow","trace":["\ud800"]}`, false, "", "", ""},
		{"{\"decision\":\"deny\",\"code\":\"x\",\"message\":\"\xff\"}", false, "", "", ""},
		{"{\"decision\":\"allow\",\"tr\xc3\x28ce\":1}", false, "", "", ""},
	}
	for _, tt := range tests {
		resp, why, _ := parseResponse([]byte(tt.out))
		if (why == "") != tt.ok {
			t.Errorf("parseResponse(%q): why %q, want ok=%v", tt.out, why, tt.ok)
			continue
		}
		if tt.ok && (resp.Decision != tt.decision || resp.Assurance != tt.assurance || resp.Code != tt.code) {
			t.Errorf("parseResponse(%q) = %+v", tt.out, resp)
		}
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 7, 64, 4096} {
		for _, size := range []int{0, 1, max / 2, max, max + 1, 3 * max, 100_000} {
			data := make([]byte, size)
			for i := range data {
				data[i] = 'a' + byte(rng.IntN(26))
			}
			e := newExcerpt(max)
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(2*max+3))
				if k, err := e.Write(rest[:n]); k != n || err != nil {
					t.Fatalf("Write = %d, %v", k, err)
				}
				rest = rest[n:]
			}
			got := e.String()
			if size <= max {
				if got != string(data) {
					t.Errorf("max %d size %d: got %q, want all of it", max, size, got)
				}
				continue
			}
			h := max / 2
			head, tail := string(data[:h]), string(data[size-(max-h):])
			if !strings.HasPrefix(got, head) || !strings.HasSuffix(got, tail) ||
				!strings.Contains(got, "bytes omitted") || len(got) > max+64 {
				t.Errorf("max %d size %d: excerpt %q", max, size, got)
			}
		}
	}
	e := newExcerpt(8)
	_, _ = e.Write(bytes.Repeat([]byte("é"), 10)) // cut mid-rune: still valid UTF-8
	if s := e.String(); !strings.Contains(s, "omitted") || strings.ToValidUTF8(s, "?") != s {
		t.Errorf("excerpt %q", s)
	}
}
