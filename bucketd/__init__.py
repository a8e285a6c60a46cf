"""bucketd: self-hosted object storage. `bucketd.testing` starts a real server for tests."""
