"""The interface a content backend implements (local disk, S3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from .models import Bucket, StoredBlob


@dataclass(frozen=True)
class GcReport:
    temp_files: int
    blobs: int


class Backend(Protocol):
    content_addressed: bool
    """True when equal contents share one blob (reference counted by the index)."""

    async def provision_bucket(self, bucket: Bucket) -> None:
        """Make the storage behind a new bucket; raise to mark the bucket failed."""

    async def delete_bucket(self, bucket: Bucket) -> None:
        """Remove the storage behind a bucket whose files the index has already dropped."""

    async def write(self, bucket: Bucket, key: str, chunks: AsyncIterator[bytes]) -> StoredBlob:
        """Store a stream durably and return its blob, held until `release_hold`.

        On any exception, including cancellation, nothing of the stream remains.
        """

    def release_hold(self, blob: StoredBlob) -> None:
        """The index has committed (or refused) the blob; it may be reaped when unreferenced."""

    async def read(self, blob_id: str, start: int, end: int) -> AsyncIterator[bytes]:
        """Open a blob and return an iterator over bytes [start, end).

        Opening happens before this returns, so a missing blob raises here, not mid-stream.
        """

    def reap(self, blob_id: str) -> None:
        """Delete a blob the index no longer references (called on the index's writer)."""

    async def collect_garbage(self, referenced: set[str]) -> GcReport:
        """Remove temp files and blobs outside `referenced` (no writes may be in flight)."""

    async def close(self) -> None: ...
