-- A version's tags (S3's object tagging, /v1's `tags`), as a JSON object of key to value;
-- NULL: none. A multipart upload keeps the tags its object will get.
ALTER TABLE files ADD COLUMN tags TEXT;
ALTER TABLE versions ADD COLUMN tags TEXT;
ALTER TABLE multipart_uploads ADD COLUMN tags TEXT;
