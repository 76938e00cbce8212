package persistence

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/hai-relay/relay/model"
)

// Synchronous modes accepted by Options.Synchronous.
const (
	// SyncNormal is durable against a crash of the relay; in WAL mode it
	// may lose the last transactions on an OS crash or power loss.
	SyncNormal = "NORMAL"
	// SyncFull (the default) fsyncs the WAL on every commit: durable
	// against power loss. Group commit shares that fsync among every
	// request of a batch.
	SyncFull = "FULL"
)

// DefaultBusyTimeout is how long a connection waits for a lock held by
// another connection (or another process) before failing with SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// ErrNotDatabase is returned (wrapped) by Open when the file exists but is
// not a SQLite database. The file is left untouched.
var ErrNotDatabase = errors.New("file is not a SQLite database")

// ErrCorrupt is returned (wrapped) by Open when the database fails SQLite's
// integrity check (Options.Check) or SQLite finds it malformed on first
// use. The file is left untouched.
var ErrCorrupt = errors.New("database file is corrupt")

// sqliteHeader is the first 16 bytes of every SQLite 3 database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// Options configures Open. The zero value is valid.
type Options struct {
	// Synchronous is "FULL" (the default: an acknowledged write survives
	// power loss) or "NORMAL" (it survives a crash of the relay, but an OS
	// crash or power loss may roll back the last commits).
	Synchronous string
	// MaxBatch bounds how many write requests one group commit carries;
	// 0 means DefaultMaxBatch, and 1 turns group commit off (one
	// transaction per request, as benchmarks compare).
	MaxBatch int
	// Clock returns the current time; it stamps rows whose caller gave no
	// time. It is called concurrently. Defaults to time.Now.
	Clock func() time.Time
	// BusyTimeout is how long to wait for a database lock. Defaults to
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
	// Readers is the size of the reader pool. Defaults to max(4, GOMAXPROCS).
	Readers int
	// MigrateTo stops migrating at this schema version; 0 means the latest.
	// It exists so tests can build the previous schema and then migrate
	// forward; a DB opened at an older version is only fit for that.
	MigrateTo int
	// Check runs SQLite's integrity check (PRAGMA quick_check) on an
	// existing database before anything else opens it, and refuses one
	// that fails it with an error wrapping ErrCorrupt, leaving the file
	// untouched. It reads the whole file, so
	// it is for a start after a stop that was not clean.
	Check bool
	// AnswerBytes bounds the encoded JSON of one page of Inbox,
	// ListMessages and ListTasks (see model.AnswerBytes, the default for
	// 0); tests lower it.
	AnswerBytes int
	// InboxMessages and InboxBytes are each recipient's quota: how many
	// unacknowledged messages it may hold, and how many bytes of bodies
	// they may hold. A message that would take its recipient past either
	// is refused (recipient_inbox_full) and not stored; the relay's own
	// end-of-task notices are never refused (see Transition). 0 means the
	// default (DefaultInboxMessages, DefaultInboxBytes), NoLimit none.
	InboxMessages int
	InboxBytes    int64
	// InboxSenderShare is the percentage (1 to 100) of a recipient's
	// quota, in messages and in bytes alike, that one sender's
	// unacknowledged messages to it may hold, so that one sender cannot
	// fill an inbox for the others; a message past it is refused
	// (recipient_inbox_full). The relay's own notices have no share.
	// 0 means DefaultInboxSenderShare, NoLimit the whole quota.
	InboxSenderShare int
	// MinFreeBytes is the free space kept for the writes that drain the
	// store: a new message or task that would leave less free (on the
	// database's filesystem, plus the pages free inside the file) is
	// refused with storage_full, while acknowledgements, inbox reads,
	// transitions and pruning go on. 0 means DefaultMinFreeBytes, NoLimit
	// none (only a full disk refuses writes).
	MinFreeBytes int64

	// migrations replaces the embedded migrations; tests use it to inject
	// a failing one.
	migrations []Migration
}

// DB is the relay's SQLite store. It is safe for concurrent use.
type DB struct {
	path   string
	clock  func() time.Time
	writer *bun.DB
	reader *bun.DB
	// answerBytes is Options.AnswerBytes, defaulted.
	answerBytes int
	// limits are the inbox quota and the free-space reserve.
	limits limits
	// wstmts are prepared on the writer's one connection; rq runs reads
	// on the reader pool with its prepared statements.
	wstmts *stmtCache
	rq     readQuerier
	// gw is the group-commit writer; it owns the writer connection
	// between Open and Close. checkpointed is closed when checkpointLoop
	// has returned.
	gw           *groupWriter
	checkpointed chan struct{}
	checkpoints  atomic.Int64
	// testHookCheckpoint, when set (tests only, before any write), is
	// called by the checkpointer before each of its checkpoints.
	testHookCheckpoint func()

	closeOnce sync.Once
	closeErr  error
}

