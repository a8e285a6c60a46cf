-- Lifecycle rules: a bucket's `lifecycle` is NULL (none) or its rules as JSON (the /v1
-- shape, storage/lifecycle_rules.py). `leases` holds cluster-wide jobs (the lifecycle
-- worker): one gateway owns a job until its lease runs out (`until`, Unix seconds).
ALTER TABLE buckets ADD COLUMN lifecycle TEXT;
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until REAL NOT NULL
);
