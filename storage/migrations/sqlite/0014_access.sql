-- Who may do what beyond the bucket's organization: a bucket's `policy` (its JSON text, as
-- given: storage/policy.py), its canned `acl` and each version's (NULL: private;
-- storage/acl.py), and its public access block (JSON of S3's four switches; NULL: all off).
-- A request from outside the organization names a bucket by its name alone (buckets_name).
ALTER TABLE buckets ADD COLUMN policy TEXT;
ALTER TABLE buckets ADD COLUMN acl TEXT;
ALTER TABLE buckets ADD COLUMN public_access_block TEXT;
ALTER TABLE files ADD COLUMN acl TEXT;
ALTER TABLE versions ADD COLUMN acl TEXT;
ALTER TABLE multipart_uploads ADD COLUMN acl TEXT;
CREATE INDEX buckets_name ON buckets(name);