// Compile-time checks that *DB implements the persistence ports.
var (
	_ model.Store        = (*DB)(nil)
	_ model.MessageStore = (*DB)(nil)
)

// Open opens (creating it if needed) the database at path, migrates it to
// the latest schema and returns it. A file that exists but is not a SQLite
// database is refused with an error wrapping ErrNotDatabase, and is neither
// rewritten nor deleted.
//
// The steps, in order: resolve the options, check the file before the
// driver touches it, open the writer and migrate, open the readers,
// prepare the hot statements, start the writer and the checkpointer.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	cfg, err := resolveOptions(path, opts)
	if err != nil {
		return nil, err
	}
	buildStatements()
	if err := preflight(ctx, &cfg); err != nil {
		return nil, err
	}
	db := &DB{path: cfg.path, clock: cfg.clock, answerBytes: cfg.answer, limits: cfg.limits}
	if db.writer, err = openWriter(ctx, &cfg); err != nil {
		return nil, err
	}
	if db.reader, err = openReader(ctx, &cfg); err != nil {
		_ = db.writer.Close()
		return nil, err
	}
	if err := db.prepareStatements(ctx, &cfg); err != nil {
		_ = db.reader.Close()
		_ = db.writer.Close()
		return nil, fmt.Errorf("persistence: open %s: %w", cfg.path, err)
	}
	db.rq.db = db.reader.DB
	db.gw = newGroupWriter(db.writer.DB, db.wstmts, opts.MaxBatch)
	db.checkpointed = make(chan struct{})
	go db.checkpointLoop(db.gw.checkpoint, db.checkpointed)
	db.gw.start()
	return db, nil
}

// openConfig is Options validated and defaulted, with the absolute path.
type openConfig struct {
	path      string
	syncMode  string
	busy      time.Duration
	readers   int
	clock     func() time.Time
	migs      []Migration
	migrateTo int
	check     bool
	answer    int
	limits    limits
	opts      Options
}

// resolveOptions validates opts and fills its defaults.
func resolveOptions(path string, opts Options) (openConfig, error) {
	if path == "" {
		return openConfig{}, errors.New("persistence: open: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return openConfig{}, fmt.Errorf("persistence: open %s: %w", path, err)
	}
	cfg := openConfig{path: abs, busy: opts.BusyTimeout, readers: opts.Readers, clock: opts.Clock,
		migs: opts.migrations, migrateTo: opts.MigrateTo, check: opts.Check, answer: opts.AnswerBytes, opts: opts}
	if cfg.syncMode, err = normalizeSynchronous(opts.Synchronous); err != nil {
		return openConfig{}, err
	}
	switch {
	case opts.MaxBatch < 0:
		return openConfig{}, fmt.Errorf("persistence: open: negative MaxBatch %d", opts.MaxBatch)
	case opts.BusyTimeout < 0:
		return openConfig{}, fmt.Errorf("persistence: open: negative busy timeout %s", opts.BusyTimeout)
	}
	if cfg.busy == 0 {
		cfg.busy = DefaultBusyTimeout
	}
	if cfg.readers <= 0 {
		cfg.readers = max(4, runtime.GOMAXPROCS(0))
	}
	if cfg.clock == nil {
		cfg.clock = time.Now
	}
	if cfg.migs == nil {
		if cfg.migs, err = embeddedMigrations(); err != nil {
			return openConfig{}, err
		}
	}
	return cfg, nil
}

// preflight checks the file before the driver opens it for the store:
// anything that is not a SQLite file is refused first (setting
// journal_mode on a foreign file must never be attempted), the file is
// made owner-only, checked for integrity if asked, and a new one is
// created with incremental auto-vacuum. The answer bound and the limits
// are validated after the file checks, as they always were.
func preflight(ctx context.Context, cfg *openConfig) error {
	if err := checkHeader(cfg.path); err != nil {
		return err
	}
	if err := ownerOnly(cfg.path); err != nil {
		return err
	}
	if cfg.check {
		if err := quickCheck(ctx, cfg.path, cfg.busy); err != nil {
			return err
		}
	}
	if cfg.answer < 0 {
		return fmt.Errorf("persistence: open: negative AnswerBytes %d", cfg.answer)
	}
	if cfg.answer == 0 {
		cfg.answer = model.AnswerBytes
	}
	var err error
	if cfg.limits, err = newLimits(cfg.opts); err != nil {
		return err
	}
	return createIncremental(ctx, cfg.path, cfg.busy)
}

// openWriter opens the writer pool, one connection whose transactions
// all begin IMMEDIATE, pings it (the driver reports DSN and file problems
// only on the first connection) and migrates. The writer never
// checkpoints on commit (wal_autocheckpoint 0): the checkpointer does it
// beside it (checkpointLoop), so that no write waits for a checkpoint's
// copy and fsync of the main file.
func openWriter(ctx context.Context, cfg *openConfig) (*bun.DB, error) {
	wsql, err := sql.Open("sqlite", dsn(cfg.path, cfg.busy, []string{
		"journal_mode(WAL)",
		"synchronous(" + cfg.syncMode + ")",
		"foreign_keys(1)",
		"wal_autocheckpoint(0)",
	}, "immediate"))
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", cfg.path, err)
	}
	wsql.SetMaxOpenConns(1)
	wsql.SetMaxIdleConns(1)
	wsql.SetConnMaxLifetime(0)
	wsql.SetConnMaxIdleTime(0)
	w := bun.NewDB(wsql, sqlitedialect.New())
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, openError(cfg.path, err)
	}
	if err := migrate(ctx, w, cfg.migs, cfg.migrateTo, cfg.clock); err != nil {
		_ = w.Close()
		return nil, openError(cfg.path, err)
	}
	return w, nil
}

