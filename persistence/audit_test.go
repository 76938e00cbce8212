package persistence

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

func TestCanonicalAuditGolden(t *testing.T) {
	t.Parallel()
	ev := model.AuditEvent{Seq: 7, At: time.Date(2026, 3, 1, 12, 0, 0, 500000000, time.FixedZone("CET", 3600)),
		Kind: "task.transition", Actor: "relay", TaskID: "T-1",
		Data: map[string]string{"to": "authorized", "from": "submitted", "trigger": "authorize"},
		// Neither is covered by the encoding.
		PrevHash: "ignored", Hash: "ignored"}
	const want = "14:relay-audit-v1,1:7,22:2026-03-01T11:00:00.5Z,15:task.transition,5:relay,3:T-1,0:,1:3," +
		"4:from,9:submitted,2:to,10:authorized,7:trigger,9:authorize,"
	if got := string(CanonicalAudit(ev)); got != want {
		t.Fatalf("CanonicalAudit =\n%s\nwant\n%s", got, want)
	}
	// A fixed vector, so that a change of encoding cannot go unnoticed:
	// it would invalidate every chain already written.
	const wantHash = "078f88e8c2e86677b6b32c85262c8986c02332a4bc2040895b9c954408af9bbd"
	if got := ChainHash(GenesisHash, ev); got != wantHash {
		t.Fatalf("ChainHash = %s", got)
	}
}

func TestCanonicalAuditIsUnambiguous(t *testing.T) {
	t.Parallel()
	base := model.AuditEvent{Seq: 1, At: t0, Kind: "ab", Actor: "c"}
	shifted := model.AuditEvent{Seq: 1, At: t0, Kind: "a", Actor: "bc"}
	if string(CanonicalAudit(base)) == string(CanonicalAudit(shifted)) {
		t.Error("moving bytes between fields does not change the encoding")
	}
	d1 := model.AuditEvent{Seq: 1, At: t0, Kind: "k", Data: map[string]string{"a": "b,1:c"}}
	d2 := model.AuditEvent{Seq: 1, At: t0, Kind: "k", Data: map[string]string{"a": "b", "c": ""}}
	if string(CanonicalAudit(d1)) == string(CanonicalAudit(d2)) {
		t.Error("data entries can be forged by embedding separators")
	}
	// Map order and nil versus empty data do not matter.
	e1 := model.AuditEvent{Seq: 1, At: t0, Kind: "k"}
	e2 := model.AuditEvent{Seq: 1, At: t0, Kind: "k", Data: map[string]string{}}
	if string(CanonicalAudit(e1)) != string(CanonicalAudit(e2)) {
		t.Error("nil and empty data encode differently")
	}
	// The zone of At does not matter, the instant does.
	z := base
	z.At = t0.In(time.FixedZone("X", -7*3600))
	if string(CanonicalAudit(z)) != string(CanonicalAudit(base)) {
		t.Error("the same instant in another zone encodes differently")
	}
}

