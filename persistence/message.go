package persistence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/hai-relay/relay/model"
)

// messageRow.message converts a row to a message; insertMessage makes
// the row of a new one.
func (r messageRow) message() (model.Message, error) {
	m := model.Message{ID: r.ID, From: r.From, To: r.To, Body: r.Body, ContextID: r.ContextID,
		ReplyTo: r.ReplyTo, ParentTaskID: r.ParentTaskID, State: model.MessageState(r.State)}
	if r.From == model.RelayAgent {
		// Only the relay writes as the relay: no agent's message can
		// carry a notice, whatever its body says.
		if n, ok := model.ParseNotice(r.Body); ok {
			m.Notice = &n
		}
	}
	var err error
	if m.Artifacts, err = fromJSONArray[model.Artifact](r.Artifacts); err != nil {
		return m, fmt.Errorf("message %s: artifacts: %w", r.ID, err)
	}
	if m.CreatedAt, err = parseTime(r.CreatedAt); err != nil {
		return m, fmt.Errorf("message %s: created_at: %w", r.ID, err)
	}
	if m.ReadAt, err = parseTimePtr(r.ReadAt); err != nil {
		return m, fmt.Errorf("message %s: read_at: %w", r.ID, err)
	}
	if m.AckedAt, err = parseTimePtr(r.AckedAt); err != nil {
		return m, fmt.Errorf("message %s: acked_at: %w", r.ID, err)
	}
	return m, nil
}

// queryMessages runs a query returning messageCols and maps the rows.
func (db *DB) queryMessages(ctx context.Context, q querier, query string, args ...any) ([]model.Message, error) {
	out, _, err := db.queryMessagesSeq(ctx, q, nil, query, args...)
	return out, err
}

// queryMessagesSeq is queryMessages that also returns the highest seq of
// the rows returned (0 when none). With take, it stops at the first row
// take refuses (a page's byte budget), reading no further.
//
// As queryTasksUpTo does, it scans with rows.Scan into one messageRow's
// fields (messageScan), not with bun's ScanRows: inbox pages and
// listings are hot reads (BENCHMARKS.md: the scale_check_inbox row, and
// "Rows scanned with rows.Scan" under "What was changed"),
// and on a 50-message page ScanRows cost 344-397 CPU-µs against 280-309,
// medians 375 and 301 (BenchmarkPageScan, 3 runs).
func (db *DB) queryMessagesSeq(ctx context.Context, q querier, take func(model.Message) bool, query string, args ...any) ([]model.Message, int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []model.Message{}
	var last int64
	// One row, scanned into again and again: r.message copies what it
	// keeps.
	var r messageRow
	dest := messageScan.dest(&r)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, err
		}
		m, err := r.message()
		if err != nil {
			return nil, 0, err
		}
		if take != nil && !take(m) {
			break
		}
		out = append(out, m)
		last = max(last, r.Seq)
	}
	return out, last, rows.Err()
}

// pageTake returns a take function for queryMessagesSeq that fills one
// answer of db.answerBytes with messages as size measures them.
func (db *DB) pageTake(size func(model.Message) int) func(model.Message) bool {
	budget := model.NewByteBudget(db.answerBytes)
	return func(m model.Message) bool { return budget.Take(size(m)) }
}

// maxReadAt is a read_at as long as any the relay writes (RFC 3339 with
// nanoseconds, in UTC): a stored message is measured with it, as it will
// be returned once marked read.
var maxReadAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)

// inboxSize is the encoded size of m as Inbox returns it: a stored
// message comes back read, with its read_at.
func inboxSize(m model.Message) int {
	if m.State == model.MessageStored {
		m.State, m.ReadAt = model.MessageRead, &maxReadAt
	}
	return model.EncodedLen(m)
}

// messageSize is the encoded size of m as a listing returns it.
func messageSize(m model.Message) int { return model.EncodedLen(m) }

