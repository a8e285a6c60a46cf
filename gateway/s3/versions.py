"""S3 versioning: Get/PutBucketVersioning, ListObjectVersions, and what the object
operations need to speak of versions (the versionId parameter, the version headers)."""

from __future__ import annotations

from starlette.responses import Response

from storage.models import Bucket, FileRecord
from storage.rules.ids import is_version_id

from . import xml
from .buckets import etag_for_listing, max_keys
from .call import S3Call
from .errors import S3Error
from .touches import one


def requested_version(call: S3Call) -> tuple[bool, str | None]:
    """(whether the request names a version, which: None for the null version)."""
    raw = one(call, "version")
    if raw is None:
        return False, None
    if raw == "null":
        return True, None
    if not is_version_id(raw):
        raise S3Error("InvalidArgument", "Invalid version id specified")
    return True, raw


async def requested_record(call: S3Call) -> FileRecord:
    """The version of the request's key that `versionId` names, else the current one."""
    assert call.key is not None
    named, version_id = requested_version(call)
    bucket_id = await call.bucket_id()
    files = call.engine.files
    if named:
        return await files.get_version(call.actor, bucket_id, call.key, version_id)
    return await files.get(call.actor, bucket_id, call.key)


def version_headers(bucket: Bucket, record: FileRecord) -> dict[str, str]:
    """`x-amz-version-id` (and `x-amz-delete-marker`) of a bucket that has been versioned."""
    if bucket.versioning is None:
        return {}
    headers = {"x-amz-version-id": record.s3_version_id}
    if record.delete_marker:
        headers["x-amz-delete-marker"] = "true"
    return headers


def written_version(record: FileRecord) -> dict[str, str]:
    """`x-amz-version-id` of a PutObject, CopyObject or CompleteMultipartUpload: the id the
    write made, none for the null version (a bucket never versioned, or Suspended: AWS's
    sample answers there carry no header, though reads of that version say `null`)."""
    version = record.s3_version_id
    return {} if version == "null" else {"x-amz-version-id": version}


async def get_versioning(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    status = [("Status", bucket.versioning)] if bucket.versioning else []
    return xml.response("VersioningConfiguration", status)


async def put_versioning(call: S3Call) -> Response:
    root = await call.read_xml()
    status = xml.text(root, "Status")
    if status not in ("Enabled", "Suspended"):
        raise S3Error("MalformedXML", "Status must be Enabled or Suspended")
    bucket = await call.target_bucket()
    await call.engine.buckets.set_versioning(call.actor, bucket.id, status)
    return Response(b"", 200)


async def list_versions(call: S3Call) -> Response:
    prefix = call.params.get("prefix", "")
    delimiter = call.params.get("delimiter", "")
    encoding = call.params.get("encoding-type")
    out = call.key_encoder()
    key_marker = call.params.get("key-marker", "")
    version_marker = call.params.get("version-id-marker", "")
    if version_marker and not key_marker:
        raise S3Error(
            "InvalidArgument", "A version-id marker cannot be specified without a key marker."
        )
    limit = max_keys(call)
    bucket = await call.target_bucket()
    page = await call.engine.files.list_versions(
        *(call.actor, bucket.id, prefix, delimiter, key_marker, version_marker, limit),
        as_of=call.listed_as_of(),
    )
    owner = call.owner

    entries: list[xml.Node] = []
    for record, latest in page.versions:
        common: list[xml.Node] = [
            ("Key", out(record.key)),
            ("VersionId", record.s3_version_id),
            ("IsLatest", latest),
            ("LastModified", xml.timestamp(record.uploaded_at)),
        ]
        if record.delete_marker:
            entries.append(("DeleteMarker", [*common, ("Owner", owner)]))
            continue
        entries.append(
            (
                "Version",
                [
                    *common,
                    ("ETag", etag_for_listing(record)),
                    ("Size", record.size),
                    ("StorageClass", "STANDARD"),
                    ("Owner", owner),
                ],
            )
        )
    head: list[xml.Node] = [
        ("Name", call.bucket),
        ("Prefix", out(prefix)),
        ("KeyMarker", out(key_marker)),
        ("VersionIdMarker", version_marker),
        ("NextKeyMarker", out(page.next_key) if page.next_key is not None else None),
        ("NextVersionIdMarker", page.next_version),
        ("MaxKeys", limit),
        ("Delimiter", out(delimiter) if delimiter else None),
        ("EncodingType", encoding),
        ("IsTruncated", page.truncated),
    ]
    common_prefixes = [("CommonPrefixes", [("Prefix", out(p))]) for p in page.prefixes]
    return xml.response("ListVersionsResult", head + entries + common_prefixes)
