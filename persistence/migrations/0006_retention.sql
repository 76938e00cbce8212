-- 0006_retention: each recipient's unacknowledged messages, for the inbox
-- quota, and the indexes the retention policy walks.
--
-- inbox_usage holds, per recipient, how many of its messages are not
-- acknowledged (stored or read) and the bytes of their bodies
-- (octet_length: bytes, not characters; SQLite reads it from the record
-- header, without reading the body). The triggers keep it equal to that
-- aggregate on every insert, acknowledgement and delete of a message, in
-- the statement's own transaction, whatever code writes the message: the
-- quota check reads one row instead of counting an inbox. It is filled
-- here from the messages already stored. A recipient's row stays, at
-- zero, once it has acknowledged everything.
CREATE TABLE inbox_usage (
    agent    TEXT    NOT NULL PRIMARY KEY,
    messages INTEGER NOT NULL CHECK (messages >= 0),
    bytes    INTEGER NOT NULL CHECK (bytes >= 0)
) WITHOUT ROWID;

INSERT INTO inbox_usage (agent, messages, bytes)
    SELECT to_agent, count(*), sum(octet_length(body)) FROM messages
    WHERE state <> 'acked' GROUP BY to_agent;

CREATE TRIGGER inbox_usage_insert AFTER INSERT ON messages WHEN NEW.state <> 'acked'
BEGIN
    INSERT INTO inbox_usage (agent, messages, bytes) VALUES (NEW.to_agent, 1, octet_length(NEW.body))
    ON CONFLICT (agent) DO UPDATE SET messages = messages + 1, bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER inbox_usage_ack AFTER UPDATE OF state ON messages
WHEN OLD.state <> 'acked' AND NEW.state = 'acked'
BEGIN
    UPDATE inbox_usage SET messages = messages - 1, bytes = bytes - octet_length(OLD.body)
    WHERE agent = OLD.to_agent;
END;

CREATE TRIGGER inbox_usage_delete AFTER DELETE ON messages WHEN OLD.state <> 'acked'
BEGIN
    UPDATE inbox_usage SET messages = messages - 1, bytes = bytes - octet_length(OLD.body)
    WHERE agent = OLD.to_agent;
END;

-- What the triggers above rely on, refused outright: an acknowledged
-- message is never made unacknowledged, and a message's recipient and
-- body never change.
CREATE TRIGGER messages_ack_is_final BEFORE UPDATE OF state ON messages
WHEN OLD.state = 'acked' AND NEW.state <> 'acked'
BEGIN
    SELECT RAISE(ABORT, 'an acknowledged message stays acknowledged');
END;
CREATE TRIGGER messages_body_is_final BEFORE UPDATE OF to_agent, body ON messages
WHEN NEW.to_agent IS NOT OLD.to_agent OR NEW.body IS NOT OLD.body
BEGIN
    SELECT RAISE(ABORT, 'a message''s recipient and body never change');
END;

-- The retention policy's walks, oldest first: acknowledged messages by
-- when they were acknowledged, ended tasks by when they ended (a terminal
-- task's updated_at is its last transition's time; it never changes
-- again). Both are partial: a message enters messages_acked once, when it
-- is acknowledged, and a task enters tasks_ended once, when it ends, so
-- sending, reading and the transitions before the last one write nothing
-- to them. The state list repeats model's terminal states; a test keeps
-- it equal, and checks that the prune queries use these indexes.
CREATE INDEX messages_acked ON messages (acked_at) WHERE state = 'acked';
CREATE INDEX tasks_ended ON tasks (updated_at)
    WHERE state IN ('completed', 'failed', 'canceled', 'rejected', 'blocked');
