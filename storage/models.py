"""Records the engine hands out. Plain frozen dataclasses, no behaviour beyond derivation."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bucketd_client.contract import (
    ADMIN_SCOPES,
    API_SCOPES,
    BUCKET_STATUSES,
    BYPASS_GOVERNANCE,
    ORGS_MANAGE,
    SCOPES,
    VERSIONING,
)
from storage.rules import events

__all__ = [
    "ADMIN_SCOPES",
    "API_SCOPES",
    "BUCKET_STATUSES",
    "BYPASS_GOVERNANCE",
    "ORGS_MANAGE",
    "SCOPES",
    "VERSIONING",
]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Actor:
    """Who an engine call acts for: an organization, possibly narrowed to one bucket."""

    org_id: str
    bucket_id: str | None = None
    decided: Bucket | None = field(default=None, compare=False, repr=False)
    """The bucket as the access decision read it for this request (`access.py`): the
    engine's calls in the same request take it instead of reading it again."""
    judged: FileRecord | None = field(default=None, compare=False, repr=False)
    """The version the access decision read (its ACL, its tags) to allow this request: a
    change to a version's ACL or tags acts on that version alone, not on one written since
    (a request may hold its body back after the decision)."""

    def can_see(self, bucket_id: str) -> bool:
        return self.bucket_id is None or self.bucket_id == bucket_id


@dataclass(frozen=True, kw_only=True)
class Organization:
    id: str
    name: str
    plan: str
    created_at: str
    bucket_count: int
    stored_bytes: int
    file_count: int
    part_bytes: int = 0
    """Bytes of multipart parts in flight: they count against the quota until the upload
    completes (then they are the file's) or goes."""


@dataclass(frozen=True, kw_only=True)
class ApiKey:
    id: str
    org_id: str
    name: str
    scopes: tuple[str, ...]
    bucket_id: str | None
    created_at: str
    expires_at: int | None
    revoked_at: str | None
    last4: str
    access_key_id: str | None = None
    """Set for S3 credentials (whose secret is kept sealed, for HMAC)."""


@dataclass(frozen=True, kw_only=True)
class Bucket:
    id: str
    org_id: str
    name: str
    region: str
    status: str
    status_reason: str | None
    created_at: str
    max_upload_bytes: int
    allowed_content_types: tuple[str, ...]
    file_count: int
    size_bytes: int
    location: str | None = None
    """Where the backend keeps the bucket (the real S3 bucket); None for local blobs."""
    versioning: str | None = None
    """None (never enabled: one version per key), "Enabled" or "Suspended"."""
    object_lock: str | None = None
    """None (off), or the object lock configuration as JSON (`object_lock.BucketLock`)."""
    lifecycle: str | None = None
    """None, or the lifecycle rules as JSON (`lifecycle_rules.Rule`)."""
    tags: str | None = None
    """None, or the bucket's tags as a JSON object (`tags.py`)."""
    cors: str | None = None
    """None, or the bucket's CORS rules as JSON (`cors.CorsRule`)."""
    public: bool = False
    """Anyone may read its files, without a key."""
    cache_control: str | None = None
    """Cache-Control sent with its public downloads."""
    shared_name: str | None = None
    """Its name once it answered requests from outside its organization (public, CORS rules,
    a policy, an ACL beyond private, an object with an ACL that grants others): held across the
    server, since such a request names nothing else, until the bucket is deleted or renamed
    (the reservation moves to the new name); None for a bucket that never shared."""
    policy: str | None = None
    """Its bucket policy, the JSON text as given (`policy.py`), or None."""
    acl: str | None = None
    """Its ACL beyond `private`, a canned name or a grant list (`acl.py`), or None."""
    public_access_block: str | None = None
    """S3's four public access switches as JSON (`acl.PublicAccessBlock`); None: all off."""
    anonymous_rpm: int | None = None
    """Requests a minute without a key from one client address that name this bucket
    (0: no limit); None: the server's `ratelimit.anonymous_rpm`, counted with the
    address's other requests."""
    encryption: str | None = None
    """Its default encryption at rest (AES256), given to every write that asks for none."""
    object_ownership: str | None = None
    """S3's object ownership (`ownership.py`): BucketOwnerEnforced disables ACLs; None: none
    set, ACLs apply."""


