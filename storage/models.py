"""Records the engine hands out. Plain frozen dataclasses, no behaviour beyond derivation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

BUCKET_STATUSES = ("provisioning", "active", "failed")
SCOPES = ("buckets:read", "buckets:write", "files:read", "files:write", "keys:manage")


@dataclass(frozen=True)
class Actor:
    """Who an engine call acts for: an organization, possibly narrowed to one bucket."""

    org_id: str
    bucket_id: str | None = None

    def can_see(self, bucket_id: str) -> bool:
        return self.bucket_id is None or self.bucket_id == bucket_id


@dataclass(frozen=True)
class Organization:
    id: str
    name: str
    plan: str
    created_at: str
    bucket_count: int
    stored_bytes: int
    file_count: int


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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

    @property
    def etag(self) -> str:
        return f'"{self.sha256}"'


@dataclass(frozen=True)
class StoredBlob:
    """Content that the backend holds safely, not yet referenced by the index."""

    blob_id: str
    size: int
    sha256: str
    inline: bytes | None = None
    backend_etag: str | None = None
    handle: Any = field(default=None, compare=False, repr=False)
    """Backend-private state of content not yet published (an S3 multipart upload)."""


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    has_more: bool
    prefixes: list[str]
    last: str | None
    """The position after which the next page starts (a key, prefix or id)."""


@dataclass(frozen=True)
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