// openReader opens the reader pool. Readers inherit WAL mode from the
// file; they set only per-connection pragmas. query_only makes any write
// attempt on them fail.
func openReader(ctx context.Context, cfg *openConfig) (*bun.DB, error) {
	rsql, err := sql.Open("sqlite", dsn(cfg.path, cfg.busy, []string{
		"foreign_keys(1)",
		"query_only(1)",
	}, ""))
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", cfg.path, err)
	}
	rsql.SetMaxOpenConns(cfg.readers)
	rsql.SetMaxIdleConns(cfg.readers)
	r := bun.NewDB(rsql, sqlitedialect.New())
	if err := r.PingContext(ctx); err != nil {
		_ = r.Close()
		return nil, openError(cfg.path, err)
	}
	return r, nil
}

// prepareStatements prepares the hot statements on both pools, after
// migrating: the schema they name must exist. A DB stopped at an older
// version (MigrateTo) is for migration tests only and runs every query
// unprepared.
func (db *DB) prepareStatements(ctx context.Context, cfg *openConfig) error {
	if cfg.migrateTo != 0 && cfg.migrateTo < len(cfg.migs) {
		return nil
	}
	var err error
	if db.wstmts, err = prepareAll(ctx, db.writer.DB, writerQueries, false); err != nil {
		return err
	}
	if db.rq.stmts, err = prepareAll(ctx, db.reader.DB, readerQueries, true); err != nil {
		_ = db.wstmts.close()
		return err
	}
	return nil
}

// checkpointLoop copies the WAL back into the main file when the writer
// kicks it, on a reader connection, while the writer goes on appending:
// PASSIVE never blocks the writer or readers, and copies what no reader
// still needs, so that the writer's own checkpoint (catchUpCheckpoint)
// finds only a short tail left. It returns when the writer closed kicks.
// Close leaves the final checkpoint to the writer's connection, the last
// one closed.
func (db *DB) checkpointLoop(kicks <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range kicks {
		if db.testHookCheckpoint != nil {
			db.testHookCheckpoint()
		}
		db.gw.ckptMu.Lock()
		var busy, frames, copied int
		// A failure (a checkpoint of another process running) is left
		// to the next kick.
		_ = db.reader.DB.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
		db.gw.ckptMu.Unlock()
		db.checkpoints.Add(1)
	}
}

// Path returns the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close stops the writer, after it has committed (or failed) every write
// already queued, then closes both pools. Writes that arrive later fail with
// ErrClosed. It is idempotent and safe to call concurrently: later calls
// return the result of the first.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.gw.stop()
		<-db.checkpointed
		// Readers first, so the writer is the last connection and
		// checkpoints the WAL into the main file.
		serr := errors.Join(db.rq.stmts.close(), db.wstmts.close())
		rerr := db.reader.Close()
		werr := db.writer.Close()
		db.closeErr = errors.Join(serr, rerr, werr)
	})
	return db.closeErr
}

// WriterStats returns the group-commit writer's counters.
func (db *DB) WriterStats() WriterStats {
	st := db.gw.stats()
	st.Checkpoints = db.checkpoints.Load()
	return st
}

// SchemaVersion returns the highest migration version applied.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, db.reader.DB)
}

// normalizeSynchronous validates Options.Synchronous.
func normalizeSynchronous(s string) (string, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", SyncFull:
		return SyncFull, nil
	case SyncNormal:
		return SyncNormal, nil
	}
	return "", fmt.Errorf("persistence: open: synchronous must be %q or %q, not %q", SyncNormal, SyncFull, s)
}

