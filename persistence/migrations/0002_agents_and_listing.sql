-- 0002_agents_and_listing: the agents' live-probe results, and indexes for
-- the operator and facade listings (newest first, by seq).
--
-- Every index costs a page write on each insert or update that touches
-- it, so only the listings that need one get one. There is deliberately no
-- index on tasks.state: every transition would have to update it, and a
-- state filter is served well enough by walking seq backwards (listing) or
-- a scan (crash recovery at start). Messages to one agent are found through
-- messages_inbox (0001).

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

-- A caller's or a target's tasks, newest first (list_tasks, relay tasks
-- list --agent); the OR of both is served by the two together.
CREATE INDEX tasks_caller_seq ON tasks (caller, seq);
CREATE INDEX tasks_target_seq ON tasks (target, seq);
-- Messages an agent sent, newest first (relay messages list).
CREATE INDEX messages_from_seq ON messages (from_agent, seq);
