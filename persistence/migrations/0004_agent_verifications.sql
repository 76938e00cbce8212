-- 0004_agent_verifications: the last hardening verification of each agent
-- (relay agents verify NAME), the agent's hardening health signal.
--
-- A table of its own, not columns on agents: a verification and a probe
-- are recorded independently, and this migration touches nothing else.
-- attempts holds the report's attempts as a JSON array of
-- model.VerifyAttempt. The status CHECK list repeats
-- model.AllHardeningStatuses.
CREATE TABLE agent_verifications (
    name            TEXT NOT NULL PRIMARY KEY,
    status          TEXT NOT NULL CHECK (status IN ('verified','failed','unverified')),
    verified_at     TEXT NOT NULL,
    adapter_version TEXT NOT NULL DEFAULT '',
    profile         TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    attempts        TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(attempts)),
    updated_at      TEXT NOT NULL
);
