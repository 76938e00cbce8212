package service

import (
	"sync"
	"time"

	"github.com/hai-relay/relay/model"
)

// Bounds of the connection rows of the audit log (see Connected).
const (
	// connRowsPerMinute is how many facade.connected rows one agent's
	// connections may write a minute: a facade connects once, so this is
	// many agents' worth starting at once.
	connRowsPerMinute = 60
	// connSeenMax bounds the processes remembered as audited; past it the
	// memory starts over (a process then audited again is still held to
	// the rate).
	connSeenMax = 4096
)

// connLog decides which connections are written to the audit log: each
// process once, each agent at most connRowsPerMinute a minute; the others
// are counted per agent, for its next row.
type connLog struct {
	mu         sync.Mutex
	seen       map[model.Conn]bool
	windows    map[string]connWindow
	unrecorded map[string]int
}

// connWindow is one agent's rows in the current minute.
type connWindow struct {
	start time.Time
	rows  int
}

// admit reports whether c's connection is to be written, with the count
// of the agent's connections left unwritten before it (which the row
// carries). A repeat of a process already written is neither written nor
// counted: it changes nothing.
func (l *connLog) admit(c model.Conn, now time.Time) (unrecorded int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) >= connSeenMax {
		l.seen = map[model.Conn]bool{}
	}
	if l.windows == nil {
		l.windows, l.unrecorded = map[string]connWindow{}, map[string]int{}
	}
	if l.seen[c] {
		return 0, false
	}
	w := l.windows[c.Agent]
	if now.Sub(w.start) >= time.Minute || now.Before(w.start) {
		w = connWindow{start: now}
	}
	if w.rows >= connRowsPerMinute {
		l.unrecorded[c.Agent]++
		return 0, false
	}
	w.rows++
	l.windows[c.Agent] = w
	l.seen[c] = true
	n := l.unrecorded[c.Agent]
	delete(l.unrecorded, c.Agent)
	return n, true
}

// unwritten takes back what admit gave c when its row was not written
// (the reserve is reached, or the write failed): the connection and the
// count it carried are counted for the agent's next row, and the process
// may be written when it connects again.
func (l *connLog) unwritten(c model.Conn, carried int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.seen, c)
	l.unrecorded[c.Agent] += carried + 1
}
