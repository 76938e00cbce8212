package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

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

// NoLimit, as Options.InboxMessages, InboxBytes or MinFreeBytes, turns
// that limit off.
const NoLimit = -1

// limits are Options' quota and reserve, defaulted: 0 means none.
type limits struct {
	inboxMessages int64
	inboxBytes    int64
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

// checkInbox refuses m (recipient_inbox_full) when its recipient's
// unacknowledged messages, counted in this very transaction, leave no
// room for it: the writer runs one transaction at a time, so no two
// senders can both take the last place.
func (db *DB) checkInbox(ctx context.Context, w *writeTx, m model.Message) error {
	if db.limits.inboxMessages == 0 && db.limits.inboxBytes == 0 {
		return nil
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

// byteSize writes n bytes for a message: exact below 1 KiB, else in KiB,
// MiB or GiB with one decimal.
func byteSize(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return fmt.Sprintf("%d bytes", n)
	case n < k*k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	case n < k*k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
}
