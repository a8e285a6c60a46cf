-- Encryption at rest (storage/encryption.py): a version's envelope (its algorithm, the
-- master key's id and its content key wrapped under that master key, as JSON), or NULL for
-- a content stored in plaintext. No query reads it, so one column holds it all; a master
-- key rotation rewrites these few bytes and never the content.
ALTER TABLE files ADD COLUMN encryption TEXT;
ALTER TABLE versions ADD COLUMN encryption TEXT;
ALTER TABLE snapshot_versions ADD COLUMN encryption TEXT;
-- A write published to the S3 backend and not yet committed: how its content is encrypted,
-- so that the heal after a crash commits it as encrypted (never its ciphertext as content).
ALTER TABLE reservations ADD COLUMN encryption TEXT;
