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
	r.recordEvent(ctx, model.AuditEvent{Kind: "socket.refused", Actor: "uid:" + strconv.Itoa(uid),
		Data: map[string]string{"uid": strconv.Itoa(uid), "pid": strconv.Itoa(pid)}})
}

// identity audits (or counts) one request refused identity_mismatch: a
// process inside a task that claimed another identity, or one that could
// not be placed while tasks ran.
func (r *refusalAudit) identity(ctx context.Context, claimed, taskID, target string, pid int, why string) {
	r.recordEvent(ctx, model.AuditEvent{Kind: "facade.identity_refused", Actor: claimed, TaskID: taskID,
		Data: map[string]string{"claimed": claimed, "task_id": taskID, "target": target, "pid": strconv.Itoa(pid), "why": why}})
}

// recordEvent audits ev (its time set here), or counts it when this
// minute's rows are used up or the storage reserve is reached; the next
// row written carries the count.
func (r *refusalAudit) recordEvent(ctx context.Context, ev model.AuditEvent) {
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

	if carried > 0 {
		ev.Data["unrecorded"] = strconv.Itoa(carried)
	}
	ev.At = now.UTC()
	wrote, err := r.store.AuditIfRoom(ctx, ev)
	if err != nil || !wrote {
		r.mu.Lock()
		r.unrecorded += carried + 1
		r.mu.Unlock()
	}
}
