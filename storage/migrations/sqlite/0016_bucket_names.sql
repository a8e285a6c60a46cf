-- A bucket's name, once it served requests from outside its organization, stays reserved
-- to it across the server (`shared_name`) until the bucket is deleted or renamed: no longer
-- released when it stops sharing, and no longer "the only bucket of that name" for a
-- bucket that shares nothing. Reserve it now for every bucket that shares something (CORS
-- rules, public, a policy, an ACL beyond private) or holds a file, version or multipart
-- upload with a public ACL, unless another bucket holds the name; between such buckets of
-- one name, the oldest (then the smallest id) wins. The others keep their names in their
-- organizations, and reach outsiders no more (as when their name was ambiguous).
WITH candidates AS (
    SELECT b.id, b.name, b.created_at FROM buckets b
    WHERE b.shared_name IS NOT NULL OR b.cors IS NOT NULL OR b.public <> 0
        OR b.policy IS NOT NULL OR b.acl IS NOT NULL
        OR EXISTS (SELECT 1 FROM files f WHERE f.bucket_id = b.id
            AND f.acl IN ('public-read', 'public-read-write', 'authenticated-read'))
        OR EXISTS (SELECT 1 FROM versions v WHERE v.bucket_id = b.id
            AND v.acl IN ('public-read', 'public-read-write', 'authenticated-read'))
        OR EXISTS (SELECT 1 FROM multipart_uploads u WHERE u.bucket_id = b.id
            AND u.acl IN ('public-read', 'public-read-write', 'authenticated-read'))
)
UPDATE buckets SET shared_name = name
WHERE shared_name IS NULL
    AND id IN (SELECT c.id FROM candidates c)
    AND NOT EXISTS (SELECT 1 FROM buckets held WHERE held.shared_name = buckets.name)
    AND NOT EXISTS (
        SELECT 1 FROM candidates older
        WHERE older.name = buckets.name AND older.id <> buckets.id
            AND (older.created_at < buckets.created_at
                OR (older.created_at = buckets.created_at AND older.id < buckets.id))
    );