@dataclass(frozen=True, kw_only=True)
class FileRecord:
    bucket_id: str
    key: str
    size: int
    content_type: str
    uploaded_at: str
    sha256: str
    blob_id: str
    backend_etag: str | None = None
    """The backend's own version tag (S3 ETag), checked on every read."""
    location: str | None = None
    md5: str | None = None
    """The S3 ETag's body: hex MD5, or `hex-N` for a multipart upload; None until known."""
    metadata: str | None = None
    """User metadata (x-amz-meta-*) as a JSON object, or None."""
    checksum: str | None = None
    """The checksum a client stored with the content, as JSON `{"algorithm", "value", "type"}`."""
    version_id: str | None = None
    """The version's id; None for the "null" version (written while versioning was never
    enabled, or suspended)."""
    order_key: str | None = None
    """Orders the versions of a key in time (a ULID; None: older than versioning)."""
    delete_marker: bool = False
    """A delete marker: a version that says the key was deleted, with no content."""
    lock_mode: str | None = None
    """The retention's mode (GOVERNANCE or COMPLIANCE), or None."""
    lock_until: str | None = None
    """The retention's end (UTC `YYYY-MM-DDTHH:MM:SSZ`), or None."""
    legal_hold: bool = False
    object_key: str | None = None
    """Where the backend keeps the content when not under the file's key (the S3 backend
    keeps each named version of a versioned bucket apart); None: under the key."""
    headers: str | None = None
    """Headers returned with the content (Cache-Control, Expires, Content-Disposition,
    Content-Encoding, Content-Language), as a JSON object, or None."""
    tags: str | None = None
    """The version's tags as a JSON object (`tags.py`), or None."""
    acl: str | None = None
    """The version's ACL beyond `private`, a canned name or a grant list (`acl.py`), or
    None."""
    encryption: str | None = None
    """How the content is encrypted at rest (`encryption.Envelope`, encoded), or None: in
    plaintext. `size` is the plaintext's; the stored content is `encryption.sealed_size`."""
    parts: str | None = None
    """A multipart object's parts (`part_layout.PartLayout`, encoded), or None: one part."""
    inline: tuple[str, bytes] | None = field(default=None, compare=False, repr=False)
    """The content kept in the index, read with the record (`get_file`) so that a GET costs
    one index read, with the blob id it belongs to: `Files.open` serves it only while the
    record still names that blob (a `replace` that changes the blob cannot serve stale
    bytes). None: not read, or not kept inline. Not a column of `files`."""

    @property
    def s3_version_id(self) -> str:
        return self.version_id or "null"

    def same_version(self, other: FileRecord) -> bool:
        """Whether `other` is this written version of the key, not one written since (a
        "null" version replaced keeps its id)."""
        return (self.version_id, self.order_key, self.blob_id, self.uploaded_at) == (
            other.version_id,
            other.order_key,
            other.blob_id,
            other.uploaded_at,
        )

    @property
    def etag(self) -> str:
        """The quoted SHA-256 of the content: of its plaintext when it is encrypted (the
        envelope keeps it; `sha256` is then the stored packages')."""
        if self.encryption is not None:
            plain = json.loads(self.encryption).get("s")
            if plain:
                return f'"{plain}"'
        return f'"{self.sha256}"'


@dataclass(frozen=True, kw_only=True)
class StoredBlob:
    """Content that the backend holds safely, not yet referenced by the index."""

    blob_id: str
    size: int
    sha256: str
    inline: bytes | None = None
    backend_etag: str | None = None
    md5: str | None = None
    object_key: str | None = None
    """Where the backend keeps it when not under the file's key (see FileRecord)."""
    handle: Any = field(default=None, compare=False, repr=False)
    """Backend-private state of content not yet published (an S3 multipart upload)."""
    plain_size: int | None = None
    """An encrypted content's plaintext size (the file's); `size` is what is stored."""

    @property
    def file_size(self) -> int:
        return self.size if self.plain_size is None else self.plain_size


@dataclass(frozen=True, kw_only=True)
class StorageStats:
    """What the index holds, for metrics: logical (files as listed) against physical
    (distinct blobs) bytes."""

    organizations: int
    buckets: int
    files: int
    stored_bytes: int
    blobs: int
    blob_bytes: int

    @property
    def dedupe_ratio(self) -> float:
        """Logical bytes per physical byte: 1.0 without dedupe, 2.0 when half is shared."""
        return self.stored_bytes / self.blob_bytes if self.blob_bytes else 1.0


@dataclass(frozen=True, kw_only=True)
class Page(Generic[T]):
    items: list[T]
    has_more: bool
    prefixes: list[str]
    last: str | None
    """The position after which the next page starts (a key, prefix or id)."""

    @classmethod
    def of(cls, rows: list[T], limit: int, position: Callable[[T], str]) -> Page[T]:
        """A page of `limit` from `limit + 1` rows fetched (one more says there is more)."""
        has_more = len(rows) > limit
        rows = rows[:limit]
        last = position(rows[-1]) if has_more else None
        return cls(items=rows, has_more=has_more, prefixes=[], last=last)


@dataclass(frozen=True, kw_only=True)
class Reservation:
    """An upload stored in the backend whose index commit has not happened (yet)."""

    token: str
    bucket_id: str
    key: str
    size: int
    sha256: str
    content_type: str
    backend_etag: str
    location: str | None
    object_key: str | None = None
    encryption: str | None = None
    """The content's envelope when it is encrypted (`size` is then the stored size)."""
    lease_until: float | None = None
    """When the write is taken for gone unless its writer renews it (None: made before
    write leases; `heal` settles it after the upload deadline)."""
    commit_with: str | None = None
    """What the write commits beside its content (`index/reservations.py`)."""


