package service

import (
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// Connection rows are bounded per agent: each process once, at most
// connRowsPerMinute a minute; the rest are counted and the next row
// carries the count; a row not written gives its place back.
func TestConnLogBoundsRowsPerAgent(t *testing.T) {
	t.Parallel()
	var l connLog
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	conn := func(agent string, pid int) model.Conn { return model.Conn{Agent: agent, PID: pid, UID: 1, Kind: "mcp"} }
	if _, ok := l.admit(conn("claude", 1), t0); !ok {
		t.Fatal("a first connection is not written")
	}
	if _, ok := l.admit(conn("claude", 1), t0); ok {
		t.Fatal("the same process is written twice")
	}
	written := 1
	for pid := 2; pid < 1000; pid++ {
		if _, ok := l.admit(conn("claude", pid), t0.Add(time.Second)); ok {
			written++
		}
	}
	if written != connRowsPerMinute {
		t.Fatalf("%d rows in a minute, want %d", written, connRowsPerMinute)
	}
	if _, ok := l.admit(conn("codex", 1), t0.Add(time.Second)); !ok {
		t.Fatal("another agent is held to claude's rate")
	}
	n, ok := l.admit(conn("claude", 5000), t0.Add(time.Minute+time.Second))
	if !ok || n != 998-(connRowsPerMinute-1) {
		t.Fatalf("the next minute's first row: %v carrying %d unrecorded, want %d", ok, n, 998-(connRowsPerMinute-1))
	}
	l.unwritten(conn("claude", 5000), n)
	if n2, ok := l.admit(conn("claude", 5000), t0.Add(time.Minute+2*time.Second)); !ok || n2 != n+1 {
		t.Fatalf("after a row not written: %v carrying %d, want %d", ok, n2, n+1)
	}
}
