-- Where the S3 backend keeps a version's content when not under its key: a versioned
-- bucket's named versions live apart (.bucketd-versions/<version id>/<key>), so writing a
-- new version never replaces an old one's object. NULL: under the key.
ALTER TABLE files ADD COLUMN object_key TEXT;
ALTER TABLE versions ADD COLUMN object_key TEXT;
ALTER TABLE reservations ADD COLUMN object_key TEXT;
