package main

import "testing"

// TestSafeTextEscapesWhatATerminalActsOn: controls, C1, bidi and bytes
// that are not UTF-8 become visible escapes; ordinary text, UTF-8
// included, is kept as it is.
func TestSafeTextEscapesWhatATerminalActsOn(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain ascii, /a/b c":      "plain ascii, /a/b c",
		"héllo 世界 ✓ ½ — «» 🙂":      "héllo 世界 ✓ ½ — «» 🙂",
		"\x1b]0;pwned\x07":         `\x1b]0;pwned\x07`,
		"\x1b[2J\r\n\t\x00\x7f":    `\x1b[2J\r\n\t\x00\x7f`,
		"a\u009b31mb\u0085c":       `a\u009b31mb\u0085c`,
		"\u202a\u202e\u2066\u2069": `\u202a\u202e\u2066\u2069`,
		"\u200e\u200f\u061c":       `\u200e\u200f\u061c`,
		"x\u2028y\u2029z":          `x\u2028y\u2029z`,
		"bad \xff\xc3 utf8":        `bad \xff\xc3 utf8`,
		`back\slash`:               `back\slash`,
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := oneLine("\x1b[2J", 60); got != `\x1b[2J` {
		t.Errorf("oneLine = %q", got)
	}
}
