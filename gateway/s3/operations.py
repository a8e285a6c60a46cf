"""Which S3 operation a request is, in one table, as S3 decides it: the method, whether a
bucket and a key are named, query flags, and a copy source. docs/s3.md lists the same
operations and the policy actions each needs (tests hold the two together)."""

from __future__ import annotations

from .bucket_operations import BUCKET_OPERATIONS
from .errors import not_implemented
from .object_operations import OBJECT_OPERATIONS
from .operation import S3Operation, Target
from .refusals import UNSUPPORTED_SUBRESOURCES

WHAT = {"service": "the service", "bucket": "a bucket", "object": "an object"}
OPERATIONS = BUCKET_OPERATIONS + OBJECT_OPERATIONS
"""Matched in order; the two halves match disjoint targets."""

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
        "encryption",
        "cors",
        "policy",
        "policyStatus",
        "acl",
        "attributes",
        "renameObject",
        "publicAccessBlock",
        "notification",
        "ownershipControls",
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
