"""How a stream, a copy, a rename or a delete reaches the backend and the index, by the
backend's capability (`backend.py`).

`BlobCommits` (a `BlobStore`, local disk): the blob is durable before the index commit,
which alone makes it visible; blobs nobody references are reaped after commits. Small
contents may live in the index itself (`storage.inline_max_bytes`).

`ObjectCommits` (an `ObjectStore`, S3): the object only becomes visible when it is
published, so publish and commit happen under the key's lock, with the quota reserved in
the index first. A crash between publish and commit leaves a reservation that `heal`
settles: the object in the cluster is committed if it is the one reserved, else the
reservation goes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Protocol

from . import ids
from .backend import Backend, BlobStore, ObjectStore
from .clock import now_iso
from .errors import BackendUnavailable, BucketNotActive, BucketNotFound, FileExists, FileNotFound
from .faults import Faults
from .index import Index, buckets, files, maintenance
from .limits import prepend
from .locks import KeyLocks
from .models import Bucket, Condition, FileRecord, StoredBlob, WriteOptions
from .object_lock import Lock
from .tasks import Tasks

logger = logging.getLogger("bucketd.engine")


def new_version() -> str:
    """A version's id and order: a ULID, unique and time-ordered."""
    return ids.new_id("")


class Commits(Protocol):
    versions: bool
    """Whether the backend keeps versions (content-addressed blobs do; S3 objects not yet)."""

    @property
    def backend(self) -> Backend: ...

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
        content_type: str,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord: ...

    async def update(
        self, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord: ...

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        content_type: str,
        metadata: str | None,
        quota: int,
        condition: Condition | None,
        lock: Lock | None = None,
    ) -> FileRecord: ...

    async def delete(
        self,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        expected: tuple[str, str] | None = None,
    ) -> FileRecord:
        """Delete the current version (a marker where versioned); what was deleted.
        `expected`: only if the current version is still that (upload time, ETag)."""

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None: ...

    async def heal(self, older_than: float) -> None:
        """Settle what writes interrupted before `older_than` left behind."""

    async def problems(self) -> list[str]:
        """What the backend holds that the index does not know, and the reverse."""


class BlobCommits:
    versions = True

    def __init__(self, index: Index, backend: BlobStore, faults: Faults, inline_max: int) -> None:
        self._index = index
        self.backend = backend
        self._faults = faults
        self._inline_max = inline_max

    async def store(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        stream: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        if self._inline_max <= 0:
            return await self.backend.write(bucket, key, content_type, stream, md5)
        buffer = bytearray()
        async for chunk in stream:
            buffer += chunk
            if len(buffer) > self._inline_max:
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
        content_type: str,
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
                content_type,
                now_iso(),
                quota,
                metadata=options.metadata,
                checksum=options.checksum() if options.checksum else None,
                condition=options.condition,
                upload_id=options.upload_id,
                version=new_version(),
                lock=options.lock,
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
        self, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord:
        return await self._index.run(
            files.update_file,
            record.bucket_id,
            record.key,
            new_key,
            content_type,
            version=new_version(),
            at=now_iso(),
        )

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        content_type: str,
        metadata: str | None,
        quota: int,
        condition: Condition | None,
        lock: Lock | None = None,
    ) -> FileRecord:
        """A copy shares the blob: one more reference, no bytes moved."""
        return await self._index.run(
            files.copy_file,
            source,
            bucket.id,
            key,
            content_type,
            metadata,
            now_iso(),
            quota,
            condition,
            version=new_version(),
            lock=lock,
        )

    async def delete(
        self,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        expected: tuple[str, str] | None = None,
    ) -> FileRecord:
        return await self._index.run(
            files.delete_file, bucket_id, key, new_version(), now_iso(), must_exist, expected
        )

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None:
        await self._index.run(buckets.delete_bucket, bucket.id, force, now_iso())

    async def heal(self, older_than: float) -> None:
        """Nothing to settle: commits of blobs are single transactions."""

    async def problems(self) -> list[str]:
        referenced = await self._index.run(maintenance.blob_ids)
        on_disk = self.backend.blob_ids_on_disk()
        found = [f"blob {b}: referenced but missing on disk" for b in referenced - on_disk]
        found += [f"blob {b}: on disk but referenced by no file" for b in on_disk - referenced]
        found += [f"temp file {path.name} left behind" for path in self.backend.temp_files()]
        return found