// CreateMessage persists m as a stored message and audits it
// ("message.stored", actor m.From), in one transaction. The caller supplies
// ID, From and To (recipient rules are the facade's); a zero CreatedAt is
// stamped with the clock. A duplicate ID is an invalid_args error.
//
// In the same transaction, before anything is written, the message must
// fit its recipient's quota (Options.InboxMessages, InboxBytes: else
// recipient_inbox_full) and leave the free-space reserve
// (Options.MinFreeBytes: else storage_full); a refused message leaves no
// row and no audit row. The refusal is not audited: each one would append
// (and fsync) a row to the chain, so a sender that keeps trying would
// grow the database again; it is in the daemon's log.
func (db *DB) CreateMessage(ctx context.Context, m model.Message) (model.Message, error) {
	switch {
	case m.ID == "":
		return model.Message{}, model.InvalidArgs("message without an id")
	case m.From == "":
		return model.Message{}, model.InvalidArgs("message %q without a sender", m.ID)
	case m.To == "":
		return model.Message{}, model.InvalidArgs("message %q without a recipient", m.ID)
	}
	m.State = model.MessageStored
	var err error
	if m.CreatedAt, err = stamp("created_at", m.CreatedAt, db.now); err != nil {
		return model.Message{}, err
	}
	m.ReadAt, m.AckedAt = nil, nil
	if m.Artifacts == nil {
		m.Artifacts = []model.Artifact{}
	}
	err = db.write(ctx, func(ctx context.Context, w *writeTx) error {
		if err := db.checkInbox(ctx, w, m); err != nil {
			return err
		}
		if err := db.checkRoom(ctx, w, len(m.Body)); err != nil {
			return err
		}
		return insertMessage(ctx, w, m)
	})
	if err != nil {
		return model.Message{}, wrap("create message", err)
	}
	return m, nil
}

// insertMessage stores m (stored, CreatedAt set) and audits it
// ("message.stored", actor m.From).
func insertMessage(ctx context.Context, w *writeTx, m model.Message) error {
	m.State, m.ReadAt, m.AckedAt = model.MessageStored, nil, nil
	r, err := messageToRow(m)
	if err != nil {
		return err
	}
	_, err = w.ExecContext(ctx, qMessageInsert, messageBind.args(&r)...)
	if err != nil {
		if isUniqueViolation(err) {
			return model.InvalidArgs("message id %q already exists", m.ID)
		}
		return err
	}
	return w.audit(ctx, messageStored(m))
}

// messageToRow is m as a messages row (seq left to the caller).
func messageToRow(m model.Message) (messageRow, error) {
	arts, err := jsonArray(m.Artifacts)
	if err != nil {
		return messageRow{}, err
	}
	return messageRow{ID: m.ID, From: m.From, To: m.To, Body: m.Body, ContextID: m.ContextID, ReplyTo: m.ReplyTo,
		Artifacts: arts, State: string(m.State), CreatedAt: formatTime(m.CreatedAt),
		ReadAt: formatTimePtr(m.ReadAt), AckedAt: formatTimePtr(m.AckedAt), ParentTaskID: m.ParentTaskID}, nil
}

// messageStored is the audit row of a message's creation.
func messageStored(m model.Message) model.AuditEvent {
	return model.AuditEvent{
		At: m.CreatedAt, Kind: "message.stored", Actor: m.From, MessageID: m.ID,
		Data: auditData{
			"from":        m.From,
			"to":          m.To,
			"body_sha256": sha256Hex(m.Body),
			"body_bytes":  strconv.Itoa(len(m.Body)),
			"artifacts":   strconv.Itoa(len(m.Artifacts)),
		}.set("context_id", m.ContextID).set("reply_to", m.ReplyTo).set("parent_task_id", m.ParentTaskID),
	}
}

// Inbox returns up to limit of to's messages, oldest first: with unreadOnly
// only the stored (unread) ones, otherwise every message not yet acked
// (stored and read). The stored ones among those returned become read, with
// read_at, in the same transaction as one "message.read" audit row naming
// them all (message_ids, comma-separated, and count);
// they are returned in their new state. unread is the number of to's stored
// messages left after the call. limit defaults to model.DefaultPageSize and is
// capped at model.MaxPageSize.
//
// The page also stops before the message that would take its encoded
// answer past the DB's answer bound (Options.AnswerBytes; it always holds
// the oldest message): only the messages on the page are marked read, so a
// message becomes read only in an answer that can be delivered.
//
// A call that would mark nothing (nothing unread among the page: the
// common poll) is answered from one read snapshot on the reader pool and
// never waits for the writer; it is exactly what a write transaction at
// that snapshot would have returned.
func (db *DB) Inbox(ctx context.Context, to string, unreadOnly bool, limit int) ([]model.Message, int, error) {
	if to == "" {
		return nil, 0, model.InvalidArgs("inbox without a recipient")
	}
	states := []model.MessageState{model.MessageStored, model.MessageRead}
	if unreadOnly {
		states = states[:1]
	}
	p := &inboxPage{db: db, to: to}
	p.query, p.args = messagePage([]string{`to_agent = ?`}, []any{to}, states, "ASC", pageSize(limit))
	// The unread count is taken once, where the call ends: here if the
	// page has nothing to mark, else in the write, after the marks.
	err := db.readTx(ctx, func(ctx context.Context, q querier) error {
		if err := p.read(ctx, q); err != nil || p.stored() > 0 {
			return err
		}
		return p.countUnread(ctx, q)
	})
	if err != nil {
		return nil, 0, wrap("inbox", err)
	}
	if p.stored() == 0 {
		return p.out, p.unread, nil
	}
	if err := db.write(ctx, p.markRead); err != nil {
		return nil, 0, wrap("inbox", err)
	}
	return p.out, p.unread, nil
}

