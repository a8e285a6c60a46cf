"""What a content backend implements: one core protocol and two capabilities.

`Backend` is the minimum (tusd's `DataStore`): provision and delete a bucket, write a
stream, read a byte range, collect garbage. How a write becomes visible and how content
goes away is a capability, and the engine's commit strategy (`commits.py`) is chosen by it:

- `BlobStore` (content-addressed, local disk): `write` stores the blob durably under its
  hash and holds it; the index commit makes it visible; unreferenced blobs are reaped after
  commits. Equal contents share one blob.
- `ObjectStore` (key-addressed, S3): `write` stages the content, `publish` makes it the
  object at its key, `discard` aborts a staged write; deletes, copies and renames act on
  objects explicitly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from storage.index.sql import Claim
from storage.models import Bucket, FileRecord, StoredBlob


@dataclass(frozen=True, kw_only=True)
class GcReport:
    temp_files: int
    blobs: int


class Backend(Protocol):
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

    async def read(self, record: FileRecord, start: int, end: int) -> AsyncIterator[bytes]:
        """Open a file's content and return an iterator over bytes [start, end).

        Opening happens before this returns, so a missing blob raises here, not mid-stream.
        """

    async def collect_garbage(self, referenced: set[str]) -> GcReport:
        """Remove temp files and blobs outside `referenced` (no writes may be in flight)."""

    async def check(self) -> None:
        """Raise BackendUnavailable unless the backend answers (for readiness)."""

    async def close(self) -> None: ...


class BlobStore(Backend, Protocol):
    """Content-addressed: the index references blobs by hash and counts the references."""

    def release_hold(self, blob: StoredBlob) -> bool:
        """The index has committed (or refused) the blob; it may be reaped when unreferenced.

        True when a reap came while the blob was held and must be tried again now.
        """

    def claim(self, blob_ids: list[str]) -> Claim:
        """Lock blobs that lost their last reference, to remove those still unreferenced
        (the index's `Reaper`, called once the commit is durable)."""

    def held_elsewhere(self) -> list[str]:
        """Blobs whose reap met another process's hold, to release again."""

    def blob_ids_on_disk(self) -> set[str]: ...
    def temp_files(self) -> list[Path]: ...


@dataclass(frozen=True)
class Fence:
    """What a publish may replace: the object the cluster held at its key (its ETag; None:
    none) while the write's reservation was live. A writer stalled past its lease (a
    pause, its index unreachable) may have had its reservation released and another write
    of the key published and committed since: its publish then fails (`WriteSettled`)
    instead of replacing that write's object under its committed record."""

    etag: str | None


class ObjectStore(Backend, Protocol):
    """Key-addressed: each file is an object at its key, published after it is staged."""

    def object_name(self, key: str, version: str | None) -> str:
        """The object a file (a named version: its own object) is stored under."""

    async def publish(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        blob: StoredBlob,
        fence: Fence | None = None,
    ) -> StoredBlob:
        """Make a staged blob the object at `key` (only over `fence`'s object, if given)."""

    async def discard(self, blob: StoredBlob) -> None:
        """Give up a staged, unpublished blob."""

    async def copy_object(
        self,
        source: FileRecord,
        key: str,
        location: str | None = None,
        fence: Fence | None = None,
    ) -> StoredBlob:
        """A server-side copy of `source` to `key` (in `location`, else the source's), over
        `fence`'s object only, when given (as `publish`)."""

    async def delete_object(self, record: FileRecord) -> None: ...

    async def head(self, location: str, key: str) -> str | None:
        """The backend's version tag of the object at `key`, None when there is none."""

    async def abort_stale_uploads(self, locations: list[str], older_than: float) -> int:
        """Abort the backend's own multipart uploads started before `older_than`."""

    @property
    def snapshots_location(self) -> str:
        """Where snapshots keep the copies of their contents (`s3/snapshots.py`)."""

    async def create_bucket(self, location: str) -> None:
        """Make the backend's bucket `location`; one already there is fine."""

    async def delete_prefix(self, location: str, prefix: str) -> None:
        """Delete every object of `location` whose name starts with `prefix`."""
