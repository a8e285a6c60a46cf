"""Which S3 operation a request is, in one table, as S3 decides it: the method, whether a
bucket and a key are named, query flags, and a copy source. docs/s3.md lists the same
operations (a test holds the two together)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import (
    buckets,
    cors,
    lifecycle,
    locking,
    multipart,
    notifications,
    objects,
    permissions,
    post,
    tagging,
    versions,
)
from .call import Handler, Prepare
from .errors import not_implemented
from .refusals import UNSUPPORTED_SUBRESOURCES

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
    prepare: Prepare | None = None
    """Runs before the request is authorized: reads credentials the request carries in its
    body (a POST form's signed policy)."""
    action: str
    """What a bucket policy calls it (`s3:GetObject`; the decision names the version form,
    `s3:GetObjectVersion`, where a `versionId` names a version)."""
    touches: frozenset[str] = frozenset()
    """The second resources it reads, each decided as read (`touches.py`)."""
    per_key: bool = False
    """Decided key by key (DeleteObjects): a refusal of one key is that key's error."""

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
    action: str = "",
    prepare: Prepare | None = None,
    touches: str = "",
    per_key: bool = False,
) -> S3Operation:
    return S3Operation(
        prepare=prepare,
        touches=frozenset(touches.split()),
        per_key=per_key,
        action=action or "s3:" + names.split("/")[0],
        names=tuple(names.split("/")),
        method=method,
        target=target,
        handler=handler,
        scope=scope,
        flags=flags,
        copy=copy,
    )


