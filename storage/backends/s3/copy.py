"""Server-side copies inside an S3 cluster: one CopyObject up to 5 GiB, a multipart copy
of 1 GiB parts past that (S3's limit for a single copy)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from storage import encryption
from storage.backends.protocol import Fence
from storage.models import FileRecord, StoredBlob
from storage.rules.etags import md5_of

COPY_PART = 1024**3
SINGLE_COPY_LIMIT = 5 * 1024**3

Abort = Callable[[str, str, str], Awaitable[None]]
"""Abort the multipart upload (location, key, upload id)."""


def replacing(fence: Fence | None) -> dict[str, str]:
    """The condition of a write (PutObject, CompleteMultipartUpload, CopyObject) at a key
    whose object must still be `fence`'s; none without a fence."""
    if fence is None:
        return {}
    return {"IfMatch": fence.etag} if fence.etag else {"IfNoneMatch": "*"}


async def copy_object(
    client: Any,
    source: dict[str, str],
    location: str,
    key: str,
    size: int,
    if_match: str | None,
    content_type: str,
    abort: Abort,
    condition: dict[str, str] | None = None,
) -> str:
    """Copy `source` ({"Bucket", "Key"}) to `key` in `location`; the new object's ETag. The
    source is read only while its ETag is still `if_match`, and the object at `key` is
    replaced only while `condition` holds (`replacing`: the copy's fence)."""
    condition = condition or {}
    if size <= SINGLE_COPY_LIMIT:
        response = await client.copy_object(
            Bucket=location, Key=key, CopySource=source, CopySourceIfMatch=if_match, **condition
        )
        etag: str = response["CopyObjectResult"]["ETag"]
        return etag
    created = await client.create_multipart_upload(
        Bucket=location, Key=key, ContentType=content_type
    )
    upload_id = created["UploadId"]
    parts = []
    try:
        for number, offset in enumerate(range(0, size, COPY_PART), start=1):
            last = min(offset + COPY_PART, size) - 1
            response = await client.upload_part_copy(
                Bucket=location,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource=source,
                CopySourceRange=f"bytes={offset}-{last}",
            )
            parts.append({"PartNumber": number, "ETag": response["CopyPartResult"]["ETag"]})
        done = await client.complete_multipart_upload(
            **condition,
            Bucket=location,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
        )
    except BaseException:
        await abort(location, key, upload_id)
        raise
    etag = done["ETag"]
    return etag


def copied(source: FileRecord, etag: str) -> StoredBlob:
    """The content a copy of `source` made, whose object has `etag`."""
    if source.encryption is not None:  # the cluster's ETag is the packages' MD5
        return StoredBlob(
            blob_id=f"s3:{uuid.uuid4().hex}",
            size=encryption.stored_size(source),
            sha256=source.sha256,
            backend_etag=etag,
            md5=source.md5,
            plain_size=source.size,
        )
    return StoredBlob(
        blob_id=f"s3:{uuid.uuid4().hex}",
        size=source.size,
        sha256=source.sha256,
        backend_etag=etag,
        md5=md5_of(etag),
    )
