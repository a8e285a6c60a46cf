"""Which S3 operation a request is, in one table, as S3 decides it: the method, whether a
bucket and a key are named, query flags, and a copy source. docs/s3.md lists the same
operations (a test holds the two together)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from . import buckets, cors, lifecycle, locking, multipart, objects, tagging, versions
from .call import Handler
from .errors import not_implemented

Target = Literal["service", "bucket", "object"]
WHAT = {"service": "the service", "bucket": "a bucket", "object": "an object"}


@dataclass(frozen=True, kw_only=True)
class S3Operation:
    names: tuple[str, ...]
    """The operation's name in AWS's API reference (two for a handler that serves both)."""
    method: str
    target: Target
    handler: Handler
    scope: str
    flags: tuple[str, ...] = ()
    """Query parameters that must be present."""
    copy: bool = False
    """Only with `x-amz-copy-source` (otherwise only without it, where a copy twin exists)."""

    @property
    def name(self) -> str:
        return self.names[0]


def _op(
    names: str,
    method: str,
    target: Target,
    handler: Handler,
    scope: str,
    *flags: str,
    copy: bool = False,
) -> S3Operation:
    return S3Operation(
        names=tuple(names.split("/")),
        method=method,
        target=target,
        handler=handler,
        scope=scope,
        flags=flags,
        copy=copy,
    )


OPERATIONS = (
    _op("ListBuckets", "GET", "service", buckets.list_buckets, "buckets:read"),
    _op("ListBuckets", "HEAD", "service", buckets.list_buckets, "buckets:read"),
    _op("GetBucketLocation", "GET", "bucket", buckets.get_location, "buckets:read", "location"),
    _op(
        "GetBucketVersioning",
        "GET",
        "bucket",
        versions.get_versioning,
        "buckets:read",
        "versioning",
    ),
    _op(
        "PutBucketVersioning",
        "PUT",
        "bucket",
        versions.put_versioning,
        "buckets:write",
        "versioning",
    ),
    _op(
        "GetObjectLockConfiguration",
        "GET",
        "bucket",
        locking.get_configuration,
        "buckets:read",
        "object-lock",
    ),
    _op(
        "PutObjectLockConfiguration",
        "PUT",
        "bucket",
        locking.put_configuration,
        "buckets:write",
        "object-lock",
    ),
    _op(
        "GetBucketLifecycleConfiguration/GetBucketLifecycle",
        "GET",
        "bucket",
        lifecycle.get_configuration,
        "buckets:read",
        "lifecycle",
    ),
    _op(
        "PutBucketLifecycleConfiguration/PutBucketLifecycle",
        "PUT",
        "bucket",
        lifecycle.put_configuration,
        "buckets:write",
        "lifecycle",
    ),
    _op(
        "DeleteBucketLifecycle",
        "DELETE",
        "bucket",
        lifecycle.delete_configuration,
        "buckets:write",
        "lifecycle",
    ),
    _op("GetBucketTagging", "GET", "bucket", tagging.get_bucket_tagging, "buckets:read", "tagging"),
    _op(
        "PutBucketTagging", "PUT", "bucket", tagging.put_bucket_tagging, "buckets:write", "tagging"
    ),
    _op(
        "DeleteBucketTagging",
        "DELETE",
        "bucket",
        tagging.delete_bucket_tagging,
        "buckets:write",
        "tagging",
    ),
    _op("GetBucketCors", "GET", "bucket", cors.get_cors, "buckets:read", "cors"),
    _op("PutBucketCors", "PUT", "bucket", cors.put_cors, "buckets:write", "cors"),
    _op("DeleteBucketCors", "DELETE", "bucket", cors.delete_cors, "buckets:write", "cors"),
    _op("ListObjectVersions", "GET", "bucket", versions.list_versions, "files:read", "versions"),
    _op("ListMultipartUploads", "GET", "bucket", multipart.list_uploads, "files:read", "uploads"),
    _op("ListObjects/ListObjectsV2", "GET", "bucket", buckets.list_objects, "files:read"),
    _op("DeleteObjects", "POST", "bucket", objects.delete_objects, "files:write", "delete"),
    _op("CreateBucket", "PUT", "bucket", buckets.create_bucket, "buckets:write"),
    _op("HeadBucket", "HEAD", "bucket", buckets.head_bucket, "buckets:read"),
    _op("DeleteBucket", "DELETE", "bucket", buckets.delete_bucket, "buckets:write"),
    _op(
        "UploadPartCopy",
        "PUT",
        "object",
        multipart.upload_part_copy,
        "files:write",
        "uploadId",
        copy=True,
    ),
    _op("UploadPart", "PUT", "object", multipart.upload_part, "files:write", "uploadId"),
    _op("CompleteMultipartUpload", "POST", "object", multipart.complete, "files:write", "uploadId"),
    _op("AbortMultipartUpload", "DELETE", "object", multipart.abort, "files:write", "uploadId"),
    _op("ListParts", "GET", "object", multipart.list_parts, "files:read", "uploadId"),
    _op("CreateMultipartUpload", "POST", "object", multipart.create, "files:write", "uploads"),
    _op("CopyObject", "PUT", "object", objects.copy_object, "files:write", copy=True),
    _op("PutObject", "PUT", "object", objects.put_object, "files:write"),
    _op("GetObjectRetention", "GET", "object", locking.get_retention, "files:read", "retention"),
    _op("PutObjectRetention", "PUT", "object", locking.put_retention, "files:write", "retention"),
    _op("GetObjectLegalHold", "GET", "object", locking.get_legal_hold, "files:read", "legal-hold"),
    _op("PutObjectLegalHold", "PUT", "object", locking.put_legal_hold, "files:write", "legal-hold"),
    _op("GetObjectTagging", "GET", "object", tagging.get_object_tagging, "files:read", "tagging"),
    _op("PutObjectTagging", "PUT", "object", tagging.put_object_tagging, "files:write", "tagging"),
    _op(
        "DeleteObjectTagging",
        "DELETE",
        "object",
        tagging.delete_object_tagging,
        "files:write",
        "tagging",
    ),
    _op("GetObject", "GET", "object", objects.get_object, "files:read"),
    _op("HeadObject", "HEAD", "object", objects.get_object, "files:read"),
    _op("DeleteObject", "DELETE", "object", objects.delete_object, "files:write"),
)

UNSUPPORTED_SUBRESOURCES = (
    "acl",
    "policy",
    "website",
    "logging",
    "notification",
    "replication",
    "encryption",
    "torrent",
    "restore",
    "select",
    "accelerate",
    "requestPayment",
    "inventory",
    "metrics",
    "analytics",
    "ownershipControls",
    "publicAccessBlock",
    "intelligent-tiering",
    "attributes",
)
"""Query flags of operations bucketd does not implement: refused with 501, whatever the
method, so a request never silently does something else."""


REFUSED_HEADERS: dict[str, frozenset[str]] = {
    "x-amz-acl": frozenset({"private"}),
    "x-amz-grant-read": frozenset(),
    "x-amz-grant-write": frozenset(),
    "x-amz-grant-read-acp": frozenset(),
    "x-amz-grant-write-acp": frozenset(),
    "x-amz-grant-full-control": frozenset(),
}
"""Request headers asking for what bucketd does not do yet (ACLs), with the values that ask
for nothing more than bucketd does anyway (`x-amz-acl: private`). Any other value is refused
with 501 on every operation that takes it, never accepted and ignored."""
_WRITES = frozenset(
    {"PutObject", "CopyObject", "CreateMultipartUpload", "CreateBucket", "UploadPart"}
)


def refuse_unsupported_headers(operation: S3Operation, headers: Mapping[str, str]) -> None:
    if operation.name not in _WRITES:
        return
    for name, harmless in REFUSED_HEADERS.items():
        value = headers.get(name)
        if value is not None and value.strip().lower() not in harmless:
            raise not_implemented(f"the {name} header ({value.strip()[:60]!r})")


SUBRESOURCES = frozenset(
    {
        "location",
        "uploads",
        "uploadId",
        "delete",
        "versioning",
        "versions",
        "object-lock",
        "retention",
        "legal-hold",
        "lifecycle",
        "tagging",
        "cors",
    }
)
"""Query flags that name an operation: a request carrying one is only ever the operation
that declares it (a DELETE with `?versioning` is not DeleteBucket)."""


def operation_for(
    method: str, bucket: str | None, key: str | None, params: dict[str, str], copy: bool
) -> S3Operation:
    for name in UNSUPPORTED_SUBRESOURCES:
        if name in params:
            raise not_implemented(f"the ?{name} subresource")
    target: Target = "service" if bucket is None else "bucket" if key is None else "object"
    for operation in OPERATIONS:
        if (
            operation.method == method
            and operation.target == target
            and all(flag in params for flag in operation.flags)
            and SUBRESOURCES.intersection(params) <= set(operation.flags)
            and (copy or not operation.copy)
        ):
            return operation
    raise not_implemented(f"{method} on {WHAT[target]}")