// inboxPage is one check_inbox call's page: its query, the messages read,
// the page's highest seq and the recipient's unread count.
type inboxPage struct {
	db     *DB
	to     string
	query  string
	args   []any
	out    []model.Message
	last   int64 // the page's highest seq
	unread int
}

// read reads the page.
func (p *inboxPage) read(ctx context.Context, q querier) (err error) {
	p.out, p.last, err = p.db.queryMessagesSeq(ctx, q, p.db.pageTake(inboxSize), p.query, p.args...)
	return err
}

// countUnread counts the recipient's stored messages.
func (p *inboxPage) countUnread(ctx context.Context, q querier) error {
	return q.QueryRowContext(ctx, qUnreadCount, p.to, string(model.MessageStored)).Scan(&p.unread)
}

// stored is how many messages of the page are still stored (unread).
func (p *inboxPage) stored() int {
	return countFunc(p.out, func(m model.Message) bool { return m.State == model.MessageStored })
}

// markRead marks the page's stored messages read in the write
// transaction w, with one audit row for the call.
func (p *inboxPage) markRead(ctx context.Context, w *writeTx) error {
	// The page is the oldest of to's messages by seq, and a message sent
	// later gets a higher seq: the stored messages on the page are exactly
	// to's stored messages up to its last seq. If as many are still stored
	// up to there as the snapshot saw, they are the same ones, and the
	// snapshot's page stands; otherwise another call read some first, and
	// the page is read again here.
	var still int
	if err := w.QueryRowContext(ctx, qStoredUpTo, p.to, string(model.MessageStored), p.last).Scan(&still); err != nil {
		return err
	}
	if still != p.stored() {
		if err := p.read(ctx, w); err != nil {
			return err
		}
	}
	want := p.stored()
	if want == 0 {
		return p.countUnread(ctx, w)
	}
	now := p.db.now()
	// One range UPDATE on the inbox index marks them all: the stored
	// messages up to the page's last seq, which the byte bound may have
	// cut short of limit; none after it.
	res, err := w.ExecContext(ctx, qMarkReadUpTo, string(model.MessageRead), formatTime(now),
		p.to, string(model.MessageStored), p.last)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(want) {
		return fmt.Errorf("marked %d messages read, expected %d (%v)", n, want, err)
	}
	if err := p.countUnread(ctx, w); err != nil {
		return err
	}
	ids := make([]string, 0, want)
	for i := range p.out {
		m := &p.out[i]
		if m.State != model.MessageStored {
			continue
		}
		readAt := now
		m.State, m.ReadAt = model.MessageRead, &readAt
		ids = append(ids, m.ID)
	}
	// One audit row for the call, naming every message it read, instead
	// of 50 chained rows for a full page.
	ev := model.AuditEvent{At: now, Kind: "message.read", Actor: p.to,
		Data: auditData{"to": p.to, "message_ids": strings.Join(ids, ","), "count": strconv.Itoa(len(ids))}}
	if len(ids) == 1 {
		ev.MessageID = ids[0]
	}
	return w.audit(ctx, ev)
}

// maxNamed is how many missing ids a refused Ack names.
const maxNamed = 5

// ackChunkBytes bounds the message bodies one Ack transaction rewrites.
// Acknowledging a message changes its row's size (state, acked_at), so
// SQLite writes the whole row again, body included, to the WAL: an Ack of
// a thousand messages of 256 KiB in one transaction would need 256 MiB of
// WAL at once, which a disk that fills does not have. In chunks, the
// writer checkpoints between them and the WAL starts over in its own
// space (TestAckOfLargeMessagesKeepsTheWALSmall).
const ackChunkBytes = 4 << 20

