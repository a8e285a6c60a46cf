-- bucketd index, schema version 1.
CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    created_at TEXT NOT NULL,
    bucket_count INTEGER NOT NULL DEFAULT 0,
    stored_bytes INTEGER NOT NULL DEFAULT 0,
    file_count INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id),
    name TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE,
    last4 TEXT NOT NULL,
    scopes TEXT NOT NULL,
    bucket_id TEXT,
    created_at TEXT NOT NULL,
    expires_at INTEGER,
    revoked_at TEXT
);
CREATE INDEX api_keys_org ON api_keys(org_id, id);

CREATE TABLE buckets (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id),
    name TEXT NOT NULL,
    region TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    created_at TEXT NOT NULL,
    max_upload_bytes INTEGER,
    allowed_content_types TEXT,
    file_count INTEGER NOT NULL DEFAULT 0,
    size_bytes INTEGER NOT NULL DEFAULT 0,
    UNIQUE (org_id, name)
);
CREATE INDEX buckets_org ON buckets(org_id, id);

CREATE TABLE blobs (
    id TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    refcount INTEGER NOT NULL,
    inline_data BLOB
) WITHOUT ROWID;

CREATE TABLE files (
    bucket_id TEXT NOT NULL,
    key TEXT NOT NULL,
    blob_id TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    content_type TEXT NOT NULL,
    uploaded_at TEXT NOT NULL,
    PRIMARY KEY (bucket_id, key)
) WITHOUT ROWID;
