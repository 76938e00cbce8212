package dispatch

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Bounds of what a failed task's message quotes of the agent's stderr.
const (
	tailLines    = 3   // the last meaningful lines
	tailLineMax  = 240 // bytes of each, after sanitizing
	tailPartial  = 4096
	tailMaxTotal = tailLines * (tailLineMax + 8)
)

// stderrTail passes the agent's stderr on to the task log and keeps its
// last few meaningful lines, sanitized and bounded, so that a failed task
// can say in its own message why the agent gave up (the log holds the
// rest). A meaningful line has a letter in it and is not a stack frame.
type stderrTail struct {
	w io.Writer

	mu      sync.Mutex
	partial []byte // the current line so far (bounded)
	lines   []string
}

func newStderrTail(w io.Writer) *stderrTail { return &stderrTail{w: w} }

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if room := tailPartial - len(t.partial); room > 0 {
				t.partial = append(t.partial, rest[:min(room, len(rest))]...)
			}
			break
		}
		if room := tailPartial - len(t.partial); room > 0 {
			t.partial = append(t.partial, rest[:min(room, i)]...)
		}
		t.keep(t.partial)
		t.partial = t.partial[:0]
		rest = rest[i+1:]
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// keep records a finished line if it is meaningful. t.mu is held.
func (t *stderrTail) keep(line []byte) {
	s := sanitizeLine(string(line))
	if !meaningful(s) {
		return
	}
	t.lines = append(t.lines, clipText(s, tailLineMax))
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// Tail returns the last meaningful lines joined with " | ", or "".
func (t *stderrTail) Tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if s := sanitizeLine(string(t.partial)); meaningful(s) {
		lines = append(append([]string(nil), lines...), clipText(s, tailLineMax))
		if len(lines) > tailLines {
			lines = lines[len(lines)-tailLines:]
		}
	}
	return clipText(strings.Join(lines, " | "), tailMaxTotal)
}

func meaningful(s string) bool {
	if strings.HasPrefix(s, "at ") || strings.HasPrefix(s, "^") {
		return false // a JS stack frame, a caret under a source line
	}
	return strings.IndexFunc(s, unicode.IsLetter) >= 0
}

// sanitizeLine drops terminal escape sequences and control characters,
// turns invalid UTF-8 into U+FFFD and trims the line.
func sanitizeLine(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b: // ESC: skip a CSI sequence (ESC [ … final byte) or the next byte
			i += size
			if i < len(s) && s[i] == '[' {
				i++
				for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
					i++
				}
			}
			i++
			continue
		case r == '\t':
			b.WriteByte(' ')
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return strings.TrimSpace(b.String())
}

// clipText cuts s to at most n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
