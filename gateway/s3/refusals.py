"""What the S3 endpoint refuses with 501 `NotImplemented`, never accepting and ignoring it:
the query flags of operations bucketd does not implement, and request headers asking for
what it does not do. docs/s3.md lists the same (a test holds the two together)."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import not_implemented

UNSUPPORTED_SUBRESOURCES = (
    "website",
    "logging",
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
    "intelligent-tiering",
    "attributes",
    "abac",
    "annotation",
    "metadataConfiguration",
    "metadataTable",
    "metadataAnnotationTable",
    "metadataInventoryTable",
    "metadataJournalTable",
    "renameObject",
    "session",
    "events",
)
"""Query flags of operations bucketd does not implement: refused with 501, whatever the
method, so a request never silently does something else (a listing, say). Every flag of
botocore's S3 model is here or served (tests/test_s3_operations.py walks the model);
`events` is MinIO's listen API, which minio-py's `listen_bucket_notification` sends."""


REFUSED_HEADERS = (
    "x-amz-grant-read",
    "x-amz-grant-write",
    "x-amz-grant-read-acp",
    "x-amz-grant-write-acp",
    "x-amz-grant-full-control",
)
"""Request headers asking for what bucketd does not do (grants beyond a canned ACL): refused
with 501 on every operation that takes them, never accepted and ignored."""
_WRITES = frozenset(
    {"PutObject", "CopyObject", "CreateMultipartUpload", "CreateBucket", "UploadPart"}
)


REFUSED_ANYWHERE = (
    "x-amz-server-side-encryption-customer-algorithm",
    "x-amz-server-side-encryption-customer-key",
    "x-amz-server-side-encryption-customer-key-md5",
    "x-amz-copy-source-server-side-encryption-customer-algorithm",
    "x-amz-copy-source-server-side-encryption-customer-key",
    "x-amz-copy-source-server-side-encryption-customer-key-md5",
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-server-side-encryption-context",
    "x-amz-server-side-encryption-bucket-key-enabled",
    "x-amz-write-offset-bytes",
)
"""Headers asking for encryption bucketd does not do (SSE-C, SSE-KMS: issue 37 builds
them) or for an append: refused with 501 on every operation, so nothing is stored in plain
text that its writer meant encrypted, no read answers as if a customer key held, and no
append overwrites."""
SSE = "x-amz-server-side-encryption"
SSE_BY_DESIGN = "AES256"
"""`x-amz-server-side-encryption: AES256` is accepted and ignored by design (docs/s3.md):
many clients send it; any other value (aws:kms, aws:kms:dsse) is refused."""


def refuse_unsupported_headers(operation: str, headers: Mapping[str, str]) -> None:
    """Refuse a request (`operation`, its name) that asks for what bucketd does not do."""
    for name in REFUSED_ANYWHERE:
        if name in headers:
            raise not_implemented(f"the {name} header")
    sse = headers.get(SSE)
    if sse is not None and sse.strip() != SSE_BY_DESIGN:
        raise not_implemented(f"{SSE}: {sse.strip()[:40]!r} (only AES256 is taken)")
    if operation not in _WRITES:
        return
    for name in REFUSED_HEADERS:
        value = headers.get(name)
        if value is not None:
            raise not_implemented(f"the {name} header ({value.strip()[:60]!r})")
