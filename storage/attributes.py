"""What an object version carries beside its content, as one value: built once per
protocol from a request (`gateway/s3/attributes.py`, `gateway/api/files.py`), carried whole
through the services and commit strategies, and mapped to columns once
(`index/rows.py`). A new attribute is a field here, its columns (a migration per
dialect), and its protocol mappings; the copy rule below takes it along.

Garage keeps the same list in `ObjectVersionMetaInner`, MinIO in
`ObjectOptions.UserDefined`, versitygw behind `MetadataStorer`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from storage.rules.object_lock import Lock, decode_lock

from .models import FileRecord, MultipartUpload


@dataclass(frozen=True)
class Attributes:
    content_type: str
    """The media type, normalised by the upload checks."""
    metadata: str | None = None
    """User metadata (x-amz-meta-*) as a JSON object, or None."""
    headers: str | None = None
    """Headers returned with the content (Cache-Control, Expires, Content-Disposition,
    Content-Encoding, Content-Language), as a JSON object, or None."""
    tags: str | None = None
    """Tags as a JSON object (`tags.py`), or None."""
    acl: str | None = None
    """The canned ACL beyond `private` (`acl.py`), or None."""
    lock: Lock | None = None
    """Retention and legal hold asked for (None: the bucket's default retention)."""
    checksum: str | None = None
    """The checksum stored with the content, as JSON (`checksums.Checksum`); a streamed
    write verifies its own and sets it at the commit (`WriteOptions.checksum`)."""
    encryption: str | None = None
    """How the content is encrypted at rest (`encryption.Envelope`, encoded), or None. It
    goes with the content: set where a write seals its stream (`Files.put`), kept by a
    copy that shares the stored content."""
    parts: str | None = None
    """The parts of a multipart upload's object (`part_layout.PartLayout`, encoded), or
    None. It goes with the content and its `md5` (the `-N` ETag), as `encryption` does."""


def of_version(record: FileRecord) -> Attributes:
    """What a stored version carries (its lock aside: a lock is never carried over)."""
    return Attributes(
        content_type=record.content_type,
        metadata=record.metadata,
        headers=record.headers,
        tags=record.tags,
        acl=record.acl,
        checksum=record.checksum,
        encryption=record.encryption,
        parts=record.parts,
    )


def of_upload(upload: MultipartUpload) -> Attributes:
    """What a multipart upload's object gets on completion (its checksum is the parts')."""
    return Attributes(
        content_type=upload.content_type,
        metadata=upload.metadata,
        headers=upload.headers,
        tags=upload.tags,
        acl=upload.acl,
        lock=decode_lock(upload.lock),
    )


KEEP = object()
"""For `copied`: keep the source's tags."""


def copied(
    source: FileRecord,
    replacing: Attributes | None = None,
    tags: str | object | None = KEEP,
    acl: str | None = None,
    lock: Lock | None = None,
) -> Attributes:
    """A copy's attributes, the rule written once: the source's content type, metadata,
    stored headers and checksum (S3's COPY directive), or `replacing`'s (REPLACE, the
    checksum still the content's); the source's tags unless `tags` replaces them (None or
    "": none); never the source's ACL or lock, only the ones the copy asks for."""
    kept = of_version(source)
    if replacing is not None:
        kept = replace(
            kept,
            content_type=replacing.content_type,
            metadata=replacing.metadata,
            headers=replacing.headers,
        )
    chosen = kept.tags if tags is KEEP else tags
    assert chosen is None or isinstance(chosen, str)
    return replace(kept, tags=chosen or None, acl=acl, lock=lock)
