"""How a stored stream, a rename or a delete reaches the index, per kind of backend.

`BlobCommits` (content-addressed, local disk): the blob is durable before the index commit,
which alone makes it visible; blobs nobody references are reaped after commits.

`ObjectCommits` (key-addressed, S3): the object only becomes visible when it is published,
so publish and commit happen under the key's lock, with the quota reserved in the index
first. A crash between publish and commit leaves a reservation that `heal` settles: the
object in the cluster is committed if it is the one reserved, else the reservation goes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .backend import Backend
from .errors import BackendUnavailable, BucketNotActive, BucketNotFound, FileExists, FileNotFound
from .faults import Faults
from .index import Index
from .locks import KeyLocks
from .models import Bucket, Condition, FileRecord, StoredBlob, WriteOptions

if TYPE_CHECKING:
    from .s3 import S3Backend

logger = logging.getLogger("bucketd.engine")
Clock = Callable[[], str]


class BlobCommits:
    def __init__(self, index: Index, backend: Backend, faults: Faults, clock: Clock) -> None:
        self._index = index
        self._backend = backend
        self._faults = faults
        self._clock = clock

    async def commit(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord:
        committed = False
        try:
            self._faults.hit("put.after_blob")
            record = await self._index.commit_file(
                bucket.id,
                key,
                blob,
                content_type,
                self._clock(),
                quota,
                metadata=options.metadata,
                checksum=options.checksum() if options.checksum else None,
                condition=options.condition,
            )
            committed = True
            self._faults.hit("put.after_commit")
        finally:
            reap_again = self._backend.release_hold(blob)
            if (reap_again or not committed) and blob.inline is None:
                await self._index.reap([blob.blob_id])
        return record

    async def update(
        self, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord:
        return await self._index.update_file(record.bucket_id, record.key, new_key, content_type)

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        content_type: str,
        metadata: str | None,
        quota: int,
        condition: Condition | None,
    ) -> FileRecord:
        """A copy shares the blob: one more reference, no bytes moved."""
        return await self._index.copy_file(
            source, bucket.id, key, content_type, metadata, self._clock(), quota, condition
        )

    async def delete(self, bucket_id: str, key: str) -> None:
        await self._index.delete_file(bucket_id, key)

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None:
        await self._index.delete_bucket(bucket.id, force)

    async def heal(self, older_than: float) -> None:
        """Nothing to settle: commits of blobs are single transactions."""


class ObjectCommits:
    def __init__(
        self,
        index: Index,
        backend: S3Backend,
        faults: Faults,
        clock: Clock,
        spawn: Callable[[Awaitable[None]], None],
    ) -> None:
        self._index = index
        self._backend = backend
        self._faults = faults
        self._clock = clock
        self._spawn = spawn
        self._locks = KeyLocks()

    async def commit(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord:
        try:
            async with self._locks.hold(bucket.id, key):
                token = uuid.uuid4().hex
                await self._index.reserve(
                    token, bucket.id, key, blob, content_type, quota, time.time(), options.condition
                )
                try:
                    self._faults.hit("put.after_blob")
                    published = await self._backend.publish(bucket, key, content_type, blob)
                except BaseException:
                    await self._index.release_reservation(token)
                    raise
                self._faults.hit("put.after_publish")
                record = await self._index.commit_file(
                    bucket.id,
                    key,
                    published,
                    content_type,
                    self._clock(),
                    quota,
                    token,
                    metadata=options.metadata,
                    checksum=options.checksum() if options.checksum else None,
                )
                self._faults.hit("put.after_commit")
                return record
        finally:
            await self._backend.discard(blob)

    async def update(
        self, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord:
        if new_key is None or new_key == record.key:
            return await self._index.update_file(record.bucket_id, record.key, None, content_type)
        async with self._locks.hold(record.bucket_id, record.key, new_key):
            if await self._index.get_file(record.bucket_id, new_key) is not None:
                raise FileExists("a file with that key already exists")
            current = await self._index.get_file(record.bucket_id, record.key)
            if current is None:
                raise FileNotFound("file not found")
            copied = await self._backend.copy_object(current, new_key)
            try:
                updated = await self._index.update_file(
                    record.bucket_id, record.key, new_key, content_type, copied
                )
            except BaseException:
                await self._backend.delete_object(_at(current, new_key))
                raise
            await self._delete_object_quietly(current)
            return updated

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        content_type: str,
        metadata: str | None,
        quota: int,
        condition: Condition | None,
    ) -> FileRecord:
        """A server-side copy in the cluster, published and committed under the key's lock."""
        async with self._locks.hold(bucket.id, key):
            token = uuid.uuid4().hex
            reserved = StoredBlob("pending", source.size, source.sha256)
            await self._index.reserve(
                token, bucket.id, key, reserved, content_type, quota, time.time(), condition
            )
            try:
                copied = await self._backend.copy_object(source, key, bucket.location)
            except BaseException:
                await self._index.release_reservation(token)
                raise
            return await self._index.commit_file(
                bucket.id,
                key,
                copied,
                content_type,
                self._clock(),
                quota,
                token,
                metadata=metadata,
                checksum=source.checksum,
            )

    async def delete(self, bucket_id: str, key: str) -> None:
        async with self._locks.hold(bucket_id, key):
            record = await self._index.get_file(bucket_id, key)
            if record is None:
                raise FileNotFound("file not found")
            await self._index.delete_file(bucket_id, key)
            await self._delete_object_quietly(record)

    async def _delete_object_quietly(self, record: FileRecord) -> None:
        """The index no longer names the object; a failure here leaves an orphan only."""
        try:
            await self._backend.delete_object(record)
        except (BackendUnavailable, FileNotFound) as exc:
            logger.warning("object %r left in %s: %s", record.key, record.location, exc)

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None:
        await self._index.delete_bucket(bucket.id, force)
        if bucket.status == "failed":
            return
        try:
            await self._backend.delete_bucket(bucket)
        except BackendUnavailable as exc:
            logger.warning("deleting %s in the cluster failed (%s); retrying", bucket.location, exc)
            self._spawn(self._delete_bucket_later(bucket))

    async def _delete_bucket_later(self, bucket: Bucket, attempts: int = 60) -> None:
        for attempt in range(attempts):
            await asyncio.sleep(min(60.0, 2.0**attempt))
            try:
                await self._backend.delete_bucket(bucket)
                return
            except BackendUnavailable:
                continue

    async def heal(self, older_than: float) -> None:
        """Settle reservations older than `older_than` and abort stale multipart uploads."""
        for reservation in await self._index.reservations(older_than):
            if reservation.location is None:
                await self._index.release_reservation(reservation.token)
                continue
            async with self._locks.hold(reservation.bucket_id, reservation.key):
                etag = await self._backend.head(reservation.location, reservation.key)
                if etag != reservation.backend_etag:
                    await self._index.release_reservation(reservation.token)
                    continue
                blob = StoredBlob(
                    f"s3:{uuid.uuid4().hex}",
                    reservation.size,
                    reservation.sha256,
                    backend_etag=etag,
                )
                try:
                    await self._index.commit_file(
                        reservation.bucket_id,
                        reservation.key,
                        blob,
                        reservation.content_type,
                        self._clock(),
                        0,
                        reservation.token,
                    )
                except (BucketNotFound, BucketNotActive):
                    await self._index.release_reservation(reservation.token)
                    continue
                logger.info("committed %r, published before a crash", reservation.key)
        locations = await self._index.locations()
        await self._backend.abort_stale_uploads(locations, older_than)


def _at(record: FileRecord, key: str) -> FileRecord:
    return FileRecord(
        record.bucket_id,
        key,
        record.size,
        record.content_type,
        record.uploaded_at,
        record.sha256,
        record.blob_id,
        None,
        record.location,
    )
