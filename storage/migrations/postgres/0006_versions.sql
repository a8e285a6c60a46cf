-- Versioning. A bucket's `versioning` is NULL (never enabled), 'Enabled' or 'Suspended'.
-- `files` keeps the current version of each key, as before; `version_id` is NULL for the
-- "null" version (unversioned and suspended writes), `order_key` (a ULID) orders versions in
-- time, and a current delete marker is a row with `delete_marker` = 1 and no content.
-- `versions` keeps the noncurrent versions and delete markers, with the same columns.
ALTER TABLE buckets ADD COLUMN versioning TEXT;
ALTER TABLE files ADD COLUMN version_id TEXT COLLATE "C";
ALTER TABLE files ADD COLUMN order_key TEXT COLLATE "C";
ALTER TABLE files ADD COLUMN delete_marker INTEGER NOT NULL DEFAULT 0;

CREATE TABLE versions (
    bucket_id TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    version_id TEXT COLLATE "C" NOT NULL,
    order_key TEXT COLLATE "C" NOT NULL,
    blob_id TEXT COLLATE "C" NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    content_type TEXT NOT NULL,
    uploaded_at TEXT NOT NULL,
    backend_etag TEXT,
    md5 TEXT,
    metadata TEXT,
    checksum TEXT,
    delete_marker INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket_id, key, version_id)
);
CREATE INDEX versions_order ON versions(bucket_id, key, order_key);
CREATE INDEX versions_blob ON versions(blob_id);
