package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"

	"github.com/hai-relay/relay/model"
)

// Defaults of the inbox quota and of the free-space reserve (Options).
const (
	// DefaultInboxMessages is how many unacknowledged messages one
	// recipient may hold.
	DefaultInboxMessages = 1000
	// DefaultInboxBytes is how many bytes of message bodies one
	// recipient's unacknowledged messages may hold.
	DefaultInboxBytes = 64 << 20
	// DefaultInboxSenderShare is the percentage of a recipient's quota
	// (messages and bytes alike) one sender's unacknowledged messages to
	// it may hold: a quarter, so one sender that fills its share leaves
	// three quarters to the others, and three senders at their share
	// still leave a quarter (the relay's own notices are never refused).
	DefaultInboxSenderShare = 25
	// DefaultMinFreeBytes is the free space kept for the writes that
	// drain the store (acknowledgements, inbox reads, transitions,
	// pruning): new messages and tasks are refused (storage_full) once
	// less would be left.
	DefaultMinFreeBytes = 64 << 20
	// MinReserveBytes is the least reserve that guarantees those writes
	// room: the WAL may grow by walCatchUpFrames (8 MiB) before the
	// writer starts it over, and by one more transaction meanwhile, of
	// at most ackChunkBytes (4 MiB) of acknowledged bodies or
	// vacuumStepPages (4 MiB) moved by a vacuum step. The config refuses
	// a smaller one (TestReliabilityStorageFullOnASmallFilesystem saw an
	// acknowledgement of 8.5 MiB of messages fail with 5 MiB free).
	MinReserveBytes = 16 << 20
)

// NoLimit, as Options.InboxMessages, InboxBytes, InboxSenderShare or
// MinFreeBytes, turns that limit off (a share of NoLimit is the whole
// quota).
const NoLimit = -1

// limits are Options' quota and reserve, defaulted: 0 means none.
type limits struct {
	inboxMessages int64
	inboxBytes    int64
	// shareMessages and shareBytes are one sender's share of a
	// recipient's quota (0: none beyond the quota).
	shareMessages int64
	shareBytes    int64
	minFree       int64
}

func newLimits(o Options) (limits, error) {
	pick := func(name string, v, def int64) (int64, error) {
		switch {
		case v == 0:
			return def, nil
		case v == NoLimit:
			return 0, nil
		case v < 0:
			return 0, fmt.Errorf("persistence: open: %s %d is negative (NoLimit turns it off)", name, v)
		}
		return v, nil
	}
	var l limits
	var err error
	if l.inboxMessages, err = pick("InboxMessages", int64(o.InboxMessages), DefaultInboxMessages); err != nil {
		return l, err
	}
	if l.inboxBytes, err = pick("InboxBytes", o.InboxBytes, DefaultInboxBytes); err != nil {
		return l, err
	}
	share, err := pick("InboxSenderShare", int64(o.InboxSenderShare), DefaultInboxSenderShare)
	switch {
	case err != nil:
		return l, err
	case share > 100:
		return l, fmt.Errorf("persistence: open: InboxSenderShare %d%% is more than the whole quota", share)
	case share > 0 && share < 100:
		// Rounded up, so a share is never 0 of a quota that is not.
		l.shareMessages = (l.inboxMessages*share + 99) / 100
		l.shareBytes = (l.inboxBytes*share + 99) / 100
	}
	l.minFree, err = pick("MinFreeBytes", o.MinFreeBytes, DefaultMinFreeBytes)
	return l, err
}

// InboxUsage is one recipient's unacknowledged messages and the bytes of
// their bodies, as the quota counts them.
type InboxUsage struct {
	Messages int64
	Bytes    int64
}

// InboxUsage returns agent's usage of its inbox quota.
func (db *DB) InboxUsage(ctx context.Context, agent string) (InboxUsage, error) {
	u, err := inboxUsage(ctx, db.rq, agent)
	return u, wrap("inbox usage", err)
}