// Ack marks to's messages acked (and read, if they were not), with one
// "message.acked" audit row each, and returns how many changed; messages
// already acked do not count. If any id is not one of to's messages, it
// returns a CodeNotFound error naming them and changes nothing. At most
// model.MaxPageSize ids at once.
//
// The acknowledgements commit in transactions of at most ackChunkBytes of
// bodies each (at least one message), oldest first. A failure part-way
// (a full disk) leaves the earlier chunks acknowledged; acknowledging
// again is harmless, so a retry finishes the job.
func (db *DB) Ack(ctx context.Context, to string, ids []string) (int, error) {
	if to == "" {
		return 0, model.InvalidArgs("ack without a recipient")
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) == 0 {
		return 0, model.InvalidArgs("no message ids to acknowledge")
	}
	if len(ids) > model.MaxPageSize {
		return 0, model.InvalidArgs("at most %d message ids at once, got %d", model.MaxPageSize, len(ids))
	}
	// Only the recipient's own messages are visible here, so an id that
	// exists but belongs to another agent is reported exactly like one
	// that does not exist. A message is never deleted unless acked (see
	// Prune), so one found here is still there to acknowledge below, or
	// acknowledged already.
	var hits []ackHit
	err := db.readTx(ctx, func(ctx context.Context, q querier) error {
		var err error
		hits, err = ackHits(ctx, q, to, ids)
		return err
	})
	if err != nil {
		return 0, wrap("ack", err)
	}
	if len(hits) != len(ids) {
		return 0, ackMissing(to, ids, hits)
	}
	now := db.now()
	nowText := formatTime(now)
	changed := 0
	for len(hits) > 0 {
		n, size := 0, int64(0)
		for n < len(hits) && (n == 0 || size+hits[n].bytes <= ackChunkBytes) {
			size += hits[n].bytes
			n++
		}
		chunk := make([]string, n)
		for i, h := range hits[:n] {
			chunk[i] = h.id
		}
		hits = hits[n:]
		var done int
		err := db.write(ctx, func(ctx context.Context, w *writeTx) error {
			// The states as they are now: another call may have read
			// or acknowledged some since.
			cur, err := ackHits(ctx, w, to, chunk)
			if err != nil {
				return err
			}
			done = 0
			for _, h := range cur {
				if h.state == string(model.MessageAcked) {
					continue
				}
				if _, err := w.ExecContext(ctx, qAckOne, string(model.MessageAcked), nowText, nowText, h.id); err != nil {
					return err
				}
				if err := w.audit(ctx, model.AuditEvent{At: now, Kind: "message.acked", Actor: to, MessageID: h.id,
					Data: auditData{"from": h.from, "to": to, "previous_state": h.state}}); err != nil {
					return err
				}
				done++
			}
			return nil
		})
		if err != nil {
			return changed, wrap("ack", err)
		}
		changed += done
	}
	return changed, nil
}

// ackHit is one of the recipient's messages named by an Ack.
type ackHit struct {
	id, from, state string
	bytes           int64
}

// ackQueries caches ackHits' query texts by the number of ids.
var ackQueries sync.Map

