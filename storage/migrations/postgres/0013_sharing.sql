-- Sharing a bucket beyond its organization: `cors` is NULL or its CORS rules as JSON
-- (storage/cors.py); `public` (0/1) lets anyone read its files; `cache_control` is sent
-- with its public downloads. A bucket that answers requests without credentials (public,
-- or with CORS rules, whose preflights carry none) holds its name across the server:
-- `shared_name` is its name then, NULL otherwise.
ALTER TABLE buckets ADD COLUMN cors TEXT;
ALTER TABLE buckets ADD COLUMN public INTEGER NOT NULL DEFAULT 0;
ALTER TABLE buckets ADD COLUMN cache_control TEXT;
ALTER TABLE buckets ADD COLUMN shared_name TEXT COLLATE "C";
CREATE UNIQUE INDEX buckets_shared_name ON buckets(shared_name);
