-- Snapshots (storage/services/snapshots.py). A bucket snapshot names every version and
-- delete marker its bucket held, current or not, and the bucket's settings (`config`: JSON
-- of its columns, name included). `org_id` and `bucket_id` are NULL for a server snapshot,
-- whose bucket snapshots name it as `parent_id`. `snapshot_versions` holds the file columns
-- (storage/index/rows.py FILE_FIELDS) of each version as its table had it (`is_current`:
-- from `files`, else from `versions`); each row that holds content holds one reference on
-- its blob (`blobs.refcount`), so a snapshot keeps its contents without copying a byte.
CREATE TABLE snapshots (
    id TEXT PRIMARY KEY,
    org_id TEXT,
    bucket_id TEXT,
    bucket_name TEXT,
    parent_id TEXT,
    name TEXT,
    created_at TEXT NOT NULL,
    file_count INTEGER NOT NULL DEFAULT 0,
    size_bytes INTEGER NOT NULL DEFAULT 0,
    config TEXT
);
CREATE INDEX snapshots_org ON snapshots(org_id, id);
CREATE INDEX snapshots_bucket ON snapshots(bucket_id, id);
CREATE INDEX snapshots_parent ON snapshots(parent_id);

CREATE TABLE snapshot_versions (
    snapshot_id TEXT NOT NULL,
    is_current INTEGER NOT NULL,
    bucket_id TEXT NOT NULL,
    key TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    uploaded_at TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    blob_id TEXT NOT NULL,
    backend_etag TEXT,
    md5 TEXT,
    metadata TEXT,
    checksum TEXT,
    version_id TEXT,
    order_key TEXT,
    delete_marker INTEGER NOT NULL DEFAULT 0,
    lock_mode TEXT,
    lock_until TEXT,
    legal_hold INTEGER NOT NULL DEFAULT 0,
    object_key TEXT,
    headers TEXT,
    tags TEXT,
    acl TEXT
);
CREATE INDEX snapshot_versions_snapshot ON snapshot_versions(snapshot_id, is_current, key);