// dsn builds a modernc.org/sqlite DSN: a file: URI (so any path, even one
// with '?' or '#', is escaped) with busy_timeout and the given pragmas as
// _pragma parameters, applied by the driver on every new connection.
func dsn(path string, busy time.Duration, pragmas []string, txlock string) string {
	q := url.Values{}
	ms := max(busy.Milliseconds(), 1) // 0 would turn the busy handler off
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(ms, 10)+")")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	if txlock != "" {
		q.Set("_txlock", txlock)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// checkHeader refuses an existing, non-empty file that does not start with
// the SQLite header. An absent or empty file is fine: SQLite creates the
// database in it.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", path, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("persistence: open %s: is a directory", path)
	}
	if fi.Size() == 0 {
		return nil
	}
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("persistence: open %s: %w", path, err)
	}
	if !bytes.Equal(head, sqliteHeader) {
		return fmt.Errorf("persistence: open %s: %w (its header is not \"SQLite format 3\"); "+
			"the file was left untouched: move it away or pass another path", path, ErrNotDatabase)
	}
	return nil
}

// ownerOnly makes the database owner-only before SQLite opens it: a new
// file is created 0600 (SQLite gives its -wal and -shm files the database
// file's mode), and an existing database, -wal or -shm file wider than
// that is narrowed. Messages, prompts and the audit log are in there; the
// process umask (often 022) must not make them world-readable.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("persistence: open %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("persistence: open %s: %w", p, err)
		}
		if st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, st.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("persistence: make %s owner-only: %w", p, err)
			}
		}
	}
	return nil
}

// createIncremental makes a new database (an empty file, as ownerOnly
// left it) with auto_vacuum=INCREMENTAL, set before journal_mode=WAL,
// whose first write fixes the file's format: it keeps the pointer map
// that lets Prune give freed pages back to the filesystem
// (incremental_vacuum). An existing database is not touched (the pragma
// on it would be a write, refused on a read-only file): one made without
// it reuses its freed pages instead.
func createIncremental(ctx context.Context, path string, busy time.Duration) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() > 0 {
		return nil // not new (or gone: the open reports it)
	}
	c, err := sql.Open("sqlite", dsn(path, busy, []string{"auto_vacuum(INCREMENTAL)", "journal_mode(WAL)"}, ""))
	if err != nil {
		return fmt.Errorf("persistence: create %s: %w", path, err)
	}
	defer c.Close()
	if err := c.PingContext(ctx); err != nil {
		return openError(path, err)
	}
	return nil
}

// openError wraps an error from the first use of the file, naming SQLite's
// "not a database" case (a corrupt file with a valid header) and its
// "malformed" case plainly.
func openError(path string, err error) error {
	switch sqliteCode(err) & 0xff {
	case sqliteNotADB:
		return fmt.Errorf("persistence: open %s: %w: %v", path, ErrNotDatabase, err)
	case sqliteCorrupt:
		return fmt.Errorf("persistence: open %s: %w: %v", path, ErrCorrupt, err)
	}
	return fmt.Errorf("persistence: open %s: %w", path, err)
}

// quickCheckLines is how many of quick_check's findings an error quotes.
const quickCheckLines = 3

// quickCheck runs PRAGMA quick_check on the database at path, if it holds
// anything, on a connection of its own that leaves a database that fails
// exactly as it was. With a WAL beside it (a crash left one) the
// connection is read-only: it reads the WAL, whose frames are part of
// what is checked, but never copies them into the file, as a read-write
// connection closing last would. Without one it is read-write: a
// read-only one would leave behind the empty -wal and -shm files it
// creates, while a read-write one closing last removes them, with nothing
// to copy.
func quickCheck(ctx context.Context, path string, busy time.Duration) error {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return nil // nothing yet: Open creates it
	}
	mode := "rw"
	if _, err := os.Lstat(path + "-wal"); err == nil {
		mode = "ro"
	}
	c, err := sql.Open("sqlite", dsn(path, busy, nil, "")+"&mode="+mode)
	if err != nil {
		return fmt.Errorf("persistence: check %s: %w", path, err)
	}
	defer c.Close()
	c.SetMaxOpenConns(1)
	rows, err := c.QueryContext(ctx, `PRAGMA quick_check`)
	var found []string
	if err == nil {
		for rows.Next() {
			var line string
			if err = rows.Scan(&line); err != nil {
				break
			}
			if len(found) < quickCheckLines {
				found = append(found, line)
			}
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
	}
	switch {
	case err != nil:
		return openError(path, err)
	case len(found) == 1 && found[0] == "ok":
		return nil
	}
	return fmt.Errorf("persistence: open %s: %w: SQLite's quick_check found: %s", path, ErrCorrupt, strings.Join(found, "; "))
}

// now returns the clock's time, in UTC without a monotonic reading.
func (db *DB) now() time.Time { return db.clock().UTC().Round(0) }
