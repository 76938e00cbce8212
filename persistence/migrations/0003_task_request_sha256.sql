-- 0003_task_request_sha256: each task keeps the SHA-256 of the canonical
-- submit request that created it, so that a repeated idempotency_key is
-- answered with the first task only when the request is the same one, and
-- refused (idempotency_conflict) when any parameter differs.
--
-- Tasks stored before this migration have none (''): the engine compares a
-- repeat with what such a task stored instead.
ALTER TABLE tasks ADD COLUMN request_sha256 TEXT NOT NULL DEFAULT '';
