"""The field types /v1's shapes are made of (`shapes.py`, `webhook_shapes.py`): JSON types
with the limits and patterns of the wire contract (`contract.py`), stated for the OpenAPI
document."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from .contract import (
    BUCKET_NAME_PATTERN,
    MAX_ALLOW_LIST,
    MAX_ANONYMOUS_RPM,
    MAX_CORS_RULES,
    MAX_KEY_BYTES,
    MAX_NAME_LENGTH,
    MAX_OBJECT_TAGS,
    MIME_PATTERN,
    MIME_TYPE_PATTERN,
    SCOPES,
    VERSIONING,
    WIRE_MODES,
)
from .contract import MAX_RETENTION_DAYS as MAX_DAYS
from .contract import CorsRule as StoredCorsRule
from .contract import LifecycleRule as Rule


def documented(**schema: Any) -> Meta:
    """JSON Schema for the OpenAPI document only: the engine enforces the rule itself."""
    return Meta(extra_json_schema=schema)


Timestamp = Annotated[
    str,
    documented(format="date-time", example="2026-01-01T00:00:00Z"),
    Meta(description="UTC, YYYY-MM-DDTHH:MM:SSZ"),
]
Count = Annotated[int, Meta(ge=0)]
BucketName = Annotated[
    str,
    documented(pattern=f"^{BUCKET_NAME_PATTERN}$"),
    Meta(description="3-63 characters of a-z, 0-9, '-' and '.'; unique in the organization"),
]
FileKey = Annotated[
    str,
    documented(minLength=1, maxLength=MAX_KEY_BYTES, pattern=r"^[^\x00]+$"),
    Meta(description=f"1 to {MAX_KEY_BYTES} bytes of UTF-8, no NUL; '/' allowed"),
]
MimeType = Annotated[str, documented(pattern=f"^{MIME_TYPE_PATTERN}$")]
AllowList = Annotated[
    list[Annotated[str, documented(pattern=f"^{MIME_PATTERN}$")]],
    documented(minItems=1, maxItems=MAX_ALLOW_LIST),
    Meta(description="MIME types or patterns: image/png, image/*, */*"),
]
Scope = Annotated[str, documented(enum=list(SCOPES))]
Name = Annotated[str, documented(minLength=1, maxLength=MAX_NAME_LENGTH, pattern=r"\S")]
Versioning = Annotated[
    str,
    documented(enum=list(VERSIONING)),
    Meta(
        description="enabled: every write keeps the previous version; suspended: versions "
        "kept so far stay, new writes replace the null version. Once set, never null again"
    ),
]
VersionId = Annotated[
    str,
    documented(pattern=r"^([0-9A-HJKMNP-TV-Z]{26}|null)$"),
    Meta(description="A version's id; `null` names the version written while unversioned"),
]

LockMode = Annotated[
    str,
    documented(enum=list(WIRE_MODES)),
    Meta(
        description="compliance: nobody can shorten or remove the retention; governance: "
        "only a key with the files:bypass-governance scope, asking to bypass it"
    ),
]
LifecycleRule = Rule
"""A lifecycle rule (declared with the rules themselves, in storage/rules/lifecycle_rules.py)."""
Lifecycle = Annotated[
    list[LifecycleRule],
    documented(minItems=1),
    Meta(
        description="1 to 1,000 lifecycle rules, applied by a background worker (see "
        "docs/api.md); the body's own size limit comes first"
    ),
]
CorsRule = StoredCorsRule
"""A CORS rule (declared with the rules themselves, in storage/rules/cors.py)."""
Cors = Annotated[
    list[CorsRule],
    documented(minItems=1, maxItems=MAX_CORS_RULES),
    Meta(
        description="1 to 100 CORS rules: which browser origins may call this bucket's files "
        "(here and on the S3 endpoint), with which methods and headers"
    ),
]
Public = Annotated[
    bool,
    Meta(
        description="Anyone may download its files without a key (GET /v1/buckets/{id}/files/"
        "{key}, and S3 GetObject)"
    ),
]
Policy = Annotated[
    dict[str, Any],
    Meta(
        description="A bucket policy in AWS's language (docs/s3.md, Who may do what): who "
        "else may do what with the bucket, on the S3 endpoint"
    ),
]
CacheControl = Annotated[
    str,
    documented(minLength=1, maxLength=256),
    Meta(description="Cache-Control sent with downloads made without a key"),
]
DefaultEncryption = Annotated[
    str,
    documented(minLength=1, maxLength=32),
    Meta(
        description="The encryption at rest every write into the bucket gets when it asks "
        "for none: AES256 (SSE-S3), aws:kms (SSE-KMS under the keyring's default key; 501 "
        "when the server has no keyring) or aws:kms/<key name> (that key of the keyring); "
        "null: none"
    ),
]
FileEncryption = Annotated[
    str | None,
    documented(enum=["AES256", "aws:kms", "SSE-C", None]),
    Meta(
        description="How the content is encrypted at rest: AES256 (SSE-S3), aws:kms (SSE-KMS: "
        "`kmsKeyId` names the key), SSE-C (under a key its client gave on the S3 endpoint; "
        "/v1 cannot download it), or null for none"
    ),
]
KmsKeyId = Annotated[
    str | None,
    Meta(
        description="The name, in the server's KMS keyring, of the key that wraps an aws:kms "
        "content's key; null for any other encryption or none"
    ),
]
AnonymousRate = Annotated[
    int,
    documented(minimum=0, maximum=MAX_ANONYMOUS_RPM),
    Meta(
        description="Requests a minute without a key (public downloads, signed URLs, form "
        "uploads) from one client address that name this bucket, on both listeners, counted "
        "apart from the address's others; 0: no limit; null: the server's "
        "ratelimit.anonymous_rpm"
    ),
]
Tags = Annotated[
    dict[str, str],
    documented(maxProperties=MAX_OBJECT_TAGS),
    Meta(
        description="Up to 10 tags: keys 1-128, values 0-256 characters of letters, digits, "
        "white space and + - = . _ : / @ (S3's rules)"
    ),
]
RetentionDays = Annotated[int, documented(minimum=1, maximum=MAX_DAYS)]
RetentionYears = Annotated[int, documented(minimum=1, maximum=MAX_DAYS // 365)]
