-- The S3 endpoint: access keys with sealed secrets, S3 ETags (MD5), user metadata and
-- checksums of files, and multipart uploads with their parts.
ALTER TABLE api_keys ADD COLUMN access_key_id TEXT COLLATE "C";
ALTER TABLE api_keys ADD COLUMN secret_sealed BYTEA;
CREATE UNIQUE INDEX api_keys_access_key ON api_keys(access_key_id);

ALTER TABLE files ADD COLUMN md5 TEXT;
ALTER TABLE files ADD COLUMN metadata TEXT;
ALTER TABLE files ADD COLUMN checksum TEXT;

CREATE TABLE multipart_uploads (
    upload_id TEXT COLLATE "C" PRIMARY KEY,
    bucket_id TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    content_type TEXT NOT NULL,
    metadata TEXT,
    checksum_algorithm TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX multipart_uploads_bucket ON multipart_uploads(bucket_id, key, upload_id);

CREATE TABLE multipart_parts (
    upload_id TEXT COLLATE "C" NOT NULL,
    part_number INTEGER NOT NULL,
    size BIGINT NOT NULL,
    md5 TEXT NOT NULL,
    checksum TEXT,
    uploaded_at TEXT NOT NULL,
    PRIMARY KEY (upload_id, part_number)
);
