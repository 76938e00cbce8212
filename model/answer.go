package model

import "encoding/json"

// AnswerBytes bounds a listing answer (check_inbox, list_tasks, the
// operator's task and message lists) as the daemon encodes it on the wire:
// a page stops before the item that would take its JSON past this many
// bytes, so it may hold fewer items than its limit; check_inbox's unread
// count says what is left. A page always holds its first item, so one item
// larger than the bound is still delivered, alone (each item is bounded by
// the stored-field bounds; a default-sized message body escapes to at most
// 1.5 MiB and fits).
//
// The bound is well under every transport limit on the way: the socket API
// client reads at most 64 MiB, and the MCP facade repeats the answer as
// structured content and as text (at most 3 × AnswerBytes a frame, under
// the 16 MiB the facade accepts in a line from its client).
const AnswerBytes = 2 << 20

// AnswerEnvelopeBytes is what a listing answer spends around its items:
// the object, its array's brackets, a count, the trailing newline. Its
// items get AnswerBytes less this, and one comma between each two.
const AnswerEnvelopeBytes = 64

// EncodedLen returns the length of v as encoding/json's Marshal encodes it
// (HTML-escaped, as the daemon answers), without keeping the bytes. It
// returns -1 when v cannot be encoded.
func EncodedLen(v any) int {
	var c countingWriter
	if err := json.NewEncoder(&c).Encode(v); err != nil {
		return -1
	}
	return c.n - 1 // Encode ends with a newline; Marshal does not
}

type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// ByteBudget is the byte budget of one listing answer: it counts the
// encoded items taken into the answer and says when the next one would
// take it past its bound.
type ByteBudget struct {
	left, n int
}

// NewByteBudget returns the budget of an answer that may take bytes in
// all (0 means AnswerBytes), its envelope included.
func NewByteBudget(bytes int) ByteBudget {
	if bytes <= 0 {
		bytes = AnswerBytes
	}
	return ByteBudget{left: bytes - AnswerEnvelopeBytes}
}

// Take reports whether an item whose JSON is size bytes still fits, and if
// so counts it in. The first item always fits.
func (b *ByteBudget) Take(size int) bool {
	cost := size
	if b.n > 0 {
		cost++ // the comma before it
		if cost > b.left {
			return false
		}
	}
	b.left -= cost
	b.n++
	return true
}
