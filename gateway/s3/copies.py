"""S3 copies: CopyObject, and the source of a copy (also UploadPartCopy's), read as the
requester may read it."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import unquote

from starlette.responses import Response

from storage.attributes import KEEP, copied
from storage.errors import DeleteMarker, FileNotFound
from storage.models import Bucket, FileRecord
from storage.rules.clock import iso_to_unix
from storage.rules.ids import is_version_id
from storage.sse_c import open_checksum

from . import xml
from .access import also, expect_owner, resolve
from .attributes import written
from .call import S3Call
from .customer_keys import SOURCE, answer_headers, customer_key, write_key
from .errors import S3Error
from .locking import write_lock
from .objects import asked_encryption, check_read_conditions, encryption_headers, write_condition
from .permissions import write_acl
from .tagging import copy_tags
from .touches import SOURCE_OWNER, one
from .versions import written_version


def parse_copy_source(value: str) -> tuple[str, str, str | None]:
    """(bucket, key, version) of x-amz-copy-source: `bucket/key` or `/bucket/key`,
    URL-encoded, optionally `?versionId=` (version "null": the null version)."""
    source, _, version = value.partition("?versionId=")
    bucket, _, key = unquote(source).lstrip("/").partition("/")
    if not bucket or not key:
        raise S3Error(
            "InvalidArgument",
            "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
        )
    if version and not is_version_id(version):
        raise S3Error("InvalidArgument", "Invalid version id specified")
    return bucket, key, version or None


async def copy_source(call: S3Call) -> tuple[FileRecord, bool, Bucket]:
    """The source of a copy, read as the requester may read it (s3:GetObject, or
    s3:GetObjectVersion where a version is named, on the source's own bucket and key), its
    x-amz-copy-source-if-* conditions checked, and whether the request named its version."""
    name, key, version = parse_copy_source(one(call, "copy-source") or "")
    bucket = await resolve(call, name)
    expect_owner(bucket, call.request.headers.get(SOURCE_OWNER))
    version_id = None if version in (None, "null") else version
    actor = await also(call, "s3:GetObject", key, bucket, version is not None, version_id)
    try:
        if version is None:
            record = await call.engine.files.get(actor, bucket.id, key)
        else:
            record = await call.engine.files.get_version(actor, bucket.id, key, version_id)
    except DeleteMarker as exc:
        if exc.specific:
            raise S3Error(
                "InvalidRequest", "The source of a copy may not be a delete marker"
            ) from None
        raise S3Error("NoSuchKey", "The specified key does not exist.", 404) from None
    except FileNotFound:
        raise S3Error("NoSuchKey", "The specified key does not exist.", 404) from None
    etag = await call.engine.files.s3_etag(record)
    if (
        check_read_conditions(
            call.request.headers, etag, iso_to_unix(record.uploaded_at), "x-amz-copy-source-"
        )
        is not None
    ):
        raise S3Error(
            "PreconditionFailed",
            "At least one of the pre-conditions you specified did not hold",
            412,
        )
    return record, version is not None, bucket


def source_version(source: FileRecord, named: bool) -> dict[str, str]:
    """`x-amz-copy-source-version-id`, when the source is a version S3 would name."""
    if named or source.version_id is not None:
        return {"x-amz-copy-source-version-id": source.s3_version_id}
    return {}


async def copy_object(call: S3Call) -> Response:
    assert call.key is not None
    headers = call.request.headers
    source, named, source_bucket = await copy_source(call)
    bucket_id = await call.bucket_id()
    directive = headers.get("x-amz-metadata-directive", "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise S3Error("InvalidArgument", "Unknown metadata directive.")
    same = source.bucket_id == bucket_id and source.key == call.key
    encrypt = asked_encryption(headers)
    given = write_key(headers)
    source_key = customer_key(headers, SOURCE)
    call.engine.files.sealed.check(source, None if source_key is None else source_key.key)
    if directive == "COPY" and same and not named and encrypt is None and given is None:
        raise S3Error(
            "InvalidRequest",
            "This copy request is illegal because it is trying to copy an object to itself "
            "without changing the object's metadata.",
        )
    asked = await written(call, headers, None) if directive == "REPLACE" else None
    tags = await copy_tags(call, source, named, source_bucket)
    attrs = copied(
        source,
        asked,
        KEEP if tags is None else tags,
        await write_acl(call),
        await write_lock(call),
    )
    if source_key is not None:  # the copy seals it again, under its own key if SSE-C
        attrs = replace(attrs, checksum=open_checksum(attrs.checksum, source_key.key))
    try:
        record = await call.engine.files.copy(
            call.actor,
            source,
            bucket_id,
            call.key,
            attrs,
            write_condition(headers),
            encrypt,
            None if source_key is None else source_key.key,
            None if given is None else given.key,
        )
    except FileNotFound:
        raise S3Error("NoSuchKey", "The specified key does not exist.", 404) from None
    etag = await call.engine.files.s3_etag(record)
    answer = written_version(record) | source_version(source, named)
    answer |= encryption_headers(record) | answer_headers(record, given)
    return xml.response(
        "CopyObjectResult",
        [("LastModified", xml.timestamp(record.uploaded_at)), ("ETag", etag)],
        headers=answer,
    )
