"""The resources of the /v1 API as frozen dataclasses, built from their JSON shapes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Bucket:
    id: str
    name: str
    region: str
    status: str
    status_reason: str | None
    created_at: str
    max_upload_bytes: int
    allowed_content_types: tuple[str, ...]
    file_count: int
    size_bytes: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Bucket:
        return cls(
            id=data["id"],
            name=data["name"],
            region=data["region"],
            status=data["status"],
            status_reason=data.get("statusReason"),
            created_at=data["createdAt"],
            max_upload_bytes=data["maxUploadBytes"],
            allowed_content_types=tuple(data["allowedContentTypes"]),
            file_count=data["fileCount"],
            size_bytes=data["sizeBytes"],
        )


@dataclass(frozen=True)
class File:
    key: str
    bucket_id: str
    size: int
    content_type: str
    uploaded_at: str
    etag: str

    @property
    def sha256(self) -> str:
        """The content's SHA-256 in hex (the ETag without its quotes)."""
        return self.etag.strip('"')

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> File:
        return cls(
            key=data["key"],
            bucket_id=data["bucketId"],
            size=data["size"],
            content_type=data["contentType"],
            uploaded_at=data["uploadedAt"],
            etag=data["etag"],
        )


@dataclass(frozen=True)
class Key:
    id: str
    organization_id: str
    name: str
    scopes: tuple[str, ...]
    bucket_id: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    last4: str
    secret: str | None = None
    """Only on the key just created: the one time the secret is shown."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Key:
        return cls(
            id=data["id"],
            organization_id=data["organizationId"],
            name=data["name"],
            scopes=tuple(data["scopes"]),
            bucket_id=data.get("bucketId"),
            created_at=data["createdAt"],
            expires_at=data.get("expiresAt"),
            revoked_at=data.get("revokedAt"),
            last4=data["last4"],
            secret=data.get("secret"),
        )


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int
    max_buckets: int
    max_storage_bytes: int


@dataclass(frozen=True)
class Usage:
    buckets: int
    stored_bytes: int
    files: int


@dataclass(frozen=True)
class Organization:
    id: str
    name: str
    plan: str
    created_at: str
    limits: Limits
    usage: Usage

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Organization:
        limits, usage = data["limits"], data["usage"]
        return cls(
            id=data["id"],
            name=data["name"],
            plan=data["plan"],
            created_at=data["createdAt"],
            limits=Limits(
                requests_per_minute=limits["requestsPerMinute"],
                max_buckets=limits["maxBuckets"],
                max_storage_bytes=limits["maxStorageBytes"],
            ),
            usage=Usage(
                buckets=usage["buckets"], stored_bytes=usage["storedBytes"], files=usage["files"]
            ),
        )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; `next_cursor` fetches the next (None on the last page)."""

    items: list[T]
    next_cursor: str | None
    prefixes: list[str] = field(default_factory=list)
    """File lists with a delimiter: the common prefixes rolled up on this page."""

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @classmethod
    def from_json(cls, body: Mapping[str, Any], item: Callable[[Mapping[str, Any]], T]) -> Page[T]:
        meta = body.get("meta") or {}
        return cls(
            items=[item(entry) for entry in body["data"]],
            next_cursor=meta.get("nextCursor"),
            prefixes=list(meta.get("prefixes") or []),
        )
