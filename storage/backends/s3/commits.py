"""How writes reach an S3 cluster (`ObjectStore`) and the index.

The object only becomes visible when it is published, so publish and commit happen under
the key's lock, with the quota reserved in the index first. The reservation is the write's
lease, renewed while it runs; a crash between publish and commit leaves one that lapses,
and the key's next reader or writer, or `heal`, settles it (`settle.py`): the object in
the cluster is committed if it is the one reserved, else the reservation goes.

Versions: where the bucket is versioned, each new named version is written to its own
object (`names.py`), so nothing a version points at is ever replaced; the null
version is the object under the key, replaced by the next null write. Deleting a version
deletes its object after the index commit (an object left by a crash there is an orphan,
never a record without its bytes).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

from storage import encryption
from storage.attributes import Attributes
from storage.backends.commits import new_version, verified
from storage.backends.protocol import Fence, ObjectStore
from storage.backends.s3 import names as object_names
from storage.backends.s3.locks import KeyLocks
from storage.backends.s3.settle import Replaced, Settler
from storage.backends.s3.snapshots import ClusterSnapshots, cluster_bucket
from storage.errors import (
    BackendUnavailable,
    FileExists,
    FileNotFound,
    WriteSettled,
)
from storage.faults import Faults
from storage.index import Index, buckets, files, maintenance, reservations, versions
from storage.index.reservations import Pending
from storage.models import (
    Bucket,
    Condition,
    DeleteCondition,
    FileRecord,
    Snapshot,
    StoredBlob,
    WriteOptions,
)
from storage.rules import events
from storage.rules.clock import Clock
from storage.rules.events import Cause
from storage.tasks import Tasks

logger = logging.getLogger("bucketd.engine")
COPY_LAPSED = "this copy's lease lapsed before its copy; retry"


class ObjectCommits:
    inline_max = 0
    """Every content is an object of the cluster (docs/architecture.md says why)."""

    def __init__(
        self,
        index: Index,
        backend: ObjectStore,
        faults: Faults,
        tasks: Tasks,
        clock: Clock,
        lease_seconds: float,
    ) -> None:
        self._index = index
        self._clock = clock
        self.backend = backend
        self._faults = faults
        self._tasks = tasks
        self._locks = KeyLocks()
        self._snapshots = ClusterSnapshots(index, backend, self._locks, clock, faults)
        self._settler = Settler(index, backend, clock, lease_seconds)

    def _name(self, bucket: Bucket, key: str) -> tuple[str, str]:
        """(version, object name) of a new version of `key` in `bucket`."""
        version = new_version()
        named = version if bucket.versioning == "Enabled" else None
        return version, self.backend.object_name(key, named)

    async def store(
        self,
        bucket: Bucket,
        key: str,
        content_type: str,
        stream: AsyncIterator[bytes],
        md5: bool = False,
    ) -> StoredBlob:
        _, name = self._name(bucket, key)
        blob = await self.backend.write(bucket, name, content_type, stream, md5)
        return blob if name == key else replace(blob, object_key=name)

    async def commit(
        self,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        blob: StoredBlob,
        quota: int,
        options: WriteOptions,
    ) -> FileRecord:
        try:
            async with self._locks.hold(bucket.id, key):
                token = uuid.uuid4().hex
                done = verified(attrs, options)
                pending = Pending(done, options.event, options.upload_id, blob.md5)
                until, current = await self._settler.reserve(
                    token, bucket, key, blob, pending, quota, options.condition
                )
                fence = self._settler.fence(bucket, blob.object_key or key, current)
                async with self._settler.held(token, bucket.id, key, until) as lease:
                    try:
                        self._faults.hit("put.after_blob")
                        await self._settler.ensure(lease, token, bucket.id, key)
                        self._faults.hit("put.before_publish")
                        published = await self._settler.publish(
                            token, bucket, key, attrs.content_type, blob, fence
                        )
                    except BaseException:
                        await self._settler.settle_own(token, bucket, key, blob, pending)
                        raise
                    self._faults.hit("put.after_publish")
                    version = object_names.version_of(blob.object_key) or new_version()
                    record = await self._commit(
                        token, bucket, key, published, pending, quota, version
                    )
                self._faults.hit("put.after_commit")
                return record
        finally:
            await self.backend.discard(blob)

    async def replaced(self, record: FileRecord) -> Replaced:
        return await self._settler.replaced(record)

    async def update(
        self, bucket: Bucket, record: FileRecord, new_key: str | None, content_type: str | None
    ) -> FileRecord:
        """A rename copies the object in the cluster, then commits; the old object goes
        unless it is a version the bucket keeps."""
        if new_key is None or new_key == record.key:
            return await self._index.run(
                files.update_file, record.bucket_id, record.key, None, content_type
            )
        async with self._locks.hold(record.bucket_id, record.key, new_key):
            taken = await self._index.run(files.get_file, record.bucket_id, new_key)
            if taken is not None and not taken.delete_marker:
                raise FileExists("a file with that key already exists")
            current = await self._index.run(files.get_file, record.bucket_id, record.key)
            if current is None or current.delete_marker:
                raise FileNotFound("file not found")
            null = await self._null_version(record.bucket_id, record.key)
            version, name = self._name(bucket, new_key)
            copied = await self.backend.copy_object(current, name)
            if name != new_key:
                copied = replace(copied, object_key=name)
            try:
                updated = await self._index.run(
                    files.update_file,
                    record.bucket_id,
                    record.key,
                    new_key,
                    content_type,
                    copied,
                    version,
                    self._clock.iso(),
                )
            except BaseException:
                placed = replace(current, key=new_key, object_key=copied.object_key)
                await self._delete_object_quietly(replace(placed, backend_etag=None))
                raise
            if bucket.versioning is None:
                await self._delete_object_quietly(current)
            else:
                await self._settle_null(record.bucket_id, record.key, null)
            return updated

    async def copy(
        self,
        source: FileRecord,
        bucket: Bucket,
        key: str,
        attrs: Attributes,
        quota: int,
        condition: Condition | None,
    ) -> FileRecord:
        """A server-side copy in the cluster, published and committed under the key's lock."""
        async with self._locks.hold(bucket.id, key):
            token = uuid.uuid4().hex
            version, name = self._name(bucket, key)
            object_key = None if name == key else name
            reserved = StoredBlob(
                blob_id="pending",
                size=encryption.stored_size(source),  # a settler's commit derives the rest
                sha256=source.sha256,
                backend_etag=_copy_etag(source),
                object_key=object_key,
            )
            pending = Pending(attrs, events.COPY)
            until, current = await self._settler.reserve(
                token, bucket, key, reserved, pending, quota, condition
            )
            fence = self._settler.fence(bucket, name, current)
            origin = source

            async def put(over: Fence | None) -> StoredBlob:
                try:
                    return await self.backend.copy_object(origin, name, bucket.location, over)
                except FileNotFound:
                    if origin is source:
                        raise
                    # a settler met this write's lease lapsed and removed its staged object
                    raise WriteSettled(COPY_LAPSED) from None

            async with self._settler.held(token, bucket.id, key, until) as lease:
                try:
                    await self._settler.ensure(lease, token, bucket.id, key)
                    if reserved.backend_etag is None:
                        origin = await self._stage(token, source, bucket)
                        reserved = replace(reserved, backend_etag=origin.backend_etag)
                        await self._settler.ensure(lease, token, bucket.id, key)
                    self._faults.hit("copy.before_copy")
                    copied = await self._settler.fenced(token, bucket, key, name, fence, put)
                except BaseException:
                    await self._settler.settle_own(token, bucket, key, reserved, pending)
                    raise
                finally:
                    if origin is not source:
                        await self._delete_object_quietly(origin)
                self._faults.hit("copy.after_copy")
                copied = replace(copied, object_key=object_key)
                if copied.md5 != source.md5:  # a new ETag: the copy is one part
                    pending = replace(pending, attrs=replace(attrs, parts=None))
                return await self._commit(token, bucket, key, copied, pending, quota, version)

    async def _commit(
        self,
        token: str,
        bucket: Bucket,
        key: str,
        published: StoredBlob,
        pending: Pending,
        quota: int,
        version: str,
    ) -> FileRecord:
        """Commit a write (a publish or a copy) whose object is the key's in the cluster. Its
        reservation gone means its lease lapsed: another gateway committed it (its record is
        the answer), or released it while it stalled, and it then landed (it claims the key
        again, `Settler.recommit`)."""
        try:
            return await self._index.run(
                files.commit_file,
                bucket.id,
                key,
                published,
                pending.attrs,
                self._clock.iso(),
                quota,
                token,
                upload_id=pending.upload_id,
                version=version,
                event=pending.event,
            )
        except WriteSettled:
            found = await self._settler.settled(bucket.id, key, published)
            return found or await self._settler.recommit(bucket, key, published, pending, quota)

    async def _stage(self, token: str, source: FileRecord, bucket: Bucket) -> FileRecord:
        """`source` copied under a name of its own (`names.staging`), whose ETag the copy's
        reservation then names: a copy of it onto the key keeps that ETag, so whoever
        settles the write after its writer is gone can tell whether its copy landed (a
        multipart or encrypted source's copy gets an ETag known only once copied).
        WriteSettled when the lease lapsed and the reservation was settled meanwhile."""
        name = object_names.staging(token)
        staged = await self.backend.copy_object(source, name, bucket.location)
        placed = replace(
            source, location=bucket.location, object_key=name, backend_etag=staged.backend_etag
        )
        self._faults.hit("copy.after_staging")
        if not await self._index.run(reservations.expect, token, staged.backend_etag or ""):
            await self._delete_object_quietly(placed)
            raise WriteSettled(COPY_LAPSED)
        return placed

    async def delete(
        self,
        bucket_id: str,
        key: str,
        must_exist: bool = True,
        condition: DeleteCondition | None = None,
        cause: Cause = "ObjectRemoved",
    ) -> FileRecord:
        async with self._locks.hold(bucket_id, key), self._settler.claimed(bucket_id, key) as claim:
            null = await self._null_version(bucket_id, key)
            done = await self._index.run(
                files.delete_file,
                bucket_id,
                key,
                new_version(),
                self._clock.iso(),
                must_exist,
                condition,
                cause,
            )
            if not await claim.held():  # an orphan at worst, never a later write's loss
                logger.warning("a delete's object is left in the cluster (bucket %s)", bucket_id)
            elif done.delete_marker:  # versioned: every version stays, but a null one
                await self._settle_null(bucket_id, key, null)
            else:
                await self._delete_object_quietly(null or done)
            return done

    async def remove_version(
        self,
        bucket_id: str,
        key: str,
        version_id: str | None,
        at: float,
        bypass: bool = False,
        cause: Cause = "ObjectRemoved",
    ) -> FileRecord:
        async with self._locks.hold(bucket_id, key), self._settler.claimed(bucket_id, key) as claim:
            found = await self._index.run(versions.get_version, bucket_id, key, version_id)
            gone = await self._index.run(
                files.delete_version, bucket_id, key, version_id, at, bypass, cause
            )
            if found is not None and not gone.delete_marker and await claim.held():
                await self._delete_object_quietly(found)
            return gone

    async def _null_version(self, bucket_id: str, key: str) -> FileRecord | None:
        """The key's null version when its content is the object under the key."""
        null = await self._index.run(versions.get_version, bucket_id, key, None)
        if null is None or null.delete_marker or object_names.version_of(null.object_key):
            return None
        return null

    async def _settle_null(self, bucket_id: str, key: str, null: FileRecord | None) -> None:
        """After a change that may have dropped the null version (suspended versioning
        replaces it), delete its object if the index no longer has it."""
        if null is not None and await self._null_version(bucket_id, key) is None:
            await self._delete_object_quietly(null)

    async def _delete_object_quietly(self, record: FileRecord) -> None:
        """The index no longer names the object; a failure here leaves an orphan only."""
        try:
            await self.backend.delete_object(record)
        except (BackendUnavailable, FileNotFound) as exc:
            logger.warning(  # no key: file names never reach a log
                "an object of bucket %s (blob %s) left in the cluster: %s",
                record.bucket_id,
                record.blob_id,
                exc,
            )

    async def delete_bucket(self, bucket: Bucket, force: bool) -> None:
        await self._index.run(buckets.delete_bucket, bucket.id, force, self._clock.iso())
        await self._delete_in_cluster(bucket)

    async def _delete_in_cluster(self, bucket: Bucket) -> None:
        """The cluster bucket of a bucket the index no longer holds (none: failed); tried
        again later while the cluster does not answer."""
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
        """Settle the writes whose writer is gone (their lease lapsed, or made before
        `older_than`: `settle.py`) and abort stale multipart uploads."""
        now = time.time()
        for reservation in await self._index.run(reservations.settleable, older_than, now):
            async with self._locks.hold(reservation.bucket_id, reservation.key):
                await self._settler.settle(reservation)
        locations = await self._index.run(maintenance.locations)
        await self.backend.abort_stale_uploads(locations, older_than)

    async def retry_reaps(self) -> None:
        """Objects are deleted by key, never held: nothing waits."""

    async def problems(self) -> list[str]:
        """Objects live in the cluster; the index's own counters are all there is to check."""
        return []

    def leftovers(self) -> list[str]:
        """Staged objects an interrupted write left are healed at start (`heal`)."""
        return []

    # Snapshots: copies of their own in the cluster (`snapshots.py`).

    async def take_snapshot(self, bucket: Bucket, snapshot_id: str, name: str | None) -> Snapshot:
        return await self._snapshots.take(bucket, snapshot_id, name)

    async def take_server_snapshot(self, snapshot_id: str, name: str | None) -> Snapshot:
        return await self._snapshots.take_server(snapshot_id, name)

    async def restore_snapshot(self, snapshot_id: str, bucket: Bucket, quota: int) -> str:
        return await self._snapshots.restore(snapshot_id, bucket, quota)

    async def fork_snapshot(
        self, snapshot_id: str, bucket: Bucket, max_buckets: int, quota: int
    ) -> None:
        await self._snapshots.fork(snapshot_id, bucket, max_buckets, quota)

    async def restore_server_snapshot(self, snapshot_id: str, drop_locked: bool) -> None:
        """The buckets made since the snapshot leave the index in the restore's transaction,
        then their cluster buckets go as a bucket deletion's do."""
        gone = await self._snapshots.restore_server(snapshot_id, drop_locked)
        for bucket_id, location, status in gone:
            await self._delete_in_cluster(
                replace(cluster_bucket(bucket_id, location), status=status)
            )

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await self._snapshots.delete(snapshot_id)


def _copy_etag(source: FileRecord) -> str | None:
    """The ETag a copy of `source` will have, where it is known before the copy: a plaintext
    single-part object's (its content's MD5) is kept by CopyObject. A settler looks for it
    if the copy's writer dies after copying; without it, the copy is staged (`_stage`)."""
    etag = source.backend_etag
    return etag if source.encryption is None and etag and "-" not in etag else None
