-- The rate of requests without a key, per client address, that a bucket's owner set
-- for it (`anonymousRequestsPerMinute`; 0: no limit); NULL: the server's
-- `ratelimit.anonymous_rpm`.
ALTER TABLE buckets ADD COLUMN anonymous_rpm INTEGER;
