-- 0009_audit_retention: the audit log's retention. The oldest rows may be
-- cut, as a prefix of the chain, once a checkpoint names the last row cut
-- and its hash: that hash chains every row before it, so it is the digest
-- of what was cut, and the first row kept must link to it. Each cut also
-- appends an "audit.checkpoint" row to the chain naming the same row and
-- hash, so a checkpoint moved by hand disagrees with the chain.
-- seq 0 and 64 zeros: nothing was ever cut.
CREATE TABLE audit_checkpoint (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL CHECK (seq >= 0),
    hash TEXT    NOT NULL,
    at   TEXT    NOT NULL
);
INSERT INTO audit_checkpoint (id, seq, hash, at)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', '');

-- The checkpoint only moves forward.
CREATE TRIGGER audit_checkpoint_forward BEFORE UPDATE ON audit_checkpoint
WHEN NEW.seq < OLD.seq
BEGIN
    SELECT RAISE(ABORT, 'the audit checkpoint only moves forward');
END;

-- A row is deleted only once the checkpoint covers it (0001 refused every
-- delete).
DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN OLD.seq > (SELECT seq FROM audit_checkpoint WHERE id = 1)
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
