package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// fakeRoomStore records the rows AuditIfRoom is asked for, and writes
// them while room is true.
type fakeRoomStore struct {
	mu   sync.Mutex
	room bool
	rows []model.AuditEvent
}

func (f *fakeRoomStore) AuditIfRoom(_ context.Context, ev model.AuditEvent) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.room {
		return false, nil
	}
	f.rows = append(f.rows, ev)
	return true, nil
}

// Refused connections write at most refusalRowsPerMinute rows a minute
// and none past the reserve; the next row written carries the count of
// those not written.
func TestRefusalAuditIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &fakeRoomStore{room: true}
	r := &refusalAudit{store: st, now: func() time.Time { return now }}
	ctx := context.Background()
	for pid := range 1000 {
		r.record(ctx, 4242, pid)
	}
	if len(st.rows) != refusalRowsPerMinute {
		t.Fatalf("%d rows for 1,000 refusals in a minute, want %d", len(st.rows), refusalRowsPerMinute)
	}
	now = now.Add(time.Minute)
	st.room = false
	r.record(ctx, 4242, 1) // the reserve is reached: counted
	st.room = true
	r.record(ctx, 4242, 2)
	last := st.rows[len(st.rows)-1]
	if want := "941"; last.Data["unrecorded"] != want || last.Kind != "socket.refused" || last.Actor != "uid:4242" {
		t.Errorf("the next row: %+v, want unrecorded %s", last, want)
	}
}
