package acpwire

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// TextBytes bounds the agent's message text the relay keeps of a run (the
// task's result): a string cut at it loses nothing the relay keeps.
const TextBytes = 256 << 10

// Bounds on a long line from the agent, as the stdout limiter hands it to
// the SDK (limiter.go). A line that fits the limiter's read buffer
// (64 KiB) passes as it is; a longer one is copied through a lineClipper,
// which cuts its long JSON strings. What the relay keeps of a run is
// bounded far below what a line may carry (the reply at maxResultBytes,
// every other field at maxToolField), so a cut string loses nothing the
// relay keeps, and a giant update is never held whole: neither by the
// limiter nor by the SDK, which reads whole lines and queues decoded
// notifications. A string's bound counts the bytes it decodes to (an escape
// counts as what it stands for), as the relay's own bounds do.
const (
	// clipTextBytes bounds a "text" string outside any array: the
	// agent's message text (session/update agent_message_chunk, whose
	// content is one block). It is the bound of the kept reply, so the
	// reply is the same prefix of the agent's text with or without the
	// cut.
	clipTextBytes = TextBytes
	// clipTextJSON bounds the same text as written: text made mostly of
	// escapes (six bytes for one) is cut here first, so that its line
	// still fits maxHeldLine; its kept prefix is then shorter than the
	// reply's bound, and marked.
	clipTextJSON = 3 * clipTextBytes
	// clipOtherBytes bounds every other string: tool-call fields (kept
	// at maxToolField), their content and raw input (not kept), mode and
	// option ids, error data (errText keeps 300 bytes).
	clipOtherBytes = 4 << 10
	// maxHeldLine bounds a line as it reaches the SDK, strings cut. A
	// notification longer than that even so is dropped (noted in the task
	// log); a request or response is a protocol violation.
	maxHeldLine = 1 << 20
)

// lineClipper copies one JSON line, fragment by fragment, as it arrives,
// cutting each string longer than its bound at a boundary between UTF-8
// sequences and escapes, with a mark of how many bytes were cut
// ("…[N bytes cut]", as model.Clip marks). It understands just enough
// JSON for that: strings and their escapes, the nesting of objects and
// arrays, which key a string is the value of, and the top-level "method"
// and "id". A valid JSON line stays valid; an invalid one stays invalid
// (the limiter's inspection refuses it). The copy stops growing at
// maxHeldLine (over), though the scan goes on to the end of the line.
type lineClipper struct {
	out  []byte
	raw  int  // bytes of the line scanned
	over bool // out reached maxHeldLine; the rest is not kept

	objects, arrays int // open objects and arrays, outside strings

	// The string being scanned.
	inStr   bool
	escape  int    // bytes of the current escape still to come
	escHead bool   // the next byte is the one after the backslash
	escRune rune   // the code point of a \uXXXX escape so far
	cutting bool   // its bound is reached: its bytes are counted, not kept
	kept    int    // bytes its kept content decodes to
	keptRaw int    // bytes of its content kept, as written
	cut     int    // bytes of its content cut
	bound   int    // its bound, decoded
	rawMax  int    // its bound, as written
	depth   int    // objects+arrays where it began
	head    []byte // its first keyHead bytes, to tell keys and methods

	lastStr   string // the last string's head: a key, if a ':' follows
	lastDepth int    // its depth
	key       string // the key whose value is next (set at ':')
	keyDepth  int    // its depth (1: a key of the line's object)
	colon     bool   // the last byte outside strings, spaces aside, was ':'

	method string // the value of the line's "method", if seen
	hasID  bool   // the line has an "id"

	cutStrings int // strings cut in this line

	quoteAt int // in the fragment being scanned: the next quote at or after the scan, or its length
}

// keyHead is as much of a string as is kept to compare it with a key or a
// method name.
const keyHead = 64

func (c *lineClipper) reset() {
	*c = lineClipper{out: c.out[:0], head: c.head[:0]}
}

func (c *lineClipper) emit(b ...byte) {
	if c.over {
		return
	}
	if len(c.out)+len(b) > maxHeldLine {
		c.over = true
		return
	}
	c.out = append(c.out, b...)
}

// write scans p, the next bytes of the line (not its final newline).
func (c *lineClipper) write(p []byte) {
	c.raw += len(p)
	c.quoteAt = -1
	for i := 0; i < len(p); i++ {
		if c.inStr {
			i = c.inString(p, i)
			continue
		}
		b := p[i]
		switch b {
		case '"':
			c.beginString()
		case ':':
			c.key, c.keyDepth, c.colon = c.lastStr, c.lastDepth, true
			if c.key == "id" && c.keyDepth == 1 {
				c.hasID = true
			}
		case ' ', '\t', '\r', '\n':
		case '{':
			c.objects++
			c.colon = false
		case '}':
			c.objects--
			c.colon = false
		case '[':
			c.arrays++
			c.colon = false
		case ']':
			c.arrays--
			c.colon = false
		default:
			c.colon = false
		}
		c.emit(b)
	}
}

