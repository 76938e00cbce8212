package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// table prints aligned columns for humans.
type table struct {
	tw *tabwriter.Writer
	// wide prints cells whole (still one line, still safeText).
	wide bool
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) { t.rowMax(60, cols...) }

// rowMax is row with each cell cut to max runes.
func (t *table) rowMax(max int, cols ...string) {
	if t.wide {
		max = math.MaxInt
	}
	for i, c := range cols {
		cols[i] = oneLine(c, max)
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

// rowWrap is row with its last cell wrapped instead of cut (a reason the
// row is about, too long to be read cut): what does not fit goes on lines
// of its own under that cell, the other cells of those lines empty, so
// the columns stay aligned.
func (t *table) rowWrap(cols ...string) {
	last := len(cols) - 1
	if t.wide || last < 0 {
		t.row(cols...)
		return
	}
	lines := wrap(safeText(cols[last]), 60)
	cols[last] = lines[0]
	t.row(cols...)
	for _, l := range lines[1:] {
		fmt.Fprintln(t.tw, strings.Repeat("\t", last)+l)
	}
}

// wrap breaks s into lines of at most n runes, between words where it
// can; a word longer than n is broken too.
func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		for utf8.RuneCountInString(w) > n {
			if line != "" {
				lines, line = append(lines, line), ""
			}
			r := []rune(w)
			lines, w = append(lines, string(r[:n])), string(r[n:])
		}
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= n:
			line += " " + w
		default:
			lines, line = append(lines, line), w
		}
	}
	return append(lines, line)
}

func (t *table) flush() error { return t.tw.Flush() }

// oneLine makes s safe for one table cell: control characters shown as
// escapes (safeText), cut to n runes.
func oneLine(s string, n int) string {
	s = safeText(s)
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// safeText is s as a terminal shows it and never acts on it. Text the
// relay stored came from clients and agents (bodies, context ids, cwds,
// results, reasons); printed raw, an escape sequence in it could retitle
// or clear the operator's terminal, rewrite the line (\r) or reorder what
// is shown (bidi overrides). So each C0 control and DEL is written as
// \xNN (\t, \n and \r as such), each C1 control, bidi override, isolate
// or mark and line or paragraph separator as \uNNNN, and each byte that
// is not UTF-8 as \xNN; everything else, ordinary UTF-8 included, is
// kept. A backslash is kept as it is, so the escapes are for reading, not
// for parsing back: --json prints the exact text.
func safeText(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports the non-ASCII characters a terminal acts on or that
// change how the rest of the line is shown: C1 controls, the bidi
// embeddings, overrides, isolates and marks, and the line and paragraph
// separators.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1 controls (0x9b is CSI)
		return true
	case r >= 0x202a && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c: // LRM, RLM, ALM
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
