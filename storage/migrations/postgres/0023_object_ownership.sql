-- A bucket's object ownership (PutBucketOwnershipControls, x-amz-object-ownership on
-- CreateBucket): 'BucketOwnerEnforced' (ACLs disabled) or 'BucketOwnerPreferred', or NULL
-- for none set (ACLs apply, as before). The bucket's organization owns every object either way.
ALTER TABLE buckets ADD COLUMN object_ownership TEXT;
