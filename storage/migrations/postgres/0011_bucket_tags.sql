-- A bucket's tags (S3's PutBucketTagging), as a JSON object of key to value; NULL: none.
ALTER TABLE buckets ADD COLUMN tags TEXT;