OPERATIONS = (
    _op(
        "ListBuckets",
        "GET",
        "service",
        buckets.list_buckets,
        "buckets:read",
        action="s3:ListAllMyBuckets",
    ),
    _op(
        "ListBuckets",
        "HEAD",
        "service",
        buckets.list_buckets,
        "buckets:read",
        action="s3:ListAllMyBuckets",
    ),
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
        action="s3:GetBucketObjectLockConfiguration",
    ),
    _op(
        "PutObjectLockConfiguration",
        "PUT",
        "bucket",
        locking.put_configuration,
        "buckets:write",
        "object-lock",
        action="s3:PutBucketObjectLockConfiguration",
    ),
    _op(
        "GetBucketLifecycleConfiguration/GetBucketLifecycle",
        "GET",
        "bucket",
        lifecycle.get_configuration,
        "buckets:read",
        "lifecycle",
        action="s3:GetLifecycleConfiguration",
    ),
    _op(
        "PutBucketLifecycleConfiguration/PutBucketLifecycle",
        "PUT",
        "bucket",
        lifecycle.put_configuration,
        "buckets:write",
        "lifecycle",
        action="s3:PutLifecycleConfiguration",
    ),
    _op(
        "DeleteBucketLifecycle",
        "DELETE",
        "bucket",
        lifecycle.delete_configuration,
        "buckets:write",
        "lifecycle",
        action="s3:PutLifecycleConfiguration",
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
        action="s3:PutBucketTagging",
    ),
    _op(
        "GetBucketCors",
        "GET",
        "bucket",
        cors.get_cors,
        "buckets:read",
        "cors",
        action="s3:GetBucketCORS",
    ),
    _op(
        "PutBucketCors",
        "PUT",
        "bucket",
        cors.put_cors,
        "buckets:write",
        "cors",
        action="s3:PutBucketCORS",
    ),
    _op(
        "DeleteBucketCors",
        "DELETE",
        "bucket",
        cors.delete_cors,
        "buckets:write",
        "cors",
        action="s3:PutBucketCORS",
    ),
    _op("GetBucketPolicy", "GET", "bucket", permissions.get_policy, "buckets:read", "policy"),
    _op("PutBucketPolicy", "PUT", "bucket", permissions.put_policy, "buckets:write", "policy"),
    _op(
        "DeleteBucketPolicy",
        "DELETE",
        "bucket",
        permissions.delete_policy,
        "buckets:write",
        "policy",
    ),
    _op(
        "GetBucketPolicyStatus",
        "GET",
        "bucket",
        permissions.get_policy_status,
        "buckets:read",
        "policyStatus",
    ),
    _op(
        "GetBucketNotificationConfiguration",
        "GET",
        "bucket",
        notifications.get_notifications,
        "buckets:read",
        "notification",
        action="s3:GetBucketNotification",
    ),
    _op(
        "PutBucketNotificationConfiguration",
        "PUT",
        "bucket",
        notifications.put_notifications,
        "buckets:write",
        "notification",
        action="s3:PutBucketNotification",
    ),
    _op("GetBucketAcl", "GET", "bucket", permissions.get_bucket_acl, "buckets:read", "acl"),
    _op(
        "PutBucketAcl",
        "PUT",
        "bucket",
        permissions.put_bucket_acl,
        "buckets:write",
        "acl",
        touches="acl",
    ),
    _op(
        "GetPublicAccessBlock",
        "GET",
        "bucket",
        permissions.get_access_block,
        "buckets:read",
        "publicAccessBlock",
        action="s3:GetBucketPublicAccessBlock",
    ),
    _op(
        "PutPublicAccessBlock",
        "PUT",
        "bucket",
        permissions.put_access_block,
        "buckets:write",
        "publicAccessBlock",
        action="s3:PutBucketPublicAccessBlock",
    ),
    _op(
        "DeletePublicAccessBlock",
        "DELETE",
        "bucket",
        permissions.delete_access_block,
        "buckets:write",
        "publicAccessBlock",
        action="s3:PutBucketPublicAccessBlock",
    ),
    _op(
        "ListObjectVersions",
        "GET",
        "bucket",
        versions.list_versions,
        "files:read",
        "versions",
        action="s3:ListBucketVersions",
    ),
    _op(
        "ListMultipartUploads",
        "GET",
        "bucket",
        multipart.list_uploads,
        "files:read",
        "uploads",
        action="s3:ListBucketMultipartUploads",
    ),
    _op(
        "ListObjects/ListObjectsV2",
        "GET",
        "bucket",
        buckets.list_objects,
        "files:read",
        action="s3:ListBucket",
    ),
    _op(
        "DeleteObjects",
        "POST",
        "bucket",
        objects.delete_objects,
        "files:write",
        "delete",
        action="s3:DeleteObject",
        touches="keys bypass",
        per_key=True,
    ),
    _op("CreateBucket", "PUT", "bucket", buckets.create_bucket, "buckets:write", touches="acl"),
    _op(
        "PostObject",
        "POST",
        "bucket",
        post.post_object,
        "files:write",
        action="s3:PutObject",
        prepare=post.read_form,
        touches="acl lock tagging",
    ),
    _op(
        "HeadBucket", "HEAD", "bucket", buckets.head_bucket, "buckets:read", action="s3:ListBucket"
    ),
    _op("DeleteBucket", "DELETE", "bucket", buckets.delete_bucket, "buckets:write"),
    _op(
        "UploadPartCopy",
        "PUT",
        "object",
        multipart.upload_part_copy,
        "files:write",
        "uploadId",
        copy=True,
        action="s3:PutObject",
        touches="copy-source",
    ),
    _op(
        "UploadPart",
        "PUT",
        "object",
        multipart.upload_part,
        "files:write",
        "uploadId",
        action="s3:PutObject",
    ),
    _op(
        "CompleteMultipartUpload",
        "POST",
        "object",
        multipart.complete,
        "files:write",
        "uploadId",
        action="s3:PutObject",
    ),
    _op("AbortMultipartUpload", "DELETE", "object", multipart.abort, "files:write", "uploadId"),
    _op(
        "ListParts",
        "GET",
        "object",
        multipart.list_parts,
        "files:read",
        "uploadId",
        action="s3:ListMultipartUploadParts",
    ),
    _op(
        "CreateMultipartUpload",
        "POST",
        "object",
        multipart.create,
        "files:write",
        "uploads",
        action="s3:PutObject",
        touches="acl lock tagging",
    ),
    _op(
        "CopyObject",
        "PUT",
        "object",
        objects.copy_object,
        "files:write",
        copy=True,
        action="s3:PutObject",
        touches="copy-source acl lock tagging",
    ),
    _op(
        "PutObject",
        "PUT",
        "object",
        objects.put_object,
        "files:write",
        touches="acl lock tagging",
    ),
    _op(
        "GetObjectRetention",
        "GET",
        "object",
        locking.get_retention,
        "files:read",
        "retention",
        touches="version",
    ),
    _op(
        "PutObjectRetention",
        "PUT",
        "object",
        locking.put_retention,
        "files:write",
        "retention",
        touches="version bypass",
    ),
    _op(
        "GetObjectLegalHold",
        "GET",
        "object",
        locking.get_legal_hold,
        "files:read",
        "legal-hold",
        touches="version",
    ),
    _op(
        "PutObjectLegalHold",
        "PUT",
        "object",
        locking.put_legal_hold,
        "files:write",
        "legal-hold",
        touches="version",
    ),
    _op(
        "GetObjectAcl",
        "GET",
        "object",
        permissions.get_object_acl,
        "files:read",
        "acl",
        touches="version",
    ),
    _op(
        "PutObjectAcl",
        "PUT",
        "object",
        permissions.put_object_acl,
        "files:write",
        "acl",
        touches="version acl",
    ),
    _op(
        "GetObjectTagging",
        "GET",
        "object",
        tagging.get_object_tagging,
        "files:read",
        "tagging",
        touches="version",
    ),
    _op(
        "PutObjectTagging",
        "PUT",
        "object",
        tagging.put_object_tagging,
        "files:write",
        "tagging",
        touches="version",
    ),
    _op(
        "DeleteObjectTagging",
        "DELETE",
        "object",
        tagging.delete_object_tagging,
        "files:write",
        "tagging",
        touches="version",
    ),
    _op("GetObject", "GET", "object", objects.get_object, "files:read", touches="version"),
    _op(
        "HeadObject",
        "HEAD",
        "object",
        objects.get_object,
        "files:read",
        action="s3:GetObject",
        touches="version",
    ),
    _op(
        "DeleteObject",
        "DELETE",
        "object",
        objects.delete_object,
        "files:write",
        touches="version bypass",
    ),
)

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
        "policy",
        "policyStatus",
        "acl",
        "publicAccessBlock",
        "notification",
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
