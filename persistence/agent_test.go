package persistence

import (
	"context"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestProbes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	if ps, err := db.Probes(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("Probes on a new database = %v, %v", ps, err)
	}
	later := t0.Add(time.Hour)
	for _, p := range []Probe{
		{Name: "codex", WorkedLive: false, At: t0, Reason: "codex-acp not found"},
		{Name: "claude", WorkedLive: true, At: t0, Reason: "end_turn"},
		{Name: "claude", WorkedLive: false, At: later, Reason: "timeout after 60s"}, // replaces the first
	} {
		if err := db.RecordProbe(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := db.Probes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Probe{
		{Name: "claude", WorkedLive: false, At: later, Reason: "timeout after 60s"},
		{Name: "codex", WorkedLive: false, At: t0, Reason: "codex-acp not found"},
	}
	if len(ps) != len(want) {
		t.Fatalf("Probes = %+v", ps)
	}
	for i := range want {
		if ps[i].Name != want[i].Name || ps[i].WorkedLive != want[i].WorkedLive ||
			!ps[i].At.Equal(want[i].At) || ps[i].Reason != want[i].Reason {
			t.Errorf("probe %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	if n := count(t, db, "audit_log", "kind = 'agent.probe' AND actor = ?", model.RelayAgent); n != 3 {
		t.Errorf("agent.probe rows = %d, want 3", n)
	}
	wantCode(t, db.RecordProbe(ctx, Probe{}), model.CodeInvalidArgs)
}
