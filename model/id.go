package model

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewID returns prefix-XXXXXXXXXXXXXXXXXXXXXXXXXX: a 48-bit millisecond
// timestamp and 80 random bits in Crockford base32 (a ULID), so ids sort by
// creation time and never collide in practice. The prefix is TaskIDPrefix,
// MessageIDPrefix or "C" for a context; ValidTaskID and ValidMessageID
// check the shape.
func NewID(prefix string) string {
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
