package main

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hai-relay/relay/model"
)

// refusalRowsPerMinute bounds the socket.refused audit rows: a connection
// from another uid is refused before any request is read, and a process
// of that uid could connect in a loop.
const refusalRowsPerMinute = 60

// refusalAudit writes the audit rows of refused connections, at most
// refusalRowsPerMinute a minute and not past the free-space reserve; a
// refusal past those is counted, and the next row carries the count
// ("unrecorded"), so that another user cannot grow the log, nor fill the
// disk, by connecting in a loop.
type refusalAudit struct {
	store interface {
		AuditIfRoom(ctx context.Context, ev model.AuditEvent) (bool, error)
	}
	now func() time.Time

	mu         sync.Mutex
	start      time.Time
	rows       int
	unrecorded int
}

// record audits (or counts) one refused connection.
func (r *refusalAudit) record(ctx context.Context, uid, pid int) {
	now := r.now()
	r.mu.Lock()
	if now.Sub(r.start) >= time.Minute || now.Before(r.start) {
		r.start, r.rows = now, 0
	}
	if r.rows >= refusalRowsPerMinute {
		r.unrecorded++
		r.mu.Unlock()
		return
	}
	r.rows++
	carried := r.unrecorded
	r.unrecorded = 0
	r.mu.Unlock()

	d := map[string]string{"uid": strconv.Itoa(uid), "pid": strconv.Itoa(pid)}
	if carried > 0 {
		d["unrecorded"] = strconv.Itoa(carried)
	}
	wrote, err := r.store.AuditIfRoom(ctx, model.AuditEvent{At: now.UTC(), Kind: "socket.refused", Actor: "uid:" + strconv.Itoa(uid), Data: d})
	if err != nil || !wrote {
		r.mu.Lock()
		r.unrecorded += carried + 1
		r.mu.Unlock()
	}
}
