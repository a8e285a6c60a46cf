-- The outbox: one row per change to a file, written in the transaction that makes the
-- change (storage/index/events.py). `seq` orders them; within an organization it is also
-- the commit order, since every file write holds its organization's row until it commits.
-- Readers walk the primary key from a recent seq (the stream, the webhooks by bucket).
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id TEXT NOT NULL,
    bucket_id TEXT NOT NULL,
    bucket_name TEXT NOT NULL,
    region TEXT NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT,
    version_id TEXT,
    at TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX events_bucket ON events(bucket_id, seq);
-- Webhooks: where a bucket's events are sent. `secret_sealed` signs deliveries (sealed as
-- S3 secrets are); `last_seq` is the last event seq handed to `deliveries`.
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    bucket_id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    prefix TEXT NOT NULL DEFAULT '',
    suffix TEXT NOT NULL DEFAULT '',
    enabled INTEGER NOT NULL DEFAULT 1,
    secret_sealed BLOB NOT NULL,
    created_at TEXT NOT NULL,
    last_seq INTEGER NOT NULL
);
CREATE INDEX webhooks_bucket ON webhooks(bucket_id);
-- One row per event a webhook is to receive: pending (next_at: when to try), delivered or
-- failed (parked after the retry period; redelivery makes it pending again).
CREATE TABLE deliveries (
    webhook_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    first_at REAL NOT NULL,
    last_status INTEGER,
    last_error TEXT,
    done_at REAL,
    PRIMARY KEY (webhook_id, seq)
);
CREATE INDEX deliveries_pending ON deliveries(seq) WHERE status = 'pending';
CREATE INDEX deliveries_key ON deliveries(webhook_id, key, seq) WHERE status = 'pending';
