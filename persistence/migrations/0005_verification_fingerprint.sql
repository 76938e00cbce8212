-- 0005_verification_fingerprint: a verification records which adapter it
-- ran (its package, resolved path and fingerprint: a SHA-256 of the entry
-- file and its package.json), so that require_verified holds only for the
-- very files that were verified, whatever version string they report; and
-- a verification whose attempts were all stopped but whose positive
-- control did not pass is 'unusable'.
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt
-- and its rows copied. The status CHECK list repeats
-- model.AllHardeningStatuses.
CREATE TABLE agent_verifications_new (
    name            TEXT NOT NULL PRIMARY KEY,
    status          TEXT NOT NULL CHECK (status IN ('verified','failed','unusable','unverified')),
    verified_at     TEXT NOT NULL,
    adapter_version TEXT NOT NULL DEFAULT '',
    adapter_package TEXT NOT NULL DEFAULT '',
    adapter_path    TEXT NOT NULL DEFAULT '',
    fingerprint     TEXT NOT NULL DEFAULT '',
    profile         TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    attempts        TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(attempts)),
    updated_at      TEXT NOT NULL
);
INSERT INTO agent_verifications_new (name, status, verified_at, adapter_version, profile, reason, attempts, updated_at)
    SELECT name, status, verified_at, adapter_version, profile, reason, attempts, updated_at FROM agent_verifications;
DROP TABLE agent_verifications;
ALTER TABLE agent_verifications_new RENAME TO agent_verifications;
