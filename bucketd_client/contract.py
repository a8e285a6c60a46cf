"""The wire contract's values, declared once, imported by nothing of the server: the
limits, patterns and enumerations /v1 documents, and the two rule shapes the index stores
as they travel (CORS and lifecycle rules). The client's shapes are built on them, and the
server's rules import them from here (`storage/rules/validation.py`, `storage/models.py`...),
so the typed client installs and publishes without the server."""

from __future__ import annotations

import msgspec

PLAN_NAMES = ("free", "pro")
"""The plans (`storage.config.Plans` has a field for each, and checks so at import)."""

BUCKET_STATUSES = ("provisioning", "active", "failed")
VERSIONING = {"enabled": "Enabled", "suspended": "Suspended"}
"""A bucket's versioning states: as /v1 spells them, as S3 (and the index) does."""
API_SCOPES = ("buckets:read", "buckets:write", "files:read", "files:write", "keys:manage")
"""The scopes of an organization's own /v1 API (the credential BUCKETD_ACCESS_KEY_ID
makes has these)."""
ORGS_MANAGE = "orgs:manage"
"""The operator's scope: every organization, its plan and its keys (/v1/orgs). Held by
the first start's admin key and by the keys an operator grants it to; never by a key
restricted to a bucket."""
ADMIN_SCOPES = (*API_SCOPES, ORGS_MANAGE)
"""The first start's admin key: the organization's scopes and the operator's."""
BYPASS_GOVERNANCE = "files:bypass-governance"
"""Lets a request shorten, remove or delete through GOVERNANCE retention (it must still
ask to, as S3's x-amz-bypass-governance-retention does)."""
SCOPES = (*ADMIN_SCOPES, "metrics:read", BYPASS_GOVERNANCE)
"""Every scope; `metrics:read` (GET /metrics) and `files:bypass-governance` are granted
with `bucketd keys create` on the data dir (or, for metrics:read, by a key that holds it)."""

WIRE_MODES = {"governance": "GOVERNANCE", "compliance": "COMPLIANCE"}
"""/v1's names of the retention modes (S3's are upper case)."""
MAX_RETENTION_DAYS = 36_500
"""The longest default retention S3 accepts: 100 years."""
MAX_OBJECT_TAGS = 10

MAX_KEY_BYTES = 1024
MAX_NAME_LENGTH = 200
"""Of an organization's or a key's name."""
MAX_SNAPSHOT_NAME = 256
"""Of a snapshot's label."""
MAX_ALLOW_LIST = 100
BUCKET_NAME_PATTERN = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t \x21\x23-\x5b\x5d-\x7e]|\\[\t \x21-\x7e])*"'
MIME_PARAMETER_PATTERN = rf"({_TOKEN})=({_TOKEN}|{_QUOTED})"
"""One parameter of a media type: token=token or quoted-string."""
MIME_TYPE_PATTERN = rf"({_TOKEN})/({_TOKEN})((?:[ \t]*;[ \t]*(?:{MIME_PARAMETER_PATTERN})?)*)"
"""RFC 9110's media-type: one type/subtype and parameters (token=token or quoted-string);
no list, no bytes a header cannot carry back out."""
MIME_PATTERN = rf"(\*/\*|{_TOKEN}/\*|{_TOKEN}/{_TOKEN})"
"""An allow-list entry: `*/*`, `type/*` or `type/subtype`."""

EVENT_NAMES = (
    "ObjectCreated:Put",
    "ObjectCreated:Post",
    "ObjectCreated:Copy",
    "ObjectCreated:CompleteMultipartUpload",
    "ObjectRemoved:Delete",
    "ObjectRemoved:DeleteMarkerCreated",
    "LifecycleExpiration:Delete",
    "LifecycleExpiration:DeleteMarkerCreated",
)
EVENT_PATTERNS = (
    "s3:*",
    "s3:ObjectCreated:*",
    "s3:ObjectRemoved:*",
    "s3:LifecycleExpiration:*",
    *("s3:" + name for name in EVENT_NAMES),
)
"""What a webhook may subscribe to, in S3's spelling."""

MAX_CORS_RULES = 100
MAX_ANONYMOUS_RPM = 1_000_000_000
"""The highest rate a bucket's owner may set for requests without a key (0: no limit)."""


class CorsRule(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    rename="camel",
):
    """One CORS rule (the /v1 shape and what the index stores, as JSON)."""

    id: str = ""
    allowed_origins: list[str]
    """Origins such as `https://app.example.com`, `http://*.example.com` or `*`."""
    allowed_methods: list[str]
    allowed_headers: list[str] = msgspec.field(default_factory=list)
    """Request headers a page may send (`*` for any)."""
    expose_headers: list[str] = msgspec.field(default_factory=list)
    """Response headers a page may read beyond the CORS-safelisted ones."""
    max_age_seconds: int | None = None


class LifecycleRule(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    rename="camel",
):
    """One lifecycle rule (the /v1 shape and what the index stores, as JSON). The filter
    matches keys under `prefix` whose size is strictly between the two bounds given."""

    id: str = ""
    enabled: bool = True
    prefix: str = ""
    size_greater_than: int | None = None
    size_less_than: int | None = None
    tags: dict[str, str] = msgspec.field(default_factory=dict)
    """Only versions carrying every one of these tags (never delete markers)."""
    expiration_days: int | None = None
    """Current versions this many days after their upload: deleted (a delete marker where
    the bucket is versioned)."""
    expiration_date: str | None = None
    """Current versions from this moment on (UTC midnight, YYYY-MM-DDT00:00:00Z)."""
    expired_object_delete_marker: bool = False
    """Remove a delete marker that has no version left behind it."""
    noncurrent_days: int | None = None
    """Noncurrent versions this many days after a newer version replaced them."""
    newer_noncurrent_versions: int | None = None
    """With noncurrent_days: keep this many newest noncurrent versions whatever their age."""
    abort_incomplete_multipart_upload_days: int | None = None
    legacy_prefix: bool = False
    """The rule came to the S3 endpoint with S3's legacy top-level `Prefix` rather than a
    `Filter`; the endpoint answers it in that shape, as S3 returns what was set. It changes
    nothing of what the rule does."""