// inboxUsage reads agent's row of inbox_usage (zero when it has none).
func inboxUsage(ctx context.Context, q querier, agent string) (InboxUsage, error) {
	var u InboxUsage
	err := q.QueryRowContext(ctx, qInboxUsage, agent).Scan(&u.Messages, &u.Bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return InboxUsage{}, nil
	}
	return u, err
}

// overQuota says why a message of size bytes would take u past the quota
// of its recipient, or "" when it fits.
func (l limits) overQuota(to string, u InboxUsage, size int64) string {
	switch {
	case l.inboxMessages > 0 && u.Messages >= l.inboxMessages:
		return fmt.Sprintf("%s has %d unacknowledged messages, its quota ([limits] inbox_messages = %d)",
			to, u.Messages, l.inboxMessages)
	case l.inboxBytes > 0 && u.Bytes+size > l.inboxBytes:
		return fmt.Sprintf("%s's unacknowledged messages hold %s of bodies, and this one (%s) would take them past its quota ([limits] inbox_bytes = %d)",
			to, byteSize(u.Bytes), byteSize(size), l.inboxBytes)
	}
	return ""
}

// overShare says why a message of size bytes from sender would take its
// use u of to's inbox past the sender's share, or "" when it fits.
func (l limits) overShare(from, to string, u InboxUsage, size int64) string {
	switch {
	case l.shareMessages > 0 && u.Messages >= l.shareMessages:
		return fmt.Sprintf("%s has %d unacknowledged messages from %s, %s's share of its quota ([limits] inbox_sender_share: %d of inbox_messages)",
			to, u.Messages, from, from, l.shareMessages)
	case l.shareBytes > 0 && u.Bytes+size > l.shareBytes:
		return fmt.Sprintf("%s's unacknowledged messages from %s hold %s of bodies, and this one (%s) would take them past %s's share of its quota ([limits] inbox_sender_share: %s of inbox_bytes)",
			to, from, byteSize(u.Bytes), byteSize(size), from, byteSize(l.shareBytes))
	}
	return ""
}

// atShare reports whether u, one sender's use of an inbox, is at or past
// the sender's share.
func (l limits) atShare(u InboxUsage) bool {
	return (l.shareMessages > 0 && u.Messages >= l.shareMessages) || (l.shareBytes > 0 && u.Bytes >= l.shareBytes)
}

// senderUsage reads the use of to's inbox by from's messages (zero when
// it has none).
func senderUsage(ctx context.Context, q querier, to, from string) (InboxUsage, error) {
	var u InboxUsage
	err := q.QueryRowContext(ctx, qInboxSenderUsage, to, from).Scan(&u.Messages, &u.Bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return InboxUsage{}, nil
	}
	return u, err
}

// InboxShares implements model.MessageStore: each sender whose
// unacknowledged messages to a recipient (to, or every recipient when to
// is "") reach its share, with its use and the share, ordered by
// recipient and sender. The relay, whose notices are never refused, is
// listed when it is past a share too.
func (db *DB) InboxShares(ctx context.Context, to string) ([]model.InboxShare, error) {
	if db.limits.shareMessages == 0 && db.limits.shareBytes == 0 {
		return []model.InboxShare{}, nil
	}
	// One row per recipient and sender that ever sent: as many as pairs
	// of agents, read whole and filtered here.
	rows, err := db.rq.QueryContext(ctx, qInboxShares, to, to)
	if err != nil {
		return nil, wrap("inbox shares", err)
	}
	defer rows.Close()
	out := []model.InboxShare{}
	for rows.Next() {
		s := model.InboxShare{ShareMessages: db.limits.shareMessages, ShareBytes: db.limits.shareBytes}
		if err := rows.Scan(&s.To, &s.From, &s.Messages, &s.Bytes); err != nil {
			return nil, wrap("inbox shares", err)
		}
		if db.limits.atShare(InboxUsage{Messages: s.Messages, Bytes: s.Bytes}) {
			out = append(out, s)
		}
	}
	return out, wrap("inbox shares", rows.Err())
}

