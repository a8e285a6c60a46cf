-- bucketd index, schema version 1 (PostgreSQL). Ids and keys compare byte by byte
-- (COLLATE "C"), as in SQLite, so listings and cursors agree across the two.
CREATE TABLE organizations (
    id TEXT COLLATE "C" PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    created_at TEXT NOT NULL,
    bucket_count BIGINT NOT NULL DEFAULT 0,
    stored_bytes BIGINT NOT NULL DEFAULT 0,
    file_count BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE api_keys (
    id TEXT COLLATE "C" PRIMARY KEY,
    org_id TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
    name TEXT NOT NULL,
    secret_hash BYTEA NOT NULL UNIQUE,
    last4 TEXT NOT NULL,
    scopes TEXT NOT NULL,
    bucket_id TEXT COLLATE "C",
    created_at TEXT NOT NULL,
    expires_at BIGINT,
    revoked_at TEXT
);
CREATE INDEX api_keys_org ON api_keys(org_id, id);

CREATE TABLE buckets (
    id TEXT COLLATE "C" PRIMARY KEY,
    org_id TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
    name TEXT COLLATE "C" NOT NULL,
    region TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    created_at TEXT NOT NULL,
    max_upload_bytes BIGINT,
    allowed_content_types TEXT,
    file_count BIGINT NOT NULL DEFAULT 0,
    size_bytes BIGINT NOT NULL DEFAULT 0,
    UNIQUE (org_id, name)
);
CREATE INDEX buckets_org ON buckets(org_id, id);

CREATE TABLE blobs (
    id TEXT COLLATE "C" PRIMARY KEY,
    size BIGINT NOT NULL,
    refcount BIGINT NOT NULL,
    inline_data BYTEA
);

CREATE TABLE files (
    bucket_id TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    blob_id TEXT COLLATE "C" NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    content_type TEXT NOT NULL,
    uploaded_at TEXT NOT NULL,
    PRIMARY KEY (bucket_id, key)
);
CREATE INDEX files_blob ON files(blob_id);
