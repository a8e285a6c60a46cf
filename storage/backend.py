"""The interface a content backend implements (local disk, S3).

The minimal interface is provision/delete a bucket, write a stream, read a byte range.
Two kinds differ in how a write becomes visible and how content goes away:

- content-addressed (local): `write` stores the blob durably under its hash and holds it;
  the index commit makes it visible; unreferenced blobs are reaped after commits.
- key-addressed (S3): `write` stages the content, `publish` makes it the object at its key,
  `discard` aborts a staged write; deletes and renames act on objects explicitly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from .models import Bucket, FileRecord, StoredBlob


@dataclass(frozen=True)
class GcReport:
    temp_files: int
    blobs: int


class Backend(Protocol):
    content_addressed: bool
    """True when equal contents share one blob (reference counted by the index)."""

    def location_for(self, bucket: Bucket) -> str | None:
        """Where a new bucket will live in this backend (stored with the bucket)."""

    def check_key(self, key: str) -> None:
        """Raise InvalidKey for a key this backend cannot store faithfully."""

    async def provision_bucket(self, bucket: Bucket) -> None:
        """Make the storage behind a new bucket; raise to mark the bucket failed."""

    async def delete_bucket(self, bucket: Bucket) -> None:
        """Remove the storage behind a bucket whose files the index has already dropped."""

    async def write(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        chunks: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        """Store (or stage) a stream. On any exception, cancellation included, nothing of it
        remains visible. With `md5`, the blob carries the content's MD5 (the S3 ETag)."""

    async def publish(
        self, bucket: Bucket, key: str, content_type: str, blob: StoredBlob
    ) -> StoredBlob:
        """Make a written blob the content at `key` (a no-op when content-addressed)."""

    async def discard(self, blob: StoredBlob) -> None:
        """Give up a written, unpublished blob."""

    def release_hold(self, blob: StoredBlob) -> bool:
        """The index has committed (or refused) the blob; it may be reaped when unreferenced.

        True when a reap came while the blob was held and must be tried again now.
        """

    async def read(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        """Open a file's content and return an iterator over bytes [start, end).

        Opening happens before this returns, so a missing blob raises here, not mid-stream.
        """

    def reap(self, blob_id: str) -> None:
        """Delete a blob the index no longer references (called on the index's writer)."""

    async def collect_garbage(self, referenced: set[str]) -> GcReport:
        """Remove temp files and blobs outside `referenced` (no writes may be in flight)."""

    async def close(self) -> None: ...
