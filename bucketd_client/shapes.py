"""The JSON shapes of the /v1 API, declared once.

The server encodes its answers and decodes request bodies with these structs, the client
decodes answers and encodes requests with them, and `/v1/openapi.json` is generated from
them (`gateway/openapi.py`). Attributes are snake_case, the wire is camelCase. Limits come
from the wire contract (`contract.py`), which the server's rules import too, so the document
cannot drift from what the server enforces.

Request shapes only check JSON types; the rules themselves (name patterns, regions, MIME
types) are the engine's, and the schema states them (`documented`) without enforcing them
twice. `codes` names the error code a malformed field gets.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import UNSET, Meta, Struct, UnsetType, field

from .contract import (
    BUCKET_NAME_PATTERN,
    BUCKET_STATUSES,
    MAX_ALLOW_LIST,
    MAX_CORS_RULES,
    MAX_KEY_BYTES,
    MAX_NAME_LENGTH,
    MAX_OBJECT_TAGS,
    MIME_PATTERN,
    MIME_TYPE_PATTERN,
    PLAN_NAMES,
    SCOPES,
    VERSIONING,
    WIRE_MODES,
)
from .contract import MAX_RETENTION_DAYS as MAX_DAYS
from .contract import CorsRule as StoredCorsRule
from .contract import LifecycleRule as Rule

__all__ = [
    "UNSET",
    "Bucket",
    "CorsRule",
    "CreateBucket",
    "CreateKey",
    "DefaultRetention",
    "DefaultRetentionRule",
    "Error",
    "File",
    "FileVersion",
    "Key",
    "LifecycleRule",
    "Limits",
    "ObjectLock",
    "ObjectLockRule",
    "Organization",
    "ProtectVersion",
    "Request",
    "RestoreVersion",
    "Retention",
    "RetentionRule",
    "SignFile",
    "SignedUrl",
    "UnsetType",
    "UpdateBucket",
    "UpdateFile",
    "Usage",
    "Written",
]


MAX_SIGNED_SECONDS = 7 * 24 * 3600


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
"""A lifecycle rule (declared with the rules themselves, in storage/lifecycle_rules.py)."""
Lifecycle = Annotated[
    list[LifecycleRule],
    documented(minItems=1),
    Meta(
        description="1 to 1,000 lifecycle rules, applied by a background worker (see "
        "docs/api.md); the body's own size limit comes first"
    ),
]
CorsRule = StoredCorsRule
"""A CORS rule (declared with the rules themselves, in storage/cors.py)."""
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


class Shape(Struct, frozen=True, kw_only=True, rename="camel"):
    """Base of every shape: immutable, keyword-only, camelCase on the wire."""


class DefaultRetention(Shape, frozen=True, omit_defaults=True):
    """The retention every new version of the bucket gets unless its write asks for one."""

    mode: LockMode
    days: RetentionDays | None = None
    years: RetentionYears | None = None


class ObjectLock(Shape, frozen=True):
    """Object lock, enabled for good: versions can be kept under retention or legal hold."""

    default_retention: DefaultRetention | None = None


class Retention(Shape, frozen=True):
    mode: LockMode
    retain_until: Annotated[str, Meta(description="UTC, YYYY-MM-DDTHH:MM:SSZ")]


class Bucket(Shape, frozen=True, tag_field="object", tag="bucket"):
    id: str
    name: BucketName
    region: str
    status: Annotated[str, documented(enum=list(BUCKET_STATUSES))]
    status_reason: str | None
    created_at: Timestamp
    max_upload_bytes: Count
    allowed_content_types: tuple[str, ...]
    file_count: Annotated[int, Meta(ge=0, description="Stored versions, current or not")]
    size_bytes: Annotated[int, Meta(ge=0, description="Bytes of every stored version")]
    versioning: Versioning | None = None
    object_lock: ObjectLock | None = None
    lifecycle: Lifecycle | None = None
    cors: Cors | None = None
    public: Public = False
    cache_control: CacheControl | None = None
    policy: Policy | None = None


class File(Shape, frozen=True, tag_field="object", tag="file"):
    id: FileKey
    """The key again: a file's id is its key."""
    key: FileKey
    bucket_id: str
    size: Count
    content_type: str
    uploaded_at: Timestamp
    etag: Annotated[str, Meta(description="The quoted hex SHA-256 of the content")]
    version_id: Annotated[
        VersionId | None,
        Meta(
            description="null for the null version, the one written while the bucket was "
            "unversioned or suspended (version listings call it `null`)"
        ),
    ] = None
    retention: Retention | None = None
    legal_hold: bool = False
    tags: Tags = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """The content's SHA-256 in hex (the ETag without its quotes)."""
        return self.etag.strip('"')


class FileVersion(Shape, frozen=True, tag_field="object", tag="file_version"):
    """A version of a file, current or not, or a delete marker."""

    id: VersionId
    """The version id again: a version's id."""
    key: FileKey
    version_id: VersionId
    is_latest: bool
    delete_marker: bool
    size: Count
    content_type: Annotated[str, Meta(description="Empty for a delete marker")]
    uploaded_at: Timestamp
    etag: Annotated[str | None, Meta(description="null for a delete marker")]
    retention: Retention | None = None
    legal_hold: bool = False
    tags: Tags = field(default_factory=dict)


class SignedUrl(Shape, frozen=True, tag_field="object", tag="signed_url"):
    """A URL that works without a key until it expires, or until the key that signed it is
    revoked."""

    url: Annotated[str, Meta(description="Absolute, as this server was reached")]
    method: Annotated[str, documented(enum=["GET", "PUT"])]
    key: FileKey
    expires_at: Timestamp


