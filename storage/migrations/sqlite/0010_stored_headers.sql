-- Headers stored with a file and returned on GET/HEAD (S3's Cache-Control, Expires,
-- Content-Disposition, Content-Encoding, Content-Language), as a JSON object of header
-- name to value; NULL: none. A multipart upload keeps them until it completes.
ALTER TABLE files ADD COLUMN headers TEXT;
ALTER TABLE versions ADD COLUMN headers TEXT;
ALTER TABLE multipart_uploads ADD COLUMN headers TEXT;