// ackHits reads to's messages among ids, oldest first.
func ackHits(ctx context.Context, q querier, to string, ids []string) ([]ackHit, error) {
	query, ok := ackQueries.Load(len(ids))
	if !ok {
		query = sqlgen().NewSelect().Model((*messageRow)(nil)).Column("id", "from_agent", "state").ColumnExpr("octet_length(body)").
			Where("to_agent = ?").Where("id IN (" + placeholders(len(ids)) + ")").Order("seq").String()
		ackQueries.Store(len(ids), query)
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, to)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := q.QueryContext(ctx, query.(string), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ackHit
	for rows.Next() {
		var h ackHit
		if err := rows.Scan(&h.id, &h.from, &h.state, &h.bytes); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// ackMissing is the not_found of an Ack naming ids that are not to's
// messages: the first few, each clipped, so that the answer stays small
// whatever the caller sent.
func ackMissing(to string, ids []string, hits []ackHit) error {
	found := make(map[string]bool, len(hits))
	for _, h := range hits {
		found[h.id] = true
	}
	var missing []string
	n := 0
	for _, id := range ids {
		if found[id] {
			continue
		}
		if n++; n <= maxNamed {
			missing = append(missing, strconv.Quote(model.Echo(id)))
		}
	}
	if n > maxNamed {
		missing = append(missing, fmt.Sprintf("and %d more", n-maxNamed))
	}
	return &model.Error{Code: model.CodeNotFound,
		Message: fmt.Sprintf("no message %s in %s's inbox; nothing was acknowledged", strings.Join(missing, ", "), to)}
}

// GetMessage returns one message by id, or an error with CodeNotFound.
func (db *DB) GetMessage(ctx context.Context, id string) (model.Message, error) {
	ms, err := db.queryMessages(ctx, db.rq, qMessageByID, id)
	if err != nil {
		return model.Message{}, wrap("get message", err)
	}
	if len(ms) == 0 {
		return model.Message{}, model.Errorf(model.CodeNotFound, "no message %q", id)
	}
	return ms[0], nil
}

// ListMessages returns the messages matching f, newest first, for
// operators. UnreadOnly selects stored messages; f.Limit defaults to
// model.DefaultPageSize and is capped at model.MaxPageSize; f.Before is a
// message id, and only older messages are returned. The page stops before the message that
// would take its encoded answer past the DB's answer bound (it always holds
// one): page on with Before until a page is empty.
//
// A recipient's messages of every state are read as one newest-first walk
// of messages_inbox (to_agent, state, seq) per state, each stopping at the
// page size, merged: the cost is the page size, not the recipient's
// history.
func (db *DB) ListMessages(ctx context.Context, f model.MessageFilter) ([]model.Message, error) {
	var where []string
	var args []any
	add := func(clause string, a ...any) {
		where = append(where, clause)
		args = append(args, a...)
	}
	if f.To != "" {
		add(`to_agent = ?`, f.To)
	}
	if f.From != "" {
		add(`from_agent = ?`, f.From)
	}
	var states []model.MessageState
	switch {
	case f.UnreadOnly:
		states = []model.MessageState{model.MessageStored}
	case f.To != "":
		states = model.AllMessageStates()
	}
	n := pageSize(f.Limit)
	var out []model.Message
	err := db.readTx(ctx, func(ctx context.Context, tx querier) error {
		where, args := slices.Clip(where), slices.Clip(args)
		if f.Before != "" {
			seq, err := seqOf(ctx, tx, "messages", f.Before)
			if err != nil {
				return err
			}
			where, args = append(where, `seq < ?`), append(args, seq)
		}
		query, qargs := messagePage(where, args, states, "DESC", n)
		var err error
		out, _, err = db.queryMessagesSeq(ctx, tx, db.pageTake(messageSize), query, qargs...)
		return err
	})
	if err != nil {
		return nil, wrap("list messages", err)
	}
	return out, nil
}

// messagePage returns a page of messages matching where (with args),
// ordered by seq (order "ASC" or "DESC"), limited to n, and its
// parameters. With more than one state it is a UNION ALL of one walk per
// state (disjoint), merged by seq.
func messagePage(where []string, args []any, states []model.MessageState, order string, n int) (string, []any) {
	query := messagePageQuery(where, len(states), order)
	switch len(states) {
	case 0:
		return query, append(slices.Clip(args), n)
	case 1:
		return query, append(slices.Clip(args), string(states[0]), n)
	}
	var qargs []any
	for _, st := range states {
		qargs = append(append(qargs, args...), string(st), n)
	}
	return query, append(qargs, n)
}

// messagePages caches messagePageQuery's texts by shape: the where
// fragments are this file's own literals, so the shapes are few and fixed.
var messagePages sync.Map

// messagePageQuery returns the text of messagePage's query, built with
// bun once per shape (and prepared once, by the statement cache): the
// parameters of where, then for each of the states (none: no state
// filter) the state and the page size, then (with more than one state)
// the page size of the merged page.
func messagePageQuery(where []string, states int, order string) string {
	key := strings.Join(where, " AND ") + " | " + strconv.Itoa(states) + " " + order
	if q, ok := messagePages.Load(key); ok {
		return q.(string)
	}
	g := sqlgen()
	walk := func(extra ...string) *bun.SelectQuery {
		q := g.NewSelect().Model((*messageRow)(nil))
		for _, w := range append(slices.Clip(where), extra...) {
			q = q.Where(w)
		}
		return q.OrderExpr("seq " + order + " LIMIT ?")
	}
	var page *bun.SelectQuery
	switch states {
	case 0:
		page = walk()
	case 1:
		page = walk("state = ?")
	default:
		// SQLite takes an arm's ORDER BY and LIMIT only inside a
		// subquery, and the ORDER BY after the last arm orders the whole
		// compound.
		for i := range states {
			arm := g.NewSelect().ColumnExpr("*").TableExpr("(?)", walk("state = ?"))
			if i == states-1 {
				arm = arm.OrderExpr("seq " + order + " LIMIT ?")
			}
			if page == nil {
				page = arm
			} else {
				page = page.UnionAll(arm)
			}
		}
	}
	q := page.String()
	messagePages.Store(key, q)
	return q
}

// countFunc returns how many elements of s satisfy f.
func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}
