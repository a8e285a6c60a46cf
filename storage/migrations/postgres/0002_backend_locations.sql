-- Backends that are not content-addressed (S3): where a bucket lives, the backend's own
-- version tag of each file, and reservations of uploads between "stored in the backend"
-- and "committed to the index" (quota held; healed at start-up after a crash).
ALTER TABLE buckets ADD COLUMN location TEXT;
ALTER TABLE files ADD COLUMN backend_etag TEXT;

CREATE TABLE reservations (
    token TEXT COLLATE "C" PRIMARY KEY,
    bucket_id TEXT COLLATE "C" NOT NULL,
    org_id TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    content_type TEXT NOT NULL,
    backend_etag TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX reservations_org ON reservations(org_id);
