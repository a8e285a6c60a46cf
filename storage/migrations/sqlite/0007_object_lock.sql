-- Object lock. A bucket's `object_lock` is NULL (off) or JSON: {} when on without a default
-- retention, {"default": {"mode": "GOVERNANCE" or "COMPLIANCE", "days": n or "years": n}}.
-- Every version, current (files) or not (versions), may carry a retention: `lock_mode` and
-- `lock_until` (UTC, YYYY-MM-DDTHH:MM:SSZ, compared as text), and a legal hold. A multipart
-- upload keeps the lock its object will get, as JSON, until it completes.
ALTER TABLE buckets ADD COLUMN object_lock TEXT;
ALTER TABLE files ADD COLUMN lock_mode TEXT;
ALTER TABLE files ADD COLUMN lock_until TEXT;
ALTER TABLE files ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE versions ADD COLUMN lock_mode TEXT;
ALTER TABLE versions ADD COLUMN lock_until TEXT;
ALTER TABLE versions ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE multipart_uploads ADD COLUMN lock TEXT;