func TestAuditStandalone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	db := MustOpen(t, t.TempDir()+"/relay.db", Options{Clock: func() time.Time { return now }})
	wantCode(t, db.Audit(ctx, model.AuditEvent{Actor: "x"}), model.CodeInvalidArgs)
	if err := db.Audit(ctx, model.AuditEvent{Kind: "facade.connected", Actor: "claude",
		Data: map[string]string{"pid": "42", "bad utf8": "\xff\xfe"}, Seq: 99, Hash: "forged"}); err != nil {
		t.Fatal(err)
	}
	var seq int64
	var at, prev, hash string
	if err := db.reader.DB.QueryRow(`SELECT seq, at, prev_hash, hash FROM audit_log`).Scan(&seq, &at, &prev, &hash); err != nil {
		t.Fatal(err)
	}
	if seq != 1 || at != "2026-04-01T00:00:00Z" || prev != GenesisHash || hash == "forged" || len(hash) != 64 {
		t.Errorf("row = %d %s %s %s", seq, at, prev, hash)
	}
	rep, err := db.VerifyAudit(ctx)
	if err != nil || !rep.OK || rep.Rows != 1 || rep.Head != hash {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

func TestAuditEmptyChainVerifies(t *testing.T) {
	t.Parallel()
	rep, err := MustOpenTemp(t).VerifyAudit(context.Background())
	if err != nil || !rep.OK || rep.Rows != 0 || rep.Head != GenesisHash {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

func TestAuditConcurrentAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if err := db.Audit(ctx, model.AuditEvent{Kind: "test", Actor: fmt.Sprint(g), Data: map[string]string{"i": fmt.Sprint(i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Verification runs on a snapshot while appends continue.
	for range 5 {
		if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
			t.Errorf("VerifyAudit during appends = %+v, %v", rep, err)
		}
	}
	wg.Wait()
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK || rep.Rows != 200 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

// appendN appends n audit rows in batches, through the same chain code as
// every write, but fewer transactions so the test stays fast.
func appendN(t testing.TB, db *DB, n int) {
	t.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
			for i := 0; i < 500 && done < n; i, done = i+1, done+1 {
				ev := model.AuditEvent{At: t0.Add(time.Duration(done) * time.Millisecond), Kind: "test.event",
					Actor: "codex", TaskID: seqID("T", done%97), MessageID: "",
					Data: map[string]string{"n": fmt.Sprint(done), "note": "row, with: separators"}}
				if done%3 == 0 {
					ev.MessageID, ev.Data = seqID("m", done), nil
				}
				if err := w.audit(ctx, ev); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditChainVerifiesAfter10000Events(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	appendN(t, db, 9990)
	// The last ten go through the public paths.
	for i := range 5 {
		mustCreate(t, db, newTask(seqID("T", i)))
		if err := db.Audit(ctx, model.AuditEvent{Kind: "facade.connected", Actor: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := db.VerifyAudit(ctx)
	if err != nil || !rep.OK || rep.Rows != 10000 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	var head string
	if err := db.reader.DB.QueryRow(`SELECT hash FROM audit_head`).Scan(&head); err != nil || head != rep.Head {
		t.Fatalf("report head %s, audit_head %s (%v)", rep.Head, head, err)
	}
}

func TestAuditLogRefusesUpdateAndDelete(t *testing.T) {
	t.Parallel()
	db := MustOpenTemp(t)
	appendN(t, db, 3)
	for _, q := range []string{`UPDATE audit_log SET actor = 'x' WHERE seq = 2`, `DELETE FROM audit_log WHERE seq = 3`} {
		if _, err := db.writer.DB.Exec(q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v", q, err)
		}
	}
}

// TestVerifyAuditNamesTheFirstBadRow tampers with a 12-row chain through a
// separate handle on the file, with the append-only triggers dropped as an
// attacker with file access would, and checks the row VerifyAudit names.
func TestVerifyAuditNamesTheFirstBadRow(t *testing.T) {
	t.Parallel()
	const rows = 12
	for _, tc := range []struct {
		name   string
		tamper []string
		bad    int64
	}{
		{"at", []string{`UPDATE audit_log SET at = '2030-01-01T00:00:00Z' WHERE seq = 5`}, 5},
		{"at same instant, other form", []string{`UPDATE audit_log SET at = replace(at, 'Z', '+00:00') WHERE seq = 5`}, 5},
		{"kind", []string{`UPDATE audit_log SET kind = 'other' WHERE seq = 5`}, 5},
		{"actor", []string{`UPDATE audit_log SET actor = 'mallory' WHERE seq = 5`}, 5},
		{"task_id", []string{`UPDATE audit_log SET task_id = 'T-9999' WHERE seq = 5`}, 5},
		{"message_id", []string{`UPDATE audit_log SET message_id = 'm-9' WHERE seq = 5`}, 5},
		{"data value", []string{`UPDATE audit_log SET data = json_set(data, '$.n', '999') WHERE seq = 5`}, 5},
		{"data key added", []string{`UPDATE audit_log SET data = json_set(data, '$.extra', 'x') WHERE seq = 5`}, 5},
		{"data garbage", []string{`UPDATE audit_log SET data = 'not json' WHERE seq = 5`}, 5},
		{"prev_hash", []string{`UPDATE audit_log SET prev_hash = (SELECT hash FROM audit_log WHERE seq = 3) WHERE seq = 5`}, 5},
		{"hash", []string{`UPDATE audit_log SET hash = replace(hash, substr(hash, 1, 1), 'x') WHERE seq = 5`}, 5},
		{"seq", []string{`UPDATE audit_log SET seq = 500 WHERE seq = 5`}, 5},
		{"first row changed", []string{`UPDATE audit_log SET actor = 'mallory' WHERE seq = 1`}, 1},
		{"last row changed", []string{`UPDATE audit_log SET actor = 'mallory' WHERE seq = 12`}, 12},
		{"middle row deleted", []string{`DELETE FROM audit_log WHERE seq = 5`}, 5},
		{"first row deleted", []string{`DELETE FROM audit_log WHERE seq = 1`}, 1},
		{"last row deleted", []string{`DELETE FROM audit_log WHERE seq = 12`}, 12},
		{"last two rows deleted", []string{`DELETE FROM audit_log WHERE seq >= 11`}, 11},
		{"last row deleted, head rewound", []string{
			`DELETE FROM audit_log WHERE seq = 12`,
			`UPDATE audit_head SET seq = 11`}, 11},
		{"rows swapped", swapRows(4, 9), 4},
		{"adjacent rows swapped", swapRows(6, 7), 6},
		{"row forged at the end", []string{
			`INSERT INTO audit_log (seq, at, kind, actor, task_id, message_id, data, prev_hash, hash)
			 SELECT 13, at, kind, actor, task_id, message_id, data, hash, hash FROM audit_log WHERE seq = 12`}, 13},
		{"head hash changed", []string{`UPDATE audit_head SET hash = (SELECT hash FROM audit_log WHERE seq = 11)`}, 12},
		{"head deleted", []string{`DELETE FROM audit_head`}, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := MustOpenTemp(t)
			appendN(t, db, rows)
			if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
				t.Fatalf("before tampering: %+v, %v", rep, err)
			}

			raw := rawOpen(t, db.Path())
			mustExec(t, raw, `DROP TRIGGER audit_log_no_update`)
			mustExec(t, raw, `DROP TRIGGER audit_log_no_delete`)
			for _, q := range tc.tamper {
				res := mustExec(t, raw, q)
				if n, _ := res.RowsAffected(); n == 0 && !strings.HasPrefix(q, "CREATE") {
					t.Fatalf("tamper %q changed nothing", q)
				}
			}

			rep, err := db.VerifyAudit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.BadSeq != tc.bad || rep.Reason == "" {
				t.Fatalf("VerifyAudit = %+v, want bad row %d", rep, tc.bad)
			}
			// The report counts the rows the log holds, not those read
			// before the first bad one.
			var n int64
			if err := raw.QueryRow(`SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if rep.Rows != n {
				t.Fatalf("VerifyAudit reports %d rows; the log holds %d", rep.Rows, n)
			}
			t.Logf("row %d: %s", rep.BadSeq, rep.Reason)
		})
	}
}

// swapRows exchanges every column but seq between rows a and b.
func swapRows(a, b int) []string {
	cols := `at, kind, actor, task_id, message_id, data, prev_hash, hash`
	return []string{
		fmt.Sprintf(`CREATE TEMP TABLE swap AS SELECT seq, %s FROM audit_log WHERE seq IN (%d, %d)`, cols, a, b),
		fmt.Sprintf(`UPDATE audit_log SET (%[1]s) = (SELECT %[1]s FROM swap WHERE swap.seq = %[2]d + %[3]d - audit_log.seq)
			WHERE seq IN (%[2]d, %[3]d)`, cols, a, b),
	}
}

// parseCanonical decodes CanonicalAudit's output. That it recovers every
// field proves the encoding injective: two different rows cannot share a
// hash input.
func parseCanonical(b []byte) (model.AuditEvent, error) {
	var fields []string
	for len(b) > 0 {
		colon := strings.IndexByte(string(b), ':')
		if colon < 1 {
			return model.AuditEvent{}, fmt.Errorf("no length")
		}
		n, err := strconv.Atoi(string(b[:colon]))
		if err != nil || n < 0 || colon+1+n >= len(b) || b[colon+1+n] != ',' {
			return model.AuditEvent{}, fmt.Errorf("bad netstring")
		}
		fields = append(fields, string(b[colon+1:colon+1+n]))
		b = b[colon+2+n:]
	}
	if len(fields) < 8 || fields[0] != canonicalVersion {
		return model.AuditEvent{}, fmt.Errorf("short or unversioned")
	}
	seq, _ := strconv.ParseInt(fields[1], 10, 64)
	at, err := parseTime(fields[2])
	if err != nil {
		return model.AuditEvent{}, err
	}
	ev := model.AuditEvent{Seq: seq, At: at, Kind: fields[3], Actor: fields[4], TaskID: fields[5], MessageID: fields[6]}
	nkeys, _ := strconv.Atoi(fields[7])
	if len(fields) != 8+2*nkeys {
		return model.AuditEvent{}, fmt.Errorf("key count")
	}
	if nkeys > 0 {
		ev.Data = map[string]string{}
	}
	for i := 0; i < nkeys; i++ {
		ev.Data[fields[8+2*i]] = fields[9+2*i]
	}
	return ev, nil
}

func FuzzCanonicalAuditRoundTrip(f *testing.F) {
	f.Add(int64(1), int64(0), "task.transition", "relay", "T-1", "", "from", "submitted", "to", "authorized")
	f.Add(int64(9), int64(1e18), "a,1:b", "", "", "m", "", "", "k:", ",")
	f.Fuzz(func(t *testing.T, seq, nanos int64, kind, actor, taskID, messageID, k1, v1, k2, v2 string) {
		ev := model.AuditEvent{Seq: seq, At: time.Unix(0, nanos).UTC(), Kind: kind, Actor: actor,
			TaskID: taskID, MessageID: messageID, Data: map[string]string{k1: v1, k2: v2}}
		got, err := parseCanonical(CanonicalAudit(ev))
		if err != nil {
			t.Fatalf("%v for %+v", err, ev)
		}
		if got.Seq != ev.Seq || !got.At.Equal(ev.At) || got.Kind != kind || got.Actor != actor ||
			got.TaskID != taskID || got.MessageID != messageID || !maps.Equal(got.Data, ev.Data) {
			t.Fatalf("round trip\n%+v\n%+v", got, ev)
		}
	})
}

func TestAuditRefusesUnwritableTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := MustOpenTemp(t)
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	wantCode(t, db.Audit(ctx, model.AuditEvent{Kind: "k", At: far}), model.CodeInvalidArgs)
	task := newTask("T-1")
	task.CreatedAt = far
	_, _, err := db.CreateTask(ctx, task)
	wantCode(t, err, model.CodeInvalidArgs)
	mustCreate(t, db, newTask("T-2"))
	_, err = db.Transition(ctx, model.Transition{TaskID: "T-2", From: model.StateSubmitted, To: model.StateAuthorized,
		Trigger: model.TriggerAuthorize, Verdicts: []model.Verdict{{Gate: model.GateAuthority, At: far}}})
	wantCode(t, err, model.CodeInvalidArgs)
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK || rep.Rows != 1 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
}

// AuditOnce writes an effect's row once per task and kind: a repeat, and
// a step whose prerequisite row is missing, write nothing; a pruned task
// takes its audit_once rows with it (the audit rows stay, and verify).
func TestAuditOnceWritesEachEffectOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newTestClock(t0)
	db := MustOpen(t, filepath.Join(t.TempDir(), "relay.db"), Options{Clock: clock.now})
	ended(t, db, "T-once", model.StateCompleted)
	ev := func(kind string) model.AuditEvent {
		return model.AuditEvent{Kind: kind, Actor: "claude", TaskID: "T-once"}
	}
	for _, c := range []struct {
		kind, after string
		want        bool
	}{
		{"mcp.task.delivered", "mcp.task.created", false}, // never created: nothing to deliver
		{"mcp.task.created", "", true},
		{"mcp.task.created", "", false},
		{"mcp.task.delivered", "mcp.task.created", true},
		{"mcp.task.delivered", "mcp.task.created", false},
	} {
		got, err := db.AuditOnce(ctx, ev(c.kind), c.after)
		if err != nil || got != c.want {
			t.Fatalf("AuditOnce(%s after %q) = %v, %v; want %v", c.kind, c.after, got, err, c.want)
		}
	}
	for _, kind := range []string{"mcp.task.created", "mcp.task.delivered"} {
		if n := count(t, db, "audit_log", "kind = ? AND task_id = 'T-once'", kind); n != 1 {
			t.Errorf("%s rows: %d, want 1", kind, n)
		}
	}
	if _, err := db.AuditOnce(ctx, model.AuditEvent{Kind: "x"}, ""); model.ErrorCode(err) != model.CodeInvalidArgs {
		t.Errorf("AuditOnce without a task: %v, want invalid_args", err)
	}
	clock.advance(48 * time.Hour)
	if _, err := db.Prune(ctx, PruneOptions{Policy: model.RetentionPolicy{TerminalTasks: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "audit_once", "task_id = 'T-once'"); n != 0 {
		t.Errorf("audit_once rows of a pruned task: %d, want 0", n)
	}
	if rep, err := db.VerifyAudit(ctx); err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
