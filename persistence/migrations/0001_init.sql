-- 0001_init: tasks with their events and gate verdicts, passive messages,
-- and the hash-chained audit log.
--
-- Times are TEXT in RFC 3339 (nanoseconds, UTC). JSON columns hold arrays or
-- objects and are checked with json_valid. The CHECK lists repeat
-- model.AllStates(), model.AllModes() and model.AllMessageStates(); a test
-- keeps them equal.

CREATE TABLE tasks (
    id                 TEXT    NOT NULL PRIMARY KEY,
    -- seq orders tasks and backs listing cursors; assigned max+1 by the
    -- single writer and never reused.
    seq                INTEGER NOT NULL UNIQUE,
    state              TEXT    NOT NULL CHECK (state IN ('submitted','authorized','working','completed','failed','canceled','rejected','blocked')),
    code               TEXT    NOT NULL DEFAULT '',
    message            TEXT    NOT NULL DEFAULT '',
    caller             TEXT    NOT NULL,
    target             TEXT    NOT NULL,
    mode               TEXT    NOT NULL CHECK (mode IN ('read_only','state_changing')),
    mission_id         TEXT    NOT NULL DEFAULT '',
    lease_id           TEXT    NOT NULL DEFAULT '',
    context_id         TEXT    NOT NULL DEFAULT '',
    prompt             TEXT    NOT NULL DEFAULT '',
    cwd                TEXT    NOT NULL DEFAULT '',
    artifacts          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(artifacts)),
    reference_task_ids TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(reference_task_ids)),
    idempotency_key    TEXT    NOT NULL DEFAULT '',
    result             TEXT    NOT NULL DEFAULT '',
    stop_reason        TEXT    NOT NULL DEFAULT '',
    session_mode       TEXT    NOT NULL DEFAULT '',
    tool_calls         TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(tool_calls)),
    denied_permissions INTEGER NOT NULL DEFAULT 0 CHECK (denied_permissions >= 0),
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL
);

-- A repeated submit with the same key from the same caller finds the first
-- task; tasks without a key are not constrained.
CREATE UNIQUE INDEX tasks_caller_idempotency_key
    ON tasks (caller, idempotency_key) WHERE idempotency_key <> '';

-- One row per committed transition, written with the compare-and-set update.
-- Keyed by (task, n) with n = 1, 2, 3… per task in commit order, WITHOUT
-- ROWID: one b-tree serves both the insert and a task's timeline, so each
-- transition writes one page here instead of two.
CREATE TABLE task_events (
    task_id      TEXT    NOT NULL REFERENCES tasks (id),
    n            INTEGER NOT NULL,
    from_state   TEXT    NOT NULL,
    to_state     TEXT    NOT NULL,
    trigger_name TEXT    NOT NULL,
    code         TEXT    NOT NULL DEFAULT '',
    message      TEXT    NOT NULL DEFAULT '',
    actor        TEXT    NOT NULL DEFAULT '',
    at           TEXT    NOT NULL,
    PRIMARY KEY (task_id, n)
) WITHOUT ROWID;

-- Every gate verdict of every evaluation, written with its transition;
-- keyed like task_events.
CREATE TABLE task_verdicts (
    task_id TEXT    NOT NULL REFERENCES tasks (id),
    n       INTEGER NOT NULL,
    gate    TEXT    NOT NULL,
    passed  INTEGER NOT NULL CHECK (passed IN (0, 1)),
    code    TEXT    NOT NULL DEFAULT '',
    message TEXT    NOT NULL DEFAULT '',
    detail  TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(detail)),
    at      TEXT    NOT NULL,
    PRIMARY KEY (task_id, n)
) WITHOUT ROWID;

-- Passive messages: stored -> read -> acked.
CREATE TABLE messages (
    id         TEXT    NOT NULL PRIMARY KEY,
    seq        INTEGER NOT NULL UNIQUE,
    from_agent TEXT    NOT NULL,
    to_agent   TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    context_id TEXT    NOT NULL DEFAULT '',
    reply_to   TEXT    NOT NULL DEFAULT '',
    artifacts  TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(artifacts)),
    state      TEXT    NOT NULL CHECK (state IN ('stored','read','acked')),
    created_at TEXT    NOT NULL,
    read_at    TEXT,
    acked_at   TEXT
);
-- The inbox: a recipient's messages by state, oldest first.
CREATE INDEX messages_inbox ON messages (to_agent, state, seq);

-- The append-only audit log. Each row's hash chains it to the previous row;
-- see persistence.CanonicalAudit for the encoding.
CREATE TABLE audit_log (
    seq        INTEGER NOT NULL PRIMARY KEY,
    at         TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    actor      TEXT    NOT NULL DEFAULT '',
    task_id    TEXT    NOT NULL DEFAULT '',
    message_id TEXT    NOT NULL DEFAULT '',
    data       TEXT    NOT NULL DEFAULT '{}',
    prev_hash  TEXT    NOT NULL,
    hash       TEXT    NOT NULL
);

-- Refuse in-place edits through SQL. This is a guard against mistakes; the
-- hash chain is what detects tampering.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

-- The chain's head: the last row's seq and hash (0 and 64 zeros when the
-- log is empty). Updated in the same transaction as every append, so a
-- deleted last row is detected.
CREATE TABLE audit_head (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT    NOT NULL
);
INSERT INTO audit_head (id, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