class ObjectCommits:
    versions = False

    def __init__(self, index: Index, backend: ObjectStore, faults: Faults, tasks: Tasks) -> None:
        self._index = index
        self.backend = backend
        self._faults = faults
        self._tasks = tasks
        self._locks = KeyLocks()

    async def store(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        stream: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        return await self.backend.write(bucket, key, content_type, stream, md5)

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
                await self._index.run(
                    files.reserve,
                    token,
                    bucket.id,
                    key,
                    blob,
                    content_type,
                    quota,
                    time.time(),
                    options.condition,
                    options.upload_id,
                )
                try:
                    self._faults.hit("put.after_blob")
                    published = await self.backend.publish(bucket, key, content_type, blob)
                except BaseException:
                    await self._index.run(files.release_reservation, token)
                    raise
                self._faults.hit("put.after_publish")
                record = await self._index.run(
                    files.commit_file,
                    bucket.id,
                    key,
                    published,
                    content_type,
                    now_iso(),
                    quota,
                    token,
                    metadata=options.metadata,
                    checksum=options.checksum() if options.checksum else None,
                    upload_id=options.upload_id,
                    lock=options.lock,
                )
                self._faults.hit("put.after_commit")
                return record
        finally:
            await self.backend.discard(blob)

    async def update(
        self, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord:
        if new_key is None or new_key == record.key:
            return await self._index.run(
                files.update_file, record.bucket_id, record.key, None, content_type
            )
        async with self._locks.hold(record.bucket_id, record.key, new_key):
            if await self._index.run(files.get_file, record.bucket_id, new_key) is not None:
                raise FileExists("a file with that key already exists")
            current = await self._index.run(files.get_file, record.bucket_id, record.key)
            if current is None:
                raise FileNotFound("file not found")
            copied = await self.backend.copy_object(current, new_key)
            try:
                updated = await self._index.run(
                    files.update_file, record.bucket_id, record.key, new_key, content_type, copied
                )
            except BaseException:
                await self.backend.delete_object(replace(current, key=new_key, backend_etag=None))
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
        lock: Lock | None = None,
    ) -> FileRecord:
        """A server-side copy in the cluster, published and committed under the key's lock."""
        async with self._locks.hold(bucket.id, key):
            token = uuid.uuid4().hex
            reserved = StoredBlob(blob_id="pending", size=source.size, sha256=source.sha256)
            await self._index.run(
                files.reserve,
                token,
                bucket.id,
                key,
                reserved,
                content_type,
                quota,
                time.time(),
                condition,
            )
            try:
                copied = await self.backend.copy_object(source, key, bucket.location)
            except BaseException:
                await self._index.run(files.release_reservation, token)
                raise
            return await self._index.run(
                files.commit_file,
                bucket.id,
                key,
                copied,
                content_type,
                now_iso(),
                quota,
                token,
                metadata=metadata,
                checksum=source.checksum,
                lock=lock,
            )

    async def delete(
        self,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        expected: tuple[str, str] | None = None,
    ) -> FileRecord:
        async with self._locks.hold(bucket_id, key):
            record = await self._index.run(files.get_file, bucket_id, key)
            if record is None:
                raise FileNotFound("file not found")
            await self._index.run(files.delete_file, bucket_id, key, "", "", must_exist, expected)
            await self._delete_object_quietly(record)
            return record

    async def _delete_object_quietly(self, record: FileRecord) -> None:
        """The index no longer names the object; a failure here leaves an orphan only."""
        try:
            await self.backend.delete_object(record)
        except (BackendUnavailable, FileNotFound) as exc:
            logger.warning("object %r left in %s: %s", record.key, record.location, exc)

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None:
        await self._index.run(buckets.delete_bucket, bucket.id, force, now_iso())
        if bucket.status == "failed":
            return
        try:
            await self.backend.delete_bucket(bucket)
        except BackendUnavailable as exc:
            logger.warning("deleting %s in the cluster failed (%s); retrying", bucket.location, exc)
            self._tasks.spawn(self._delete_bucket_later(bucket))

    async def _delete_bucket_later(self, bucket: Bucket, attempts: int = 60) -> None:
        for attempt in range(attempts):
            await asyncio.sleep(min(60.0, 2.0**attempt))
            try:
                await self.backend.delete_bucket(bucket)
                return
            except BackendUnavailable:
                continue

    async def heal(self, older_than: float) -> None:
        """Settle reservations older than `older_than` and abort stale multipart uploads."""
        for reservation in await self._index.run(files.reservations, older_than):
            if reservation.location is None:
                await self._index.run(files.release_reservation, reservation.token)
                continue
            async with self._locks.hold(reservation.bucket_id, reservation.key):
                etag = await self.backend.head(reservation.location, reservation.key)
                if etag != reservation.backend_etag:
                    await self._index.run(files.release_reservation, reservation.token)
                    continue
                blob = StoredBlob(
                    blob_id=f"s3:{uuid.uuid4().hex}",
                    size=reservation.size,
                    sha256=reservation.sha256,
                    backend_etag=etag,
                )
                try:
                    await self._index.run(
                        files.commit_file,
                        reservation.bucket_id,
                        reservation.key,
                        blob,
                        reservation.content_type,
                        now_iso(),
                        0,
                        reservation.token,
                    )
                except (BucketNotFound, BucketNotActive):
                    await self._index.run(files.release_reservation, reservation.token)
                    continue
                logger.info("committed %r, published before a crash", reservation.key)
        locations = await self._index.run(maintenance.locations)
        await self.backend.abort_stale_uploads(locations, older_than)

    async def problems(self) -> list[str]:
        """Objects live in the cluster; the index's own counters are all there is to check."""
        return []
