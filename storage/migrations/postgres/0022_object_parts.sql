-- A multipart object's parts (issue 38): the upload that made the version, its parts' sizes
-- and, where the upload had checksums, each part's, as JSON (`rules/part_layout.py`), or
-- NULL for content written in one piece. GetObject and HeadObject with `partNumber` serve
-- one part's bytes from it, GetObjectAttributes lists the parts, and a repeated
-- CompleteMultipartUpload of the upload is answered from the version it made.
ALTER TABLE files ADD COLUMN parts TEXT;
ALTER TABLE versions ADD COLUMN parts TEXT;
ALTER TABLE snapshot_versions ADD COLUMN parts TEXT;