class Key(Shape, frozen=True, tag_field="object", tag="key", omit_defaults=True):
    id: str
    organization_id: str
    name: str
    scopes: tuple[Scope, ...]
    bucket_id: str | None
    created_at: Timestamp
    expires_at: Timestamp | None
    revoked_at: Timestamp | None
    last4: str
    access_key_id: str | None = None
    """S3 credentials only: the access key id, with the secret as its secret access key."""
    secret: str | None = None
    """Only on the key just created: the one time the secret is shown."""


class Limits(Shape, frozen=True):
    requests_per_minute: Count
    max_buckets: Count
    max_storage_bytes: Count


class Usage(Shape, frozen=True):
    buckets: Count
    stored_bytes: Count
    files: Count


class Organization(Shape, frozen=True, tag_field="object", tag="organization"):
    id: str
    name: str
    plan: Annotated[str, documented(enum=list(PLAN_NAMES))]
    created_at: Timestamp
    limits: Limits
    usage: Usage


class Error(Shape, frozen=True):
    """What `error` holds on a failure."""

    message: str
    code: Annotated[str, Meta(description="A stable snake_case name, e.g. bucket_not_found")]


class Written(Shape, frozen=True):
    """What a write answers: the kind of resource and its id."""

    object: str
    id: str


class Request(Struct, kw_only=True, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """Base of request bodies: unknown fields are refused (400 `unknown_field`)."""

    codes: ClassVar[dict[str, str]] = {}
    """The error code of a malformed field, by its wire name (else `invalid_request`)."""


class DefaultRetentionRule(Request):
    """Days or years, not both."""

    mode: LockMode
    days: RetentionDays | None = None
    years: RetentionYears | None = None


class ObjectLockRule(Request):
    """Enable object lock (versioning must be, or become, enabled; there is no way back)
    with an optional default retention."""

    default_retention: DefaultRetentionRule | None = None


class RetentionRule(Request):
    mode: LockMode
    retain_until: Annotated[
        str, Meta(description="An ISO 8601 date and time with its zone; kept to the second")
    ]


class CreateBucket(Request):
    codes: ClassVar[dict[str, str]] = {
        "name": "invalid_bucket_name",
        "region": "invalid_region",
        "allowedContentTypes": "invalid_content_type",
    }
    name: BucketName
    region: Annotated[str, Meta(description="One of the server's regions, e.g. us-east-1")]
    max_upload_bytes: Count | None = None
    allowed_content_types: AllowList | None = None
    versioning: Versioning | None = None
    object_lock: ObjectLockRule | None = None
    lifecycle: Lifecycle | None = None
    cors: Cors | None = None
    public: Public = False
    cache_control: CacheControl | None = None


class UpdateBucket(Request):
    """Fields left out are left as they are; null resets a limit to the server's default."""

    codes: ClassVar[dict[str, str]] = CreateBucket.codes
    name: BucketName | UnsetType = UNSET
    max_upload_bytes: Count | UnsetType | None = UNSET
    allowed_content_types: AllowList | UnsetType | None = UNSET
    versioning: Versioning | UnsetType = UNSET
    object_lock: ObjectLockRule | UnsetType = UNSET
    lifecycle: Lifecycle | UnsetType | None = UNSET
    """null removes every rule."""
    cors: Cors | UnsetType | None = UNSET
    """null removes every CORS rule."""
    public: Public | UnsetType = UNSET
    cache_control: CacheControl | UnsetType | None = UNSET
    policy: Policy | UnsetType | None = UNSET
    """null removes the policy."""


class RestoreVersion(Request):
    """Make the version the path names the current one of the file `key`: a new version
    sharing its content."""

    codes: ClassVar[dict[str, str]] = {"key": "invalid_key"}
    key: FileKey


class SignFile(Request):
    expires_in: Annotated[
        int, Meta(ge=1, le=MAX_SIGNED_SECONDS, description="Seconds the URL works (≤ 7 days)")
    ]
    upload: Annotated[
        bool,
        Meta(
            description="A URL that uploads this key with PUT (needs files:write) instead of "
            "one that downloads it"
        ),
    ] = False
    upsert: Annotated[
        bool,
        Meta(
            description="With upload: the PUT may replace a file already at the key (else it "
            "only creates one: 412 precondition_failed)"
        ),
    ] = False


class ProtectVersion(Request):
    """Set a version's retention (null removes it, where allowed) and/or legal hold; fields
    left out are left as they are."""

    codes: ClassVar[dict[str, str]] = {"key": "invalid_key"}
    key: FileKey
    retention: RetentionRule | UnsetType | None = UNSET
    legal_hold: bool | UnsetType = UNSET
    bypass_governance: Annotated[
        bool,
        Meta(description="Shorten or remove GOVERNANCE retention (scope files:bypass-governance)"),
    ] = False


class UpdateFile(Request):
    """Rename (`key`) and/or retype (`contentType`); null or absent leaves it."""

    codes: ClassVar[dict[str, str]] = {
        "key": "invalid_key",
        "contentType": "invalid_content_type",
        "tags": "invalid_tag",
    }
    key: FileKey | None = None
    content_type: MimeType | None = None
    tags: Annotated[Tags | None, Meta(description="Replaces every tag; {} removes them")] = None


class CreateKey(Request):
    codes: ClassVar[dict[str, str]] = {"scopes": "invalid_scopes", "expiresAt": "invalid_expiry"}
    name: Name
    scopes: Annotated[list[Scope], documented(minItems=1)]
    bucket_id: str | None = None
    expires_at: Timestamp | None = None
    s3: bool = False
    """Make S3 credentials (an access key id and secret access key) instead of an API key."""
