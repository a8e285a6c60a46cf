-- A write published to the S3 backend and not yet committed lives while its gateway renews
-- lease_until (storage/backends/s3/settle.py); once that has passed, any gateway settles it
-- as heal does, at once instead of after the upload deadline. commit_with: what the write
-- commits beside its content (attributes, event, the multipart upload it completes, as
-- JSON: storage/index/reservations.py), so that a write settled by another gateway is the
-- one its client sent, metadata and all. NULL in both for a reservation made before.
ALTER TABLE reservations ADD COLUMN lease_until DOUBLE PRECISION;
ALTER TABLE reservations ADD COLUMN commit_with TEXT;
CREATE INDEX reservations_key ON reservations(bucket_id, key);
