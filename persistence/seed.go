package persistence

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/hai-relay/relay/model"
)

// SeedOptions describes the synthetic history Seed appends.
type SeedOptions struct {
	// Messages and Tasks are how many of each to add.
	Messages, Tasks int
	// Agents are the senders, recipients, callers and targets, used in
	// turn; at least two. Defaults to model.CoreAgents().
	Agents []string
	// Start is the created_at of the oldest row; rows follow each other
	// by Step. Defaults: 90 days before the clock's now, and the span
	// divided evenly up to now.
	Start time.Time
	Step  time.Duration
	// Unread is how many of the newest messages stay stored (unread);
	// Read how many of those before them are read; the rest are acked.
	// Zero means the default, SeedUnread(Messages) each; negative, none.
	Unread, Read int
	// Chunk is how many rows one transaction carries (default 20000).
	Chunk int
}

// SeedUnread is Seed's default count of unread (and of read) messages:
// 1% of the messages.
func SeedUnread(messages int) int { return messages / 100 }

// Seed appends synthetic history to db, fast, for benchmarks that need a
// store the size operators reach after months (relay bench's scale row):
// it is not for production data. It writes many rows per transaction
// through the writer, with prepared statements, in the shapes the store
// itself writes:
//
//   - messages from each agent to the next ones in turn, ~100-byte bodies;
//     the newest Unread stored (unread), the Read before them read, the
//     rest acked;
//   - tasks between the agents in turn, all terminal (so that crash
//     recovery at daemon start has nothing to do): 80% completed, with
//     their three transitions and four passed gate verdicts, 10% failed
//     (agent_crashed) likewise, 10% rejected at the missionLease gate;
//   - one audit row per envelope ("message.stored", "task.submitted"),
//     chained like any other, so VerifyAudit still passes.
//
// Ids are SeedMessageID(N) and SeedTaskID(N), numbered from the rows already
// seeded, so Seed may be called again to grow a store.
func (db *DB) Seed(ctx context.Context, o SeedOptions) error {
	if o.Messages < 0 || o.Tasks < 0 {
		return invalidArgs("seed: negative counts")
	}
	if o.Agents == nil {
		o.Agents = model.CoreAgents()
	}
	if len(o.Agents) < 2 {
		return invalidArgs("seed: at least two agents")
	}
	if o.Chunk <= 0 {
		o.Chunk = 20000
	}
	for _, n := range []*int{&o.Unread, &o.Read} {
		switch {
		case *n == 0:
			*n = SeedUnread(o.Messages)
		case *n < 0:
			*n = 0
		}
	}
	now := db.now()
	if o.Start.IsZero() {
		o.Start = now.Add(-90 * 24 * time.Hour)
	}
	if o.Step <= 0 {
		o.Step = max(now.Sub(o.Start)/time.Duration(max(o.Messages+o.Tasks, 1)), time.Microsecond)
	}
	s := &seeder{o: o, at: normTime(o.Start)}
	for done := 0; done < o.Messages; done += o.Chunk {
		n := min(o.Chunk, o.Messages-done)
		if err := db.write(ctx, func(ctx context.Context, w *writeTx) error { return s.messages(ctx, w, done, n) }); err != nil {
			return wrap("seed messages", err)
		}
	}
	for done := 0; done < o.Tasks; done += o.Chunk {
		n := min(o.Chunk, o.Tasks-done)
		if err := db.write(ctx, func(ctx context.Context, w *writeTx) error { return s.tasks(ctx, w, done, n) }); err != nil {
			return wrap("seed tasks", err)
		}
	}
	return nil
}

type seeder struct {
	o  SeedOptions
	at time.Time
}

func (s *seeder) tick() string {
	s.at = s.at.Add(s.o.Step)
	return formatTime(s.at)
}

// pair returns the i-th (from, to) pair: every ordered pair in turn.
func (s *seeder) pair(i int) (string, string) {
	n := len(s.o.Agents)
	from := i % n
	to := (from + 1 + (i/n)%(n-1)) % n
	return s.o.Agents[from], s.o.Agents[to]
}

// prepare prepares queries on the transaction and returns a closer.
func prepare(ctx context.Context, tx *sql.Tx, qs ...string) ([]*sql.Stmt, func(), error) {
	var out []*sql.Stmt
	closeAll := func() {
		for _, st := range out {
			st.Close()
		}
	}
	for _, q := range qs {
		st, err := tx.PrepareContext(ctx, q)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		out = append(out, st)
	}
	return out, closeAll, nil
}

func maxSeq(ctx context.Context, w *writeTx, table string) (int64, error) {
	var seq int64
	err := w.QueryRowContext(ctx, `SELECT IFNULL(MAX(seq), 0) FROM `+table).Scan(&seq)
	return seq, err
}