// checkInbox refuses m (recipient_inbox_full) when its sender's
// unacknowledged messages to its recipient leave no room for it in the
// sender's share, or the recipient's, all senders together, in its
// quota; both are counted in this very transaction: the writer runs one
// transaction at a time, so no two senders can both take the last place.
// The share is checked first, so that a sender past its own share is
// told so, whoever else fills the inbox.
func (db *DB) checkInbox(ctx context.Context, w *writeTx, m model.Message) error {
	if db.limits.inboxMessages == 0 && db.limits.inboxBytes == 0 {
		return nil
	}
	if (db.limits.shareMessages > 0 || db.limits.shareBytes > 0) && m.From != model.RelayAgent {
		su, err := senderUsage(ctx, w, m.To, m.From)
		if err != nil {
			return err
		}
		if why := db.limits.overShare(m.From, m.To, su, int64(len(m.Body))); why != "" {
			return model.Errorf(model.CodeRecipientInboxFull, "%s's inbox is full for %s: %s; this message was not stored", m.To, m.From, why).
				WithHint(fmt.Sprintf("%s must read and acknowledge %s's messages (check_inbox lists the senders at their share, then ack_messages) "+
					"before %s can send it more; other senders still can. An operator may raise [limits] inbox_sender_share in config.toml", m.To, m.From, m.From))
		}
	}
	u, err := inboxUsage(ctx, w, m.To)
	if err != nil {
		return err
	}
	if why := db.limits.overQuota(m.To, u, int64(len(m.Body))); why != "" {
		return model.Errorf(model.CodeRecipientInboxFull, "%s's inbox is full: %s; this message was not stored", m.To, why).
			WithHint(fmt.Sprintf("%s must read and acknowledge its messages (check_inbox, then ack_messages) before it can receive more; "+
				"an operator may raise [limits] inbox_messages or inbox_bytes in config.toml", m.To))
	}
	return nil
}

// checkRoom refuses (storage_full) a new message or task of n bytes that
// would leave less free space than the reserve: what the filesystem
// holding the database has free for unprivileged users, plus the pages
// free inside the database file, which SQLite fills before it grows the
// file. The reserve is kept for the writes that drain the store, so that
// a disk that fills up can still be emptied through the relay.
func (db *DB) checkRoom(ctx context.Context, w *writeTx, n int) error {
	if db.limits.minFree == 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(db.path), &st); err != nil {
		return nil // unknown: SQLite reports a full disk itself
	}
	fsFree := int64(st.Bavail) * int64(st.Bsize)
	if fsFree-int64(n) >= db.limits.minFree {
		return nil
	}
	var freePages, pageSize int64
	if err := w.QueryRowContext(ctx, qFreelistCount).Scan(&freePages); err != nil {
		return err
	}
	if err := w.QueryRowContext(ctx, qPageSize).Scan(&pageSize); err != nil {
		return err
	}
	if fsFree+freePages*pageSize-int64(n) >= db.limits.minFree {
		return nil
	}
	return &model.Error{Code: model.CodeStorageFull,
		Message: fmt.Sprintf("the relay's disk is nearly full: %s free on the filesystem of %s and %s inside the database, "+
			"under the reserve of %s kept for acknowledgements, reads and pruning ([storage] min_free_bytes); "+
			"new messages and tasks are not stored until there is room (what was acknowledged before is kept)",
			byteSize(fsFree), db.path, byteSize(freePages*pageSize), byteSize(db.limits.minFree)),
		Hint: "free space on that filesystem, or remove acknowledged messages and ended tasks with `relay prune` " +
			"(`relay prune --help`: it can prune sooner than the retention policy); acknowledging messages still works, " +
			"and writes work again once there is room, without a restart"}
}

// byteSize writes n bytes for a message, in binary units with about
// three significant digits ("900 B", "1.5 KiB", "20 MiB").
func byteSize(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