@dataclass(frozen=True, kw_only=True)
class Condition:
    """A conditional write: If-None-Match: * and/or If-Match: "etag" (S3 or API ETag)."""

    if_none_match_any: bool = False
    if_match: str | None = None
    if_none_match: str | None = None
    """An If-None-Match field of ETags (S3's, read as RFC 9110 does): the write goes on
    unless the current version has one of them."""


@dataclass(frozen=True, kw_only=True)
class DeleteCondition:
    """A conditional delete of a key's current version (S3's If-Match,
    x-amz-if-match-last-modified-time and x-amz-if-match-size; a lifecycle rule's guard
    that the version it judged is still current): checked in the deleting transaction."""

    if_match: str | None = None
    """An If-Match field (`*`: any current version), as `rules/etags.etag_matches` reads it."""
    modified_at: float | None = None
    """The version's upload time, to the second (Unix time)."""
    size: int | None = None

    def holds(self, current: FileRecord) -> bool:
        from storage.rules.clock import iso_to_unix
        from storage.rules.etags import etag_matches

        tags = (current.md5, current.sha256, current.etag)
        if self.if_match is not None and not etag_matches(self.if_match, tags, weak=False):
            return False
        if self.modified_at is not None and int(iso_to_unix(current.uploaded_at)) != int(
            self.modified_at
        ):
            return False
        return self.size is None or self.size == current.size


@dataclass(frozen=True, kw_only=True)
class MultipartUpload:
    upload_id: str
    bucket_id: str
    key: str
    content_type: str
    metadata: str | None
    checksum_algorithm: str | None
    created_at: str
    lock: str | None = None
    """The lock the object gets on completion, as JSON (explicit headers), or None."""
    headers: str | None = None
    """The stored headers the object gets on completion (see FileRecord.headers)."""
    tags: str | None = None
    """The tags the object gets on completion."""
    acl: str | None = None
    """The canned ACL the object gets on completion."""
    encryption: str | None = None
    """The encryption at rest its parts and its object get (AES256, an aws:kms key), or
    None; an SSE-C upload's is the envelope that verifies its customer's key
    (`sealed_parts.verifier`)."""


@dataclass(frozen=True)
class CompletedPart:
    """A part a multipart completion names: its number, ETag, and the checksum the client
    says it has (algorithm and base64 value), if it says one."""

    number: int
    etag: str
    checksum: tuple[str, str] | None = None


@dataclass(frozen=True)
class CompletionClaim:
    """What a multipart completion says the whole object is: a checksum (algorithm and
    base64 value), a checksum type, a size. Each one given must hold."""

    checksum: tuple[str, str] | None = None
    checksum_type: str | None = None
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class Part:
    upload_id: str
    part_number: int
    size: int
    md5: str
    """The part's ETag: its plaintext's MD5 (an SSE-C part's, `sealed_parts.part_etag`)."""
    checksum: str | None
    uploaded_at: str
    encryption: str | None = None
    """An encrypted part's own envelope (`encryption.Envelope`, encoded), or None."""
    stored_md5: str | None = None
    """An encrypted part's sealed bytes' MD5, which names it in the part store."""

    @property
    def stored_name(self) -> str:
        """The MD5 the part store names this part by."""
        return self.md5 if self.stored_md5 is None else self.stored_md5


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """How a write is made, beside what it writes (`attributes.Attributes`)."""

    md5: bool = False
    """Compute the content's MD5 while it streams (the S3 ETag)."""
    checksum: Callable[[], str | None] | None = None
    """Read once the body has ended: the verified checksum to store, as JSON, or None."""
    condition: Condition | None = None
    upload_id: str | None = None
    """The multipart upload this write completes: removed in the commit's transaction, and
    its parts' bytes no longer counted (they become the file's)."""
    event: str = events.PUT
    """The name of the event the write records (`events.py`)."""
    encryption: str | None = None
    """Encrypt the content at rest (`encryption.SSE_S3`, `encryption.SSE_C`), or None: as
    the bucket says."""
    customer_key: bytes | None = field(default=None, repr=False)
    """SSE-C: the client's 32-byte key, which wraps the content's own key; never stored."""
    plain_sha256: Callable[[], str] | None = None
    """Read once the body has ended: the content's SHA-256 (hex) as the caller verified it
    while it streamed (an S3 body's signed `x-amz-content-sha256`), so that an encrypted
    write does not hash its plaintext a second time; None: the engine hashes it."""


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """A bucket's versions and settings at one moment (or, `bucket_id` None, every bucket of
    the server's): index rows only, sharing the contents with the buckets
    (`services/snapshots.py`)."""

    id: str
    org_id: str | None
    """None: a server snapshot."""
    bucket_id: str | None
    """None: a server snapshot."""
    bucket_name: str | None
    """The bucket's name when the snapshot was taken (None for a server snapshot)."""
    name: str | None
    """A label of at most 256 characters, or None."""
    created_at: str
    file_count: int
    """The versions and delete markers it names."""
    size_bytes: int
    """The bytes of those versions."""
    buckets: int = 1
    """1, or for a server snapshot the buckets it holds."""
