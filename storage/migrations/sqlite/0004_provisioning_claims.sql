-- Provisioning as claimed jobs: the gateway that provisions a bucket holds a lease on it, so
-- exactly one gateway works on each bucket and a crashed one's job is taken over when the
-- lease runs out. `provision_claims` counts the claims (once in a quiet life).
ALTER TABLE buckets ADD COLUMN claimed_by TEXT;
ALTER TABLE buckets ADD COLUMN claimed_until REAL;
ALTER TABLE buckets ADD COLUMN provision_claims INTEGER NOT NULL DEFAULT 0;
