package persistencetest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/persistence"
)

// SeedOptions describes the synthetic history Seed appends.
type SeedOptions struct {
	// Messages and Tasks are how many of each to add.
	Messages, Tasks int
	// Agents are the senders, recipients, callers and targets, used in
	// turn; at least two. Defaults to model.CoreAgents().
	Agents []string
	// Start is the created_at of the oldest row; rows follow each other
	// by Step. Defaults: 90 days before now, and the span divided evenly
	// up to now.
	Start time.Time
	Step  time.Duration
	// Unread is how many of the newest messages stay stored (unread);
	// Read how many of those before them are read; the rest are acked.
	// Zero means the default, SeedUnread(Messages) each; negative, none.
	Unread, Read int
	// Chunk is how many rows one Import (one transaction) carries
	// (default 20000).
	Chunk int
}

// SeedUnread is Seed's default count of unread (and of read) messages:
// 1% of the messages.
func SeedUnread(messages int) int { return messages / 100 }

// Seed appends synthetic history to db, fast, for benchmarks that need a
// store the size operators reach after months (relay-bench's scale row):
// it is not for production data. It writes through the store's bulk
// import (persistence.DB.Import), Chunk rows per transaction, in the
// shapes the store itself writes:
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
// Ids are SeedMessageID(N) and SeedTaskID(N), numbered on from the ids
// seeded before, so Seed may be called again to grow a store.
func Seed(ctx context.Context, db *persistence.DB, o SeedOptions) error {
	if o.Messages < 0 || o.Tasks < 0 {
		return model.Errorf(model.CodeInvalidArgs, "seed: negative counts")
	}
	if o.Agents == nil {
		o.Agents = model.CoreAgents()
	}
	if len(o.Agents) < 2 {
		return model.Errorf(model.CodeInvalidArgs, "seed: at least two agents")
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
	now := time.Now().UTC().Round(0)
	if o.Start.IsZero() {
		o.Start = now.Add(-90 * 24 * time.Hour)
	}
	if o.Step <= 0 {
		o.Step = max(now.Sub(o.Start)/time.Duration(max(o.Messages+o.Tasks, 1)), time.Microsecond)
	}
	s := &seeder{o: o, at: o.Start.UTC().Round(0)}
	var err error
	if o.Messages > 0 {
		if s.nextMessage, err = nextSeedNumber(func(n int64) error { _, err := db.GetMessage(ctx, SeedMessageID(n)); return err }); err != nil {
			return fmt.Errorf("seed messages: %w", err)
		}
	}
	if o.Tasks > 0 {
		if s.nextTask, err = nextSeedNumber(func(n int64) error { _, err := db.GetTask(ctx, SeedTaskID(n)); return err }); err != nil {
			return fmt.Errorf("seed tasks: %w", err)
		}
	}
	for done := 0; done < o.Messages; done += o.Chunk {
		n := min(o.Chunk, o.Messages-done)
		if err := db.Import(ctx, persistence.History{Messages: s.messages(done, n)}); err != nil {
			return fmt.Errorf("seed messages: %w", err)
		}
	}
	for done := 0; done < o.Tasks; done += o.Chunk {
		n := min(o.Chunk, o.Tasks-done)
		if err := db.Import(ctx, persistence.History{Tasks: s.tasks(done, n)}); err != nil {
			return fmt.Errorf("seed tasks: %w", err)
		}
	}
	return nil
}

// nextSeedNumber returns the first N whose seeded id is free. Seeded ids
// are numbered from 1 without gaps, so a doubling then a binary search
// over get (nil: the id exists; not_found: it is free) finds it in a few
// dozen point reads, whatever the store's size.
func nextSeedNumber(get func(n int64) error) (int64, error) {
	exists := func(n int64) (bool, error) {
		err := get(n)
		if model.ErrorCode(err) == model.CodeNotFound {
			return false, nil
		}
		return err == nil, err
	}
	lo, hi := int64(0), int64(1) // lo exists (0: none), hi is to be tried
	for {
		ok, err := exists(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 { // lo exists, hi does not
		mid := lo + (hi-lo)/2
		ok, err := exists(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + 1, nil
}

type seeder struct {
	o                     SeedOptions
	at                    time.Time
	nextMessage, nextTask int64
}

func (s *seeder) tick() time.Time {
	s.at = s.at.Add(s.o.Step)
	return s.at
}

// pair returns the i-th (from, to) pair: every ordered pair in turn.
func (s *seeder) pair(i int) (string, string) {
	n := len(s.o.Agents)
	from := i % n
	to := (from + 1 + (i/n)%(n-1)) % n
	return s.o.Agents[from], s.o.Agents[to]
}

// messages returns messages [done, done+n) of the seed.
func (s *seeder) messages(done, n int) []model.Message {
	out := make([]model.Message, 0, n)
	unreadFrom := s.o.Messages - s.o.Unread
	readFrom := unreadFrom - s.o.Read
	for i := done; i < done+n; i++ {
		from, to := s.pair(i)
		at := s.tick()
		m := model.Message{ID: SeedMessageID(s.nextMessage), From: from, To: to,
			Body:      "seeded message " + strconv.Itoa(i) + " from " + from + " to " + to + ": the build is green, please review the diff.",
			ContextID: "C-seed-" + strconv.Itoa(i/4), CreatedAt: at}
		s.nextMessage++
		switch {
		case i >= unreadFrom:
			m.State = model.MessageStored
		case i >= readFrom:
			m.State, m.ReadAt = model.MessageRead, &at
		default:
			m.State, m.ReadAt, m.AckedAt = model.MessageAcked, &at, &at
		}
		out = append(out, m)
	}
	return out
}

type seedEvent struct {
	from, to model.State
	trig     model.Trigger
	code     model.Code
}

var (
	seedCompleted = []seedEvent{
		{model.StateSubmitted, model.StateAuthorized, model.TriggerAuthorize, ""},
		{model.StateAuthorized, model.StateWorking, model.TriggerStart, ""},
		{model.StateWorking, model.StateCompleted, model.TriggerComplete, ""},
	}
	seedFailed = []seedEvent{seedCompleted[0], seedCompleted[1],
		{model.StateWorking, model.StateFailed, model.TriggerFail, model.CodeAgentCrashed}}
	seedRejected = []seedEvent{{model.StateSubmitted, model.StateRejected, model.TriggerReject, model.CodeMissingLeaseID}}
)

// tasks returns tasks [done, done+n) of the seed with their events and
// verdicts.
func (s *seeder) tasks(done, n int) []model.TaskDetail {
	out := make([]model.TaskDetail, 0, n)
	for i := done; i < done+n; i++ {
		caller, target := s.pair(i)
		created := s.tick()
		t := model.Task{ID: SeedTaskID(s.nextTask), Caller: caller, Target: target, Mode: model.ModeReadOnly,
			MissionID: "M-seed", LeaseID: "S-seed", ContextID: "C-seed-" + strconv.Itoa(i/3),
			Prompt: "seeded task " + strconv.Itoa(i) + ": summarize the failing tests in ./pkg and propose a fix",
			Cwd:    "/home/dev/project", Result: "Done: the fix is in pkg/foo.go.", StopReason: "end_turn",
			CreatedAt: created, UpdatedAt: created}
		s.nextTask++
		evs := seedCompleted
		switch i % 10 {
		case 8:
			evs, t.Result, t.StopReason = seedFailed, "", ""
		case 9:
			evs, t.Result, t.StopReason, t.LeaseID = seedRejected, "", "", ""
		}
		last := evs[len(evs)-1]
		t.State, t.Code = last.to, last.code
		d := model.TaskDetail{Task: t}
		if last.to == model.StateRejected {
			d.Verdicts = []model.Verdict{{Gate: model.GateMissionLease, Code: last.code, At: created}}
		} else {
			for _, g := range model.AllGates() {
				d.Verdicts = append(d.Verdicts, model.Verdict{Gate: g, Passed: true, At: created})
			}
		}
		for _, e := range evs {
			d.Events = append(d.Events, model.Event{From: e.from, To: e.to, Trigger: e.trig, Code: e.code,
				Actor: model.RelayAgent, At: created})
		}
		out = append(out, d)
	}
	return out
}

// SeedTaskID and SeedMessageID are the ids of seeded rows: "SEED" and N in
// 22 decimal digits, so that they have the shape of relay-made ids (26
// digits of Crockford base32) and pass the request bounds.
func SeedTaskID(n int64) string { return fmt.Sprintf("T-SEED%022d", n) }

// SeedMessageID: see SeedTaskID.
func SeedMessageID(n int64) string { return fmt.Sprintf("MSG-SEED%022d", n) }
