-- 0002_agents_and_listing: the agents' live-probe results, and indexes for
-- the operator and facade listings (newest first, by seq).

-- The last bounded live probe of each agent (relay agents probe NAME).
-- configured and enabled are computed from config and PATH at run time;
-- only worked_live needs to outlive the daemon.
CREATE TABLE agents (
    name               TEXT    NOT NULL PRIMARY KEY,
    worked_live        INTEGER NOT NULL DEFAULT 0 CHECK (worked_live IN (0, 1)),
    worked_live_at     TEXT,
    worked_live_reason TEXT    NOT NULL DEFAULT '',
    updated_at         TEXT    NOT NULL
);

CREATE INDEX tasks_state_seq  ON tasks (state, seq);
CREATE INDEX tasks_caller_seq ON tasks (caller, seq);
CREATE INDEX tasks_target_seq ON tasks (target, seq);
CREATE INDEX tasks_context_id ON tasks (context_id) WHERE context_id <> '';
CREATE INDEX messages_from_seq ON messages (from_agent, seq);
CREATE INDEX messages_to_seq   ON messages (to_agent, seq);
