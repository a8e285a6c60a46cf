"""How a stream, a copy, a rename or a delete reaches the backend and the index, by the
backend's capability (`protocol.py`).

`BlobCommits` (a `BlobStore`, local disk): the blob is durable before the index commit,
which alone makes it visible; blobs nobody references are reaped after commits. Small
contents may live in the index itself (`storage.inline_max_bytes`).

`ObjectCommits` (an `ObjectStore`, S3) is in `s3/commits.py`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Protocol

from storage import sse_c
from storage.attributes import Attributes
from storage.backends.protocol import Backend, BlobStore
from storage.faults import Faults
from storage.index import Index, buckets, files, maintenance, restores, snapshots
from storage.models import (
    Bucket,
    Condition,
    DeleteCondition,
    FileRecord,
    Snapshot,
    StoredBlob,
    WriteOptions,
)
from storage.rules import ids
from storage.rules.clock import Clock
from storage.rules.events import Cause
from storage.rules.limits import prepend
from storage.rules.rereads import Replaced

logger = logging.getLogger("bucketd.engine")
INLINE_PAGE = 100
"""Inline contents hashed per index read by the check (at most 100 times the limit)."""


def new_version() -> str:
    """A version's id and order: a ULID, unique and time-ordered."""
    return ids.new_id("")


