-- 0010_probe_adapter: a probe belongs to the adapter it ran on. The
-- fingerprint of the adapter's files at the probe (dispatch.Adapter), so
-- that worked_live is shown stale, not carried over, once another adapter
-- is installed. '' for probes made before this migration: not known.
ALTER TABLE agents ADD COLUMN worked_live_fingerprint TEXT NOT NULL DEFAULT '';