func (c *lineClipper) beginString() {
	c.inStr, c.escape, c.cutting, c.kept, c.keptRaw, c.cut = true, 0, false, 0, 0, 0
	c.head = c.head[:0]
	c.depth = c.objects + c.arrays
	c.bound, c.rawMax = clipOtherBytes, 6*clipOtherBytes
	if c.colon && c.key == "text" && c.arrays == 0 {
		c.bound, c.rawMax = clipTextBytes, clipTextJSON
	}
}

// inString scans the string at p[i] and returns the index of the last
// byte it consumed: one byte of an escape or a quote, or a plain run up to
// the next quote or backslash, kept up to the bound (and on to the end of
// its UTF-8 sequence) and counted as cut beyond it.
func (c *lineClipper) inString(p []byte, i int) int {
	if c.cutting && c.escape == 0 {
		return c.skipString(p, i)
	}
	b := p[i]
	if c.escape > 0 {
		c.escape--
		switch {
		case c.escHead && b == 'u':
			c.escape, c.escRune = 4, 0
		case c.escHead:
		default:
			c.escRune = c.escRune<<4 | rune(hexValue(b))
		}
		decoded := 0
		if c.escape == 0 {
			decoded = 1 // \n, \", …
			if !c.escHead {
				decoded = escapedLen(c.escRune)
			}
		}
		c.escHead = false
		c.take(p[i:i+1], decoded)
		return i
	}
	switch b {
	case '"':
		c.endString()
		return i
	case '\\':
		if !c.cutting && (c.kept >= c.bound || c.keptRaw >= c.rawMax) {
			c.cutting = true // an escape is a boundary: cut from it on
		}
		c.escape, c.escHead = 1, true
		c.take(p[i:i+1], 0)
		return i
	}
	j := c.special(p, i)
	run := p[i:j]
	if !c.cutting {
		k := len(run)
		if room := min(c.bound-c.kept, c.rawMax-c.keptRaw); room < k {
			k = max(room, 0)
			for k < len(run) && !utf8.RuneStart(run[k]) {
				k++
			}
		}
		c.take(run[:k], k)
		if run = run[k:]; len(run) > 0 {
			c.cutting = true
		}
	}
	c.take(run, len(run))
	return j - 1
}

// skipString counts the rest of a string being cut, from p[i] to its
// closing quote (which it hands to endString) or the fragment's end, and
// returns the index of the last byte it consumed. Only an escape's next
// byte matters here: the hex digits of a \uXXXX are neither quote nor
// backslash.
func (c *lineClipper) skipString(p []byte, i int) int {
	for {
		k := c.special(p, i)
		c.cut += k - i
		switch {
		case k == len(p):
			return k - 1
		case p[k] == '"':
			c.endString()
			return k
		case k+1 < len(p):
			c.cut += 2
			i = k + 2
			if i == len(p) {
				return i - 1
			}
		default: // a backslash ending the fragment
			c.cut++
			c.escape, c.escHead = 1, true
			return k
		}
	}
}

// special is the index of the first quote or backslash in p from i on,
// or len(p). The next quote's index is kept for the fragment: a string
// full of escapes would otherwise search the fragment's rest again at each.
func (c *lineClipper) special(p []byte, i int) int {
	if c.quoteAt < i {
		c.quoteAt = len(p)
		if q := bytes.IndexByte(p[i:], '"'); q >= 0 {
			c.quoteAt = i + q
		}
	}
	if b := bytes.IndexByte(p[i:c.quoteAt], '\\'); b >= 0 {
		return i + b
	}
	return c.quoteAt
}

func hexValue(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return b - '0'
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10
	case b >= 'A' && b <= 'F':
		return b - 'A' + 10
	}
	return 0
}

// escapedLen is how many bytes a \uXXXX escape decodes to: a surrogate
// half counts two, a pair the four of its code point.
func escapedLen(r rune) int {
	switch {
	case r < 0x80:
		return 1
	case r < 0x800 || (r >= 0xd800 && r <= 0xdfff):
		return 2
	}
	return 3
}

// take keeps, or once cutting counts, bytes of the current string that
// decode to decoded bytes.
func (c *lineClipper) take(b []byte, decoded int) {
	if c.cutting {
		c.cut += len(b)
		return
	}
	if n := keyHead - len(c.head); n > 0 {
		c.head = append(c.head, b[:min(n, len(b))]...)
	}
	c.kept += decoded
	c.keptRaw += len(b)
	c.emit(b...)
}

func (c *lineClipper) endString() {
	if c.cut > 0 {
		c.cutStrings++
		c.emit([]byte("…[" + strconv.Itoa(c.cut) + " bytes cut]")...)
	}
	c.emit('"')
	c.inStr = false
	c.lastStr, c.lastDepth = string(c.head), c.depth
	if c.colon && c.key == "method" && c.keyDepth == 1 {
		c.method = c.lastStr
	}
	c.colon = false
}
