package persistence

import (
	"context"
	"path/filepath"
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

func TestVerifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	if vs, err := db.Verifications(ctx); err != nil || len(vs) != 0 {
		t.Fatalf("Verifications on a new database = %v, %v", vs, err)
	}
	later := t0.Add(time.Hour)
	attempt := model.VerifyAttempt{Name: "shell", Mode: model.ModeReadOnly, Tool: "Bash", Target: "/tmp/x/shell-ran",
		StoppedBy: model.StopNotStopped, Detail: "/tmp/x/shell-ran exists"}
	for _, v := range []model.Verification{
		{Agent: "claude", Status: model.HardeningVerified, At: t0, AdapterVersion: "0.23.1", Profile: "claude-agent-acp",
			Reason: "all 6 attempts stopped", Attempts: []model.VerifyAttempt{{Name: "shell", StoppedBy: model.StopToolNotOffered}}},
		{Agent: "opencode", Status: model.HardeningUnverified, At: t0, Reason: "no hardening profile"}, // nil attempts
		{Agent: "claude", Status: model.HardeningFailed, At: later, AdapterVersion: "0.23.1", Profile: "claude-agent-acp",
			Reason: "1 of 6 attempts NOT STOPPED", Attempts: []model.VerifyAttempt{attempt}}, // replaces the first
	} {
		if err := db.RecordVerification(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := db.Verifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Agent != "claude" || vs[1].Agent != "opencode" {
		t.Fatalf("Verifications = %+v", vs)
	}
	c := vs[0]
	if c.Status != model.HardeningFailed || !c.At.Equal(later) || c.AdapterVersion != "0.23.1" || c.Profile != "claude-agent-acp" ||
		c.Reason != "1 of 6 attempts NOT STOPPED" || len(c.Attempts) != 1 || c.Attempts[0] != attempt {
		t.Errorf("claude = %+v", c)
	}
	if o := vs[1]; o.Status != model.HardeningUnverified || o.Attempts == nil || len(o.Attempts) != 0 {
		t.Errorf("opencode = %+v", o)
	}
	if n := count(t, db, "audit_log", "kind = 'agent.verify' AND actor = ?", model.RelayAgent); n != 3 {
		t.Errorf("agent.verify rows = %d, want 3", n)
	}
	if n := count(t, db, "audit_log", "kind = 'agent.verify' AND data LIKE ?", `%"stopped.not_stopped":"1"%`); n != 1 {
		t.Errorf("agent.verify rows counting the attempt not stopped = %d, want 1", n)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Errorf("VerifyAudit = %+v, %v", rep, err)
	}
	wantCode(t, db.RecordVerification(ctx, model.Verification{Status: model.HardeningVerified}), model.CodeInvalidArgs)
	wantCode(t, db.RecordVerification(ctx, model.Verification{Agent: "x", Status: "great"}), model.CodeInvalidArgs)
	// Probes and verifications are kept apart.
	if ps, err := db.Probes(ctx); err != nil || len(ps) != 0 {
		t.Errorf("Probes = %v, %v", ps, err)
	}
}

// A database of the schema before agent_verifications migrates forward
// with its probes intact, and takes verifications.
func TestMigrateAddsAgentVerifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	const before = 3 // 0003_task_request_sha256
	old, err := Open(ctx, path, Options{MigrateTo: before})
	if err != nil {
		t.Fatal(err)
	}
	if count(t, old, "sqlite_master", "name = 'agent_verifications'") != 0 {
		t.Fatal("agent_verifications exists before its migration")
	}
	// The probe is written as the old code did, without the columns it
	// did not have.
	if err := old.write(ctx, func(ctx context.Context, w *writeTx) error {
		_, err := w.ExecContext(ctx, `INSERT INTO agents (name, worked_live, worked_live_at, worked_live_reason, updated_at)
			VALUES ('claude', 1, ?, 'end_turn', ?)`, formatTime(t0), formatTime(t0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	db := MustOpen(t, path, Options{})
	if ps, err := db.Probes(ctx); err != nil || len(ps) != 1 || !ps[0].WorkedLive {
		t.Fatalf("Probes after migrating = %+v, %v", ps, err)
	}
	if err := db.RecordVerification(ctx, model.Verification{Agent: "claude", Status: model.HardeningVerified, At: t0}); err != nil {
		t.Fatal(err)
	}
	if vs, err := db.Verifications(ctx); err != nil || len(vs) != 1 {
		t.Fatalf("Verifications after migrating = %+v, %v", vs, err)
	}
}
