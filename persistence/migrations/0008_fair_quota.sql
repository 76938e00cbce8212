-- 0008_fair_quota: each sender's share of a recipient's inbox quota, and
-- audit rows written once per effect.
--
-- inbox_sender_usage is inbox_usage (0006) split by sender: per recipient
-- and sender, how many of the sender's messages to it are not
-- acknowledged and the bytes of their bodies. The same triggers' shape
-- keeps it equal to that aggregate on every insert, acknowledgement and
-- delete, so a sender's share is checked from one row inside the insert's
-- own transaction. It is filled here from the messages already stored.
CREATE TABLE inbox_sender_usage (
    agent    TEXT    NOT NULL,
    sender   TEXT    NOT NULL,
    messages INTEGER NOT NULL CHECK (messages >= 0),
    bytes    INTEGER NOT NULL CHECK (bytes >= 0),
    PRIMARY KEY (agent, sender)
) WITHOUT ROWID;

INSERT INTO inbox_sender_usage (agent, sender, messages, bytes)
    SELECT to_agent, from_agent, count(*), sum(octet_length(body)) FROM messages
    WHERE state <> 'acked' GROUP BY to_agent, from_agent;

CREATE TRIGGER inbox_sender_usage_insert AFTER INSERT ON messages WHEN NEW.state <> 'acked'
BEGIN
    INSERT INTO inbox_sender_usage (agent, sender, messages, bytes)
    VALUES (NEW.to_agent, NEW.from_agent, 1, octet_length(NEW.body))
    ON CONFLICT (agent, sender) DO UPDATE SET messages = messages + 1, bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER inbox_sender_usage_ack AFTER UPDATE OF state ON messages
WHEN OLD.state <> 'acked' AND NEW.state = 'acked'
BEGIN
    UPDATE inbox_sender_usage SET messages = messages - 1, bytes = bytes - octet_length(OLD.body)
    WHERE agent = OLD.to_agent AND sender = OLD.from_agent;
END;

CREATE TRIGGER inbox_sender_usage_delete AFTER DELETE ON messages WHEN OLD.state <> 'acked'
BEGIN
    UPDATE inbox_sender_usage SET messages = messages - 1, bytes = bytes - octet_length(OLD.body)
    WHERE agent = OLD.to_agent AND sender = OLD.from_agent;
END;

-- A message's sender never changes either (0006 holds its recipient and
-- body), which the triggers above rely on.
CREATE TRIGGER messages_sender_is_final BEFORE UPDATE OF from_agent ON messages
WHEN NEW.from_agent IS NOT OLD.from_agent
BEGIN
    SELECT RAISE(ABORT, 'a message''s sender never changes');
END;

-- audit_once holds the audit rows that record an effect which happens at
-- most once per task (the MCP task bound to it was created, its end was
-- delivered, its cancel was asked for): a second call finds its row here
-- and writes nothing, so retries and repeated calls cannot grow the log.
-- Pruning a task removes its rows here with it.
CREATE TABLE audit_once (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    kind    TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    PRIMARY KEY (task_id, kind)
) WITHOUT ROWID;
