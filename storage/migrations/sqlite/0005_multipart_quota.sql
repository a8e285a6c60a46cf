-- Multipart parts count against the organization's storage quota while the upload is in
-- flight: `part_bytes` is the sum of the sizes of its uploads' parts, changed in the same
-- transaction as the parts (and dropped when the upload completes, is aborted or expires).
ALTER TABLE organizations ADD COLUMN part_bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX multipart_uploads_created ON multipart_uploads(created_at);
