-- SSE-S3 multipart uploads (issue 37): the encryption the upload's object gets ('AES256' or
-- NULL), and for each part of such an upload its own envelope (a content key wrapped under
-- the master key, as a version's) and the MD5 of its sealed bytes, which name it in the part
-- store; the part's `md5` stays its plaintext's, the ETag S3 clients compare.
ALTER TABLE multipart_uploads ADD COLUMN encryption TEXT;
ALTER TABLE multipart_parts ADD COLUMN encryption TEXT;
ALTER TABLE multipart_parts ADD COLUMN stored_md5 TEXT;
-- A bucket's default encryption (PutBucketEncryption, /v1's `encryption`): 'AES256', or NULL
-- for none; every write into the bucket that asks for none gets it.
ALTER TABLE buckets ADD COLUMN encryption TEXT;
