"""The JSON shapes of the /v1 API, declared once.

The server encodes its answers and decodes request bodies with these structs, the client
decodes answers and encodes requests with them, and `/v1/openapi.json` is generated from
them (`gateway/api/openapi.py`). Attributes are snake_case, the wire is camelCase. Limits come
from the wire contract (`contract.py`), which the server's rules import too, so the document
cannot drift from what the server enforces.

Request shapes only check JSON types; the rules themselves (name patterns, regions, MIME
types) are the engine's, and the schema states them (`documented`) without enforcing them
twice. `codes` names the error code a malformed field gets.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import UNSET, Meta, Struct, UnsetType, field

from .contract import BUCKET_STATUSES, PLAN_NAMES
from .fields import (
    AllowList,
    AnonymousRate,
    BucketName,
    CacheControl,
    Cors,
    CorsRule,
    Count,
    DefaultEncryption,
    FileEncryption,
    FileKey,
    KmsKeyId,
    Lifecycle,
    LifecycleRule,
    LockMode,
    MimeType,
    Name,
    Policy,
    Public,
    RetentionDays,
    RetentionYears,
    Scope,
    Tags,
    Timestamp,
    VersionId,
    Versioning,
    documented,
)

__all__ = [
    "UNSET",
    "Bucket",
    "CorsRule",
    "CreateBucket",
    "CreateKey",
    "CreateOrganization",
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
    "UpdateOrganization",
    "Usage",
    "Written",
]


MAX_SIGNED_SECONDS = 7 * 24 * 3600


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
    anonymous_requests_per_minute: AnonymousRate | None = None
    encryption: DefaultEncryption | None = None


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
    encryption: FileEncryption = None
    kms_key_id: KmsKeyId = None

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
    encryption: FileEncryption = None
    kms_key_id: KmsKeyId = None


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
    snapshot_bytes: Annotated[
        int,
        Meta(
            ge=0,
            description="Bytes of the contents the organization's snapshots alone still hold "
            "(each once); they count against maxStorageBytes with storedBytes",
        ),
    ] = 0


Plan = Annotated[str, documented(enum=list(PLAN_NAMES))]


class Organization(Shape, frozen=True, tag_field="object", tag="organization"):
    id: str
    name: str
    plan: Plan
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
    anonymous_requests_per_minute: AnonymousRate | None = None
    encryption: DefaultEncryption | None = None


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
    anonymous_requests_per_minute: AnonymousRate | UnsetType | None = UNSET
    """null: the server's rate again."""
    encryption: DefaultEncryption | UnsetType | None = UNSET
    """null removes the default encryption."""


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


class CreateOrganization(Request):
    """A tenant (the operator's, scope orgs:manage); its name is unique on the server."""

    name: Name
    plan: Plan


class UpdateOrganization(Request):
    """Move an organization to another plan; absent leaves it."""

    plan: Plan | UnsetType = UNSET