class Commits(Protocol):
    @property
    def backend(self) -> Backend: ...

    @property
    def inline_max(self) -> int:
        """Contents up to this size are written into the index (0: none are)."""

    async def store(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        stream: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob: ...

    async def commit(
        self,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord: ...

    async def update(
        self, bucket: Bucket, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord: ...

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        quota: int,
        condition: Condition | None,
    ) -> FileRecord: ...

    async def delete(
        self,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        condition: DeleteCondition | None = None,
        cause: Cause = "ObjectRemoved",
    ) -> FileRecord:
        """Delete the current version (a marker where versioned); what was deleted.
        `condition`: only if the current version satisfies it (FileNotFound without one); `cause`
        names the event (a request, or a lifecycle rule)."""

    async def remove_version(
        self,
        bucket_id: str,
        key: str,
        version_id: str | None,
        at: float,
        bypass: bool = False,
        cause: Cause = "ObjectRemoved",
    ) -> FileRecord:
        """Delete one version for good (ObjectLocked while protected at `at`)."""

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None: ...

    async def heal(self, older_than: float) -> None:
        """Settle what writes interrupted before `older_than` left behind."""

    async def replaced(self, record: FileRecord) -> Replaced:
        """After `record`'s content would not open: what replaced it (`rules/rereads.py`)."""

    async def retry_reaps(self) -> None:
        """Reap again what could not be reaped while another process held it."""

    async def problems(self) -> list[str]:
        """What the backend holds that the index does not know, and the reverse."""

    def leftovers(self) -> list[str]:
        """What an interrupted write left that the next start (or `bucketd gc`) removes:
        not a problem."""

    # Snapshots (`services/snapshots.py`): what keeps their contents alive is the backend's.

    async def take_snapshot(
        self, bucket: Bucket, snapshot_id: str, name: str | None
    ) -> Snapshot: ...

    async def take_server_snapshot(self, snapshot_id: str, name: str | None) -> Snapshot: ...

    async def restore_snapshot(self, snapshot_id: str, bucket: Bucket, quota: int) -> str:
        """Restore a bucket snapshot into its bucket (`bucket`); the bucket's id."""

    async def fork_snapshot(
        self, snapshot_id: str, bucket: Bucket, max_buckets: int, quota: int
    ) -> None:
        """Make `bucket` (not yet anywhere) hold the snapshot's versions and settings."""

    async def restore_server_snapshot(self, snapshot_id: str, drop_locked: bool) -> None: ...

    async def delete_snapshot(self, snapshot_id: str) -> None: ...


def verified(attrs: Attributes, options: WriteOptions) -> Attributes:
    """The attributes a streamed write commits: with the checksum it verified, if any;
    an SSE-C write's sealed under its customer's key."""
    if options.checksum is not None:
        attrs = replace(attrs, checksum=options.checksum())
    if options.customer_key is None:
        return attrs
    return replace(attrs, checksum=sse_c.seal_checksum(attrs.checksum, options.customer_key))


class BlobCommits:
    def __init__(
        self, index: Index, backend: BlobStore, faults: Faults, inline_max: int, clock: Clock
    ) -> None:
        self._index = index
        self._clock = clock
        self.backend = backend
        self._faults = faults
        self.inline_max = inline_max

    async def store(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        stream: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        if self.inline_max <= 0:
            return await self.backend.write(bucket, key, content_type, stream, md5)
        buffer = bytearray()
        async for chunk in stream:
            buffer += chunk
            if len(buffer) > self.inline_max:
                rest = prepend(bytes(buffer), stream)
                return await self.backend.write(bucket, key, content_type, rest, md5)
        data = bytes(buffer)
        sha = hashlib.sha256(data).hexdigest()
        digest = hashlib.md5(data).hexdigest() if md5 else None
        return StoredBlob(blob_id=sha, size=len(data), sha256=sha, inline=data, md5=digest)

    async def commit(
        self,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord:
        committed = False
        try:
            self._faults.hit("put.after_blob")
            record = await self._index.run(
                files.commit_file,
                bucket.id,
                key,
                blob,
                verified(attrs, options),
                self._clock.iso(),
                quota,
                condition=options.condition,
                upload_id=options.upload_id,
                version=new_version(),
                event=options.event,
            )
            committed = True
            self._faults.hit("put.after_commit")
        finally:
            if blob.inline is None:
                reap_again = self.backend.release_hold(blob)
                if reap_again or not committed:
                    await self._index.run(maintenance.release, [blob.blob_id])
        return record

    async def update(
        self, bucket: Bucket, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord:
        return await self._index.run(
            files.update_file,
            record.bucket_id,
            record.key,
            new_key,
            content_type,
            version=new_version(),
            at=self._clock.iso(),
        )

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        quota: int,
        condition: Condition | None,
    ) -> FileRecord:
        """A copy shares the blob: one more reference, no bytes moved."""
        return await self._index.run(
            files.copy_file,
            source,
            bucket.id,
            key,
            attrs,
            self._clock.iso(),
            quota,
            condition,
            version=new_version(),
        )

    async def delete(
        self,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        condition: DeleteCondition | None = None,
        cause: Cause = "ObjectRemoved",
    ) -> FileRecord:
        return await self._index.run(
            files.delete_file,
            bucket_id,
            key,
            new_version(),
            self._clock.iso(),
            must_exist,
            condition,
            cause,
        )

    async def remove_version(
        self,
        bucket_id: str,
        key: str,
        version_id: str | None,
        at: float,
        bypass: bool = False,
        cause: Cause = "ObjectRemoved",
    ) -> FileRecord:
        """The blob goes with its last reference, reaped after the commit."""
        return await self._index.run(
            files.delete_version, bucket_id, key, version_id, at, bypass, cause
        )

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None:
        await self._index.run(buckets.delete_bucket, bucket.id, force, self._clock.iso())

    async def heal(self, older_than: float) -> None:
        """Nothing to settle: commits of blobs are single transactions."""

    async def replaced(self, record: FileRecord) -> Replaced:
        """A blob is replaced in the commit's transaction: nothing is ever in flight."""
        return "none"

    async def retry_reaps(self) -> None:
        held = self.backend.held_elsewhere()
        if held:
            await self._index.run(maintenance.release, held)

    async def problems(self) -> list[str]:
        referenced = await self._index.run(maintenance.blob_ids)
        on_disk = self.backend.blob_ids_on_disk()
        found = [f"blob {b}: referenced but missing on disk" for b in referenced - on_disk]
        found += [f"blob {b}: on disk but referenced by no file" for b in on_disk - referenced]
        return found + await self._inline_problems()

    async def _inline_problems(self) -> list[str]:
        """Contents kept inline are the index's own bytes, which the plain check vouches
        for: each is hashed against its id (its SHA-256), a page at a time."""
        found: list[str] = []
        after = ""
        while True:
            page = await self._index.run(maintenance.inline_after, after, INLINE_PAGE)
            for blob_id, size, data in page:
                if len(data) != size:
                    found.append(f"blob {blob_id}: {len(data)} bytes inline, its row says {size}")
                elif hashlib.sha256(data).hexdigest() != blob_id:
                    found.append(f"blob {blob_id}: the content inline does not hash to its id")
            if len(page) < INLINE_PAGE:
                return found
            after = page[-1][0]

    def leftovers(self) -> list[str]:
        return [f"temp file {path.name}" for path in self.backend.temp_files()]

    # Snapshots: index rows alone; each row's reference keeps its blob (no byte copied).

    async def take_snapshot(self, bucket: Bucket, snapshot_id: str, name: str | None) -> Snapshot:
        return await self._index.run(
            snapshots.create_snapshot, snapshot_id, bucket.id, name, self._clock.iso()
        )

    async def take_server_snapshot(self, snapshot_id: str, name: str | None) -> Snapshot:
        return await self._index.run(
            snapshots.create_server_snapshot, snapshot_id, name, self._clock.iso()
        )

    async def restore_snapshot(self, snapshot_id: str, bucket: Bucket, quota: int) -> str:
        restored = await self._index.run(
            restores.restore_snapshot, snapshot_id, self._clock.iso(), quota
        )
        return restored.bucket_id

    async def fork_snapshot(
        self, snapshot_id: str, bucket: Bucket, max_buckets: int, quota: int
    ) -> None:
        await self._index.run(restores.fork_snapshot, snapshot_id, bucket, max_buckets, quota)

    async def restore_server_snapshot(self, snapshot_id: str, drop_locked: bool) -> None:
        await self._index.run(
            restores.restore_server_snapshot, snapshot_id, drop_locked, self._clock.iso()
        )

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await self._index.run(snapshots.delete_snapshot, snapshot_id)