// messages writes messages [done, done+n) of the seed.
func (s *seeder) messages(ctx context.Context, w *writeTx, done, n int) error {
	seq, err := maxSeq(ctx, w, "messages")
	if err != nil {
		return err
	}
	sts, closeAll, err := prepare(ctx, w.tx, `INSERT INTO messages (seq, id, from_agent, to_agent, body, context_id,
		reply_to, artifacts, state, created_at, read_at, acked_at) VALUES (?, ?, ?, ?, ?, ?, '', '[]', ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer closeAll()
	ins := sts[0]
	unreadFrom := s.o.Messages - s.o.Unread
	readFrom := unreadFrom - s.o.Read
	for i := done; i < done+n; i++ {
		seq++
		from, to := s.pair(i)
		id := SeedMessageID(seq)
		body := "seeded message " + strconv.Itoa(i) + " from " + from + " to " + to + ": the build is green, please review the diff."
		at := s.tick()
		var state string
		var readAt, ackedAt any
		switch {
		case i >= unreadFrom:
			state = string(model.MessageStored)
		case i >= readFrom:
			state, readAt = string(model.MessageRead), at
		default:
			state, readAt, ackedAt = string(model.MessageAcked), at, at
		}
		if _, err := ins.ExecContext(ctx, seq, id, from, to, body, "C-seed-"+strconv.Itoa(i/4), state, at, readAt, ackedAt); err != nil {
			return err
		}
		if err := w.audit(ctx, model.AuditEvent{At: s.at, Kind: "message.stored", Actor: from, MessageID: id,
			Data: map[string]string{"from": from, "to": to, "body_sha256": sha256Hex(body),
				"body_bytes": strconv.Itoa(len(body)), "artifacts": "0"}}); err != nil {
			return err
		}
	}
	return nil
}

// tasks writes tasks [done, done+n) of the seed with their events and
// verdicts.
func (s *seeder) tasks(ctx context.Context, w *writeTx, done, n int) error {
	seq, err := maxSeq(ctx, w, "tasks")
	if err != nil {
		return err
	}
	sts, closeAll, err := prepare(ctx, w.tx,
		`INSERT INTO tasks (seq, id, state, code, message, caller, target, mode, mission_id, lease_id, context_id,
			prompt, cwd, result, stop_reason, created_at, updated_at)
			VALUES (?, ?, ?, ?, '', ?, ?, 'read_only', ?, ?, ?, ?, '/home/dev/project', ?, ?, ?, ?)`,
		`INSERT INTO task_events (task_id, n, from_state, to_state, trigger_name, code, message, actor, at)
			VALUES (?, ?, ?, ?, ?, ?, '', ?, ?)`,
		`INSERT INTO task_verdicts (task_id, n, gate, passed, code, message, detail, at)
			VALUES (?, ?, ?, ?, ?, '', '{}', ?)`)
	if err != nil {
		return err
	}
	defer closeAll()
	insTask, insEvent, insVerdict := sts[0], sts[1], sts[2]
	type ev struct {
		from, to model.State
		trig     model.Trigger
		code     model.Code
	}
	completed := []ev{
		{model.StateSubmitted, model.StateAuthorized, model.TriggerAuthorize, ""},
		{model.StateAuthorized, model.StateWorking, model.TriggerStart, ""},
		{model.StateWorking, model.StateCompleted, model.TriggerComplete, ""},
	}
	failed := []ev{completed[0], completed[1],
		{model.StateWorking, model.StateFailed, model.TriggerFail, model.CodeAgentCrashed}}
	rejected := []ev{{model.StateSubmitted, model.StateRejected, model.TriggerReject, model.CodeMissingLeaseID}}
	for i := done; i < done+n; i++ {
		seq++
		caller, target := s.pair(i)
		id := SeedTaskID(seq)
		created := s.tick()
		prompt := "seeded task " + strconv.Itoa(i) + ": summarize the failing tests in ./pkg and propose a fix"
		evs, result, stop, mission, lease := completed, "Done: the fix is in pkg/foo.go.", "end_turn", "M-seed", "S-seed"
		switch i % 10 {
		case 8:
			evs, result, stop = failed, "", ""
		case 9:
			evs, result, stop, lease = rejected, "", "", ""
		}
		last := evs[len(evs)-1]
		if _, err := insTask.ExecContext(ctx, seq, id, string(last.to), string(last.code), caller, target,
			mission, lease, "C-seed-"+strconv.Itoa(i/3), prompt, result, stop, created, created); err != nil {
			return err
		}
		if last.to == model.StateRejected {
			if _, err := insVerdict.ExecContext(ctx, id, 1, string(model.GateMissionLease), false, string(last.code), created); err != nil {
				return err
			}
		} else {
			for k, g := range model.AllGates() {
				if _, err := insVerdict.ExecContext(ctx, id, k+1, string(g), true, "", created); err != nil {
					return err
				}
			}
		}
		for k, e := range evs {
			if _, err := insEvent.ExecContext(ctx, id, k+1, string(e.from), string(e.to), string(e.trig),
				string(e.code), model.RelayAgent, created); err != nil {
				return err
			}
		}
		if err := w.audit(ctx, model.AuditEvent{At: s.at, Kind: "task.submitted", Actor: caller, TaskID: id,
			Data: map[string]string{"target": target, "mode": string(model.ModeReadOnly), "prompt_sha256": sha256Hex(prompt),
				"prompt_bytes": strconv.Itoa(len(prompt)), "artifacts": "0", "reference_task_ids": "0"}}); err != nil {
			return err
		}
	}
	return nil
}

// SeedTaskID and SeedMessageID are the ids of seeded rows: "SEED" and N in
// 22 decimal digits, so that they have the shape of relay-made ids (26
// digits of Crockford base32) and pass the request bounds.
func SeedTaskID(n int64) string { return fmt.Sprintf("T-SEED%022d", n) }

// SeedMessageID: see SeedTaskID.
func SeedMessageID(n int64) string { return fmt.Sprintf("MSG-SEED%022d", n) }
