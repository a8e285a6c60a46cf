"""The metadata index interface.

Every SQL statement of bucketd lives behind this interface; `sqlite_index.py` implements it
for the embedded default. Methods speak in records and domain errors, and each write is one
transaction: counters (bucket file counts, organization usage, blob reference counts) change
in the same transaction as the rows they count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypedDict

from .models import (
    ApiKey,
    Bucket,
    Condition,
    FileRecord,
    MultipartUpload,
    Organization,
    Page,
    Part,
    Reservation,
    StorageStats,
    StoredBlob,
)

Reaper = Callable[[str], None]
"""Called with a blob id once no file references it any more (and the commit is durable)."""


class BucketChanges(TypedDict, total=False):
    """Columns a PATCH may change; a None limit or allow-list means "back to the default"."""

    name: str
    max_upload_bytes: int | None
    allowed_content_types: tuple[str, ...] | None


class Index(Protocol):
    async def close(self) -> None: ...

    # organizations
    async def count_organizations(self) -> int: ...
    async def create_organization(self, org: Organization) -> None: ...
    async def get_organization(self, org_id: str) -> Organization | None: ...

    # API keys
    async def create_key(
        self, key: ApiKey, secret_hash: bytes, secret_sealed: bytes | None = None
    ) -> None: ...
    async def find_key(self, secret_hash: bytes) -> tuple[ApiKey, bytes] | None: ...
    async def find_access_key(self, access_key_id: str) -> tuple[ApiKey, bytes] | None:
        """An S3 credential and its sealed secret."""

    async def get_key(self, org_id: str, key_id: str) -> ApiKey | None: ...
    async def list_keys(
        self, org_id: str, bucket_id: str | None, after: str | None, limit: int
    ) -> list[ApiKey]: ...
    async def revoke_key(self, org_id: str, key_id: str, at: str) -> None:
        """Revoke, and tell every process watching revocations (`watch_revocations`)."""

    async def watch_revocations(self, forget: Callable[[str], None]) -> None:
        """Call `forget` with the id of every key revoked by any process, until cancelled.
        Returns at once where there is no other process to hear from (SQLite)."""

    # buckets
    async def insert_bucket(
        self,
        bucket: Bucket,
        max_buckets: int,
        own_max_upload_bytes: int | None,
        own_allowed_content_types: tuple[str, ...] | None,
    ) -> None:
        """Insert unless the organization holds `max_buckets` already; None limits follow
        the configured defaults."""

    async def get_bucket(self, bucket_id: str) -> Bucket | None: ...
    async def get_bucket_by_name(self, org_id: str, name: str) -> Bucket | None: ...
    async def list_buckets(
        self, org_id: str, only_id: str | None, after: str | None, limit: int
    ) -> list[Bucket]: ...
    async def buckets_with_status(self, status: str) -> list[Bucket]: ...
    async def update_bucket(self, bucket_id: str, changes: BucketChanges) -> None: ...
    async def claim_provisioning(
        self, owner: str, now: float, until: float, bucket_id: str | None = None
    ) -> Bucket | None:
        """Take a lease until `until` on a provisioning bucket (that one, or any) whose lease
        is free or ran out before `now`; None when there is none to take."""

    async def release_claims(self) -> None:
        """Drop every lease: at start-up, when this process is the only one (SQLite)."""

    async def set_bucket_status(self, bucket_id: str, status: str, reason: str | None) -> None: ...
    async def delete_bucket(self, bucket_id: str, force: bool) -> None: ...

    # files
    async def stats(self) -> StorageStats: ...
    def observe_writes(self, observe: Callable[[float], None]) -> None:
        """Have `observe` called with the seconds each write waited for its commit."""
        ...

    async def get_file(self, bucket_id: str, key: str) -> FileRecord | None: ...
    async def file_size(self, bucket_id: str, key: str) -> int | None:
        """The size of the file at `key`, None when there is none (the quota check)."""
        ...

    async def read_inline(self, blob_id: str) -> bytes | None: ...
    async def commit_file(
        self,
        bucket_id: str,
        key: str,
        blob: StoredBlob,
        content_type: str,
        uploaded_at: str,
        max_storage_bytes: int,
        reservation: str | None = None,
        metadata: str | None = None,
        checksum: str | None = None,
        condition: Condition | None = None,
    ) -> FileRecord:
        """Point the key at the blob. With a reservation, its quota was checked already and
        the reservation is dropped in the same transaction. A `condition` that does not hold
        raises PreconditionFailed and changes nothing."""

    async def copy_file(
        self,
        source: FileRecord,
        bucket_id: str,
        key: str,
        content_type: str,
        metadata: str | None,
        uploaded_at: str,
        max_storage_bytes: int,
        condition: Condition | None = None,
    ) -> FileRecord:
        """Point `key` at the blob `source` names (content-addressed backends)."""

    async def set_md5(self, bucket_id: str, key: str, blob_id: str, md5: str) -> None: ...

    async def reserve(
        self,
        token: str,
        bucket_id: str,
        key: str,
        blob: StoredBlob,
        content_type: str,
        max_storage_bytes: int,
        now: float,
        condition: Condition | None = None,
    ) -> None:
        """Hold quota for content about to become visible in the backend (402 past it)."""

    async def release_reservation(self, token: str) -> None: ...
    async def reservations(self, created_before: float) -> list[Reservation]: ...
    async def list_files(
        self, bucket_id: str, prefix: str, delimiter: str, after: str | None, limit: int
    ) -> Page[FileRecord]: ...
    async def update_file(
        self,
        bucket_id: str,
        key: str,
        new_key: str | None,
        content_type: str | None,
        moved_blob: StoredBlob | None = None,
    ) -> FileRecord:
        """Rename and/or retype; `moved_blob` replaces the blob (a backend that copied)."""

    async def delete_file(self, bucket_id: str, key: str) -> None: ...

    # multipart uploads
    async def create_upload(self, upload: MultipartUpload) -> None: ...
    async def get_upload(self, upload_id: str) -> MultipartUpload | None: ...
    async def list_uploads(
        self, bucket_id: str, prefix: str, after: tuple[str, str] | None, limit: int
    ) -> list[MultipartUpload]: ...
    async def put_part(self, part: Part) -> None: ...
    async def list_parts(self, upload_id: str, after: int, limit: int) -> list[Part]: ...
    async def delete_upload(self, upload_id: str) -> None: ...
    async def upload_ids(self) -> set[str]: ...

    # blobs
    async def reap(self, blob_ids: list[str]) -> None: ...
    async def locations(self) -> list[str]:
        """The backend locations of every bucket that has one."""

    async def blob_ids(self) -> set[str]: ...
    async def check_consistency(self) -> list[str]: ...
