// Package persistence stores HAI-Relay's tasks, messages, agent probe results
// and hash-chained audit log in SQLite, through bun over the pure-Go
// modernc.org/sqlite driver.
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
// query_only) is passed as a DSN _pragma parameter so that the driver applies
// it to each new pooled connection, not only to the first one.
//
// The schema lives in numbered SQL files embedded from migrations/. Open
// applies the missing ones, each in its own transaction together with its
// row in schema_migrations, so a migration that fails is never recorded.
// A file that is not a SQLite database is refused and left untouched.
//
// Every state write is compare-and-set (UPDATE … WHERE id = ? AND state = ?)
// and commits in one transaction with its event row, its gate verdicts and
// its audit rows. The audit log is a SHA-256 hash chain; see CanonicalAudit
// for the exact encoding and VerifyAudit for the check. The kinds of audit
// row written here, with their data keys:
//
//	task.submitted     target, mode, mission_id, lease_id, context_id, cwd,
//	                   idempotency_key (those not empty), prompt_sha256,
//	                   prompt_bytes, artifacts, reference_task_ids (counts)
//	gate.verdict       gate, passed, code, message, and the verdict's detail
//	                   keys (prefixed "detail." if they clash)
//	task.transition    from, to, trigger, code, message
//	permission.denied  the caller's keys, target, denied_permissions
//	message.stored     from, to, body_sha256, body_bytes, artifacts,
//	                   context_id, reply_to
//	message.read       from, to
//	message.acked      from, to, previous_state
//	agent.probe        agent, worked_live, probed_at, reason
//
// plus whatever other packages append with (*DB).Audit. Bodies and prompts
// are kept in their own tables; the audit log holds their SHA-256.
//
// Values are always bound as driver parameters, never interpolated into the
// SQL text: bun's client-side formatting rejects NUL bytes and rewrites
// invalid UTF-8, and what an agent sent must be stored byte for byte. bun
// provides the pools, the transactions (RunInTx) and the row mapping
// (ScanRows); the hot statements are prepared once at Open.
package persistence
