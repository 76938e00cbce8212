package machine

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newID returns prefix-XXXXXXXXXXXXXXXXXXXXXXXXXX: a 48-bit millisecond
// timestamp and 80 random bits in Crockford base32 (a ULID), so ids sort by
// creation time and never collide in practice.
func newID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	var out [26]byte
	// 128 bits → 26 base32 digits, most significant first.
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + "-" + string(out[:])
}

// NewID returns a fresh id with the given prefix (T for tasks, M for
// messages). It is exported for the transports that create messages.
func NewID(prefix string) string { return newID(prefix) }
