"""Records the engine hands out. Plain frozen dataclasses, no behaviour beyond derivation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

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


@dataclass(frozen=True)
class FileRecord:
    bucket_id: str
    key: str
    size: int
    content_type: str
    uploaded_at: str
    sha256: str
    blob_id: str

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


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    has_more: bool
    prefixes: list[str]
    last: str | None
    """The position after which the next page starts (a key, prefix or id)."""
