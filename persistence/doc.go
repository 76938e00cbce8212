// Package persistence stores HAI-Relay's tasks, messages, agent probe and
// hardening verification results and hash-chained audit log in SQLite,
// through bun over the pure-Go modernc.org/sqlite driver.
//
// A *DB implements model.Store and model.MessageStore. It keeps two pools on
// one database file:
//
//   - one writer connection (a *bun.DB with SetMaxOpenConns(1)) whose every
//     transaction starts with BEGIN IMMEDIATE (_txlock=immediate), so write
//     transactions are serialized, also against other processes on the same
//     file, and never fail with SQLITE_BUSY_SNAPSHOT;
//   - a pool of reader connections opened with query_only, used by every
//     read method. In WAL mode they are never blocked by the writer.
//
// Every pragma (journal_mode, synchronous, foreign_keys, busy_timeout,
// query_only, wal_autocheckpoint) is passed as a DSN _pragma parameter so
// that the driver applies it to each new pooled connection, not only to the
// first one.
//
// # Durability and group commit
//
// The default is synchronous=FULL: a write is acknowledged only after the
// WAL holding it was fsynced, so it survives power loss, not only a crash
// of the relay. Options.Synchronous may choose NORMAL, which survives a
// crash of the relay but may lose the last acknowledged writes on an OS
// crash or power loss (see spec.StorageConfig for what that risks).
//
// To pay one fsync for many writes, every write method (CreateTask,
// Transition, CreateMessage, Inbox when it marks messages read, Ack,
// RecordDenial, Audit, RecordProbe, RecordVerification, Import) hands its transaction body to one
// writer goroutine, started by Open and stopped by Close. The writer takes
// every request queued at that moment (at most Options.MaxBatch, default
// DefaultMaxBatch; it never waits for more), runs them in that order in one
// IMMEDIATE transaction, commits, and only then answers each caller:
//
//   - Each request runs inside its own SAVEPOINT. One that fails (a
//     compare-and-set miss, a constraint, any error, even a panic) is
//     rolled back to its savepoint and reported to its caller alone; the
//     others of the batch go on and commit.
//   - A failure of the transaction itself (BEGIN, a savepoint statement,
//     the audit head update, COMMIT) fails every request of the batch that
//     had not failed alone: nothing of the batch is durable, and each caller
//     is told so. The writer then goes on with the next batch.
//   - The audit chain stays one total order: the requests of a batch append
//     their rows in batch order, from one in-memory head that a rolled-back
//     request restores, and audit_head is written once, before the commit.
//   - Context: a request whose context ends while it is still queued is
//     dropped, never applied, and its caller gets the context's error at
//     once. Once the writer has taken it, its caller waits for the batch's
//     outcome whatever its context does, and gets that outcome: a write is
//     never half-applied, nor reported failed after it committed. The
//     request's body runs with its context's values but without its
//     cancellation, which would interrupt (and roll back) the whole batch.
//   - Close lets the writer finish every request already queued, then
//     stops it; later writes fail with ErrClosed. WriterStats reports how
//     many requests the batches carried.
//
// The writer never checkpoints on commit (wal_autocheckpoint=0). It counts
// the WAL frames it appends (the connection's pages written). Every
// kickFrames it kicks a checkpointer goroutine, which copies the WAL into
// the main file on a reader connection while the writer goes on; once it
// appended walCatchUpFrames, the writer checkpoints itself between two
// batches, after waiting for a checkpoint of the checkpointer's to end, so
// no write can be appending then and the next transaction starts the WAL
// over. The WAL stays near walCatchUpFrames pages under any stream of
// writes, however starved the checkpointer; only a reader that holds one
// snapshot across checkpoints can keep it longer.
//
// The schema lives in numbered SQL files embedded from migrations/. Open
// applies the missing ones, each in its own transaction together with its
// row in schema_migrations, so a migration that fails is never recorded.
// Each table has one bun model (models.go) whose tags are its columns;
// bun's query builder makes every statement's text from the models, with
// the values left as parameters that database/sql binds, and the fixed
// statements are prepared once per pool (statements.go).
// A file that is not a SQLite database is refused and left untouched.
//
// Every state write is compare-and-set (UPDATE … WHERE id = ? AND state = ?)
// and commits in one transaction with its event row, its gate verdicts and
// its audit rows. The audit log is a SHA-256 hash chain; see CanonicalAudit
// for the exact encoding and VerifyAudit for the check. The kinds of audit
// row written here, with their data keys:
//
//	task.submitted     target, mode, mission_id, lease_id, context_id, cwd,
//	                   idempotency_key, request_sha256 (those not empty),
//	                   prompt_sha256,
//	                   prompt_bytes, artifacts, reference_task_ids (counts)
//	gate.verdict       gate, passed, code, message, and the verdict's detail
//	                   keys (prefixed "detail." if they clash)
//	task.transition    from, to, trigger, code, message, and with a
//	                   result result_sha256, result_bytes
//	permission.denied  the caller's keys, target, denied_permissions
//	message.stored     from, to, body_sha256, body_bytes, artifacts,
//	                   context_id, reply_to
//	message.read       to, message_ids (comma-separated), count: one row
//	                   per inbox call that marked messages read
//	message.acked      from, to, previous_state
//	agent.probe        agent, worked_live, probed_at, reason
//	agent.verify       agent, status, verified_at, attempts (count),
//	                   stopped.<stop> (count per stop), adapter_version,
//	                   profile, reason (those not empty)
//	retention.pruned   what (acked_messages or terminal_tasks), count,
//	                   bytes, before, ids (comma-separated), trigger: one
//	                   row per prune batch
//
// plus whatever other packages append with (*DB).Audit. Bodies, prompts
// and results are kept in their own tables; the audit log holds their
// SHA-256, so Prune can remove them and the chain still verifies and
// vouches for them. The audit log itself is never pruned.
//
// # Quotas, the free-space reserve and retention
//
// CreateMessage refuses a message that would take its recipient past its
// quota of unacknowledged messages or body bytes (recipient_inbox_full),
// counted from inbox_usage, which triggers keep in step with the
// messages table in every write's own transaction. CreateMessage and
// CreateTask refuse a write that would leave less free space than
// Options.MinFreeBytes (storage_full), so that acknowledgements, inbox
// reads, transitions and Prune still have room on a disk that fills.
// Prune removes acknowledged messages and ended tasks older than a
// retention policy, in bounded batches, and on a database created with
// auto_vacuum=INCREMENTAL (every one Open creates) gives the freed pages
// back to the filesystem.
//
// Statements are prepared once per pool: the hot ones at Open, the others
// (each listing's filter combination) on first use, outside the caller's
// transaction.
//
// (*DB).Import appends existing history in bulk, many envelopes per
// transaction, audited and chained like any other write; the benchmarks'
// seeder (persistencetest.Seed) fills a store with months of synthetic
// history through it. The benchmarks' floor, plain one-insert-per-
// transaction SQLite on the same driver, is persistencetest.InsertFloor.
//
// Values are always bound as driver parameters, never interpolated into the
// SQL text: bun's client-side formatting rejects NUL bytes and rewrites
// invalid UTF-8, and what an agent sent must be stored byte for byte. bun
// provides the pools, the read transactions (RunInTx) and the row mapping
// (ScanRows).
package persistence
