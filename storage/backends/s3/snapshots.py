"""Snapshots on an S3 cluster (`ObjectCommits`' part): a version's object is deleted with
the version, so a snapshot keeps copies of its own.

- Taking one copies each object the bucket's versions name, server-side, into the
  snapshots' cluster bucket (`<brand>-snapshots`, a folder `<snapshot id>/` per snapshot,
  each copy under a name of its own), then records the snapshot in one transaction whose
  rows name the copies (`index/copies.py`); a version written meanwhile, whose content was
  not copied, makes it a Conflict (try again), and the copies go.
- Restoring or forking one copies the snapshot's objects back into the bucket's cluster
  bucket, each under a new name (`.bucketd-restored/<id>`, never a name a live version
  has), then restores in one transaction; the objects of the versions it dropped are
  deleted after it commits (an object under its key only while no version written since
  took the name).
- Deleting one deletes its folder after the transaction.

Whatever fails before the transaction commits deletes the copies it made: a failure leaves
an orphan object at worst, never a row without its object. Server snapshots are not
offered here (they would make and delete cluster buckets): NotSupported.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace

from storage.backends.protocol import ObjectStore
from storage.backends.s3.locks import KeyLocks
from storage.backends.s3.names import RESTORED_PREFIX
from storage.errors import BackendUnavailable, FileNotFound, NotSupported
from storage.index import Index, copies, restores, snapshots, versions
from storage.index.copies import Copy
from storage.models import Bucket, FileRecord, Snapshot
from storage.rules.clock import Clock

logger = logging.getLogger("bucketd.engine")
COPIES_AT_ONCE = 16


def no_server_snapshots() -> NotSupported:
    return NotSupported(
        "server snapshots are offered on the local backend only; on S3, take a snapshot "
        "of each bucket"
    )


class ClusterSnapshots:
    def __init__(self, index: Index, backend: ObjectStore, locks: KeyLocks, clock: Clock) -> None:
        self._index = index
        self._backend = backend
        self._locks = locks
        self._clock = clock

    async def take(self, bucket: Bucket, snapshot_id: str, name: str | None) -> Snapshot:
        records = await self._index.run(copies.contents, bucket.id, None)
        location = self._backend.snapshots_location
        await self._backend.create_bucket(location)
        made = await self._copy(records, location, lambda: f"{snapshot_id}/{uuid.uuid4().hex}")
        try:
            snapshot = await self._index.run(
                snapshots.create_snapshot, snapshot_id, bucket.id, name, self._clock.iso(), made
            )
        except BaseException:
            await self._forget(location, made)
            raise
        kept = await self._index.run(copies.snapshot_blobs, snapshot_id)
        await self._forget(location, [c for c in made if c.blob_id not in kept])
        return snapshot

    async def restore(self, snapshot_id: str, bucket: Bucket, quota: int) -> str:
        made = await self._copy_back(snapshot_id, bucket)
        try:
            restored = await self._index.run(
                restores.restore_snapshot, snapshot_id, self._clock.iso(), quota, made
            )
        except BaseException:
            await self._forget(bucket.location, made)
            raise
        for record in restored.dropped:
            await self._drop(bucket, record)
        return restored.bucket_id

    async def fork(self, snapshot_id: str, bucket: Bucket, max_buckets: int, quota: int) -> None:
        await self._backend.provision_bucket(bucket)
        try:
            made = await self._copy_back(snapshot_id, bucket)
            await self._index.run(
                restores.fork_snapshot, snapshot_id, bucket, max_buckets, quota, made
            )
        except BaseException:
            await self._backend.delete_bucket(bucket)
            raise

    async def delete(self, snapshot_id: str) -> None:
        await self._index.run(snapshots.delete_snapshot, snapshot_id)
        try:
            await self._backend.delete_prefix(self._backend.snapshots_location, snapshot_id + "/")
        except BackendUnavailable as exc:  # the index no longer names them: orphans only
            logger.warning("the copies of snapshot %s stay in the cluster: %s", snapshot_id, exc)

    async def _copy_back(self, snapshot_id: str, bucket: Bucket) -> list[Copy]:
        records = await self._index.run(copies.contents, None, snapshot_id)
        located = [replace(r, location=self._backend.snapshots_location) for r in records]
        return await self._copy(
            located, bucket.location, lambda: f"{RESTORED_PREFIX}{uuid.uuid4().hex}"
        )

    async def _copy(
        self, records: list[FileRecord], location: str | None, name: Callable[[], str]
    ) -> list[Copy]:
        """A server-side copy of each record's object into `location`, `COPIES_AT_ONCE` at
        a time; on a failure, those made are deleted."""
        made: list[Copy] = []
        gate = asyncio.Semaphore(COPIES_AT_ONCE)

        async def one(record: FileRecord) -> None:
            async with gate:
                target = name()
                stored = await self._backend.copy_object(record, target, location)
                made.append(
                    Copy(record.blob_id, stored.blob_id, stored.backend_etag, target, record.size)
                )

        try:
            await asyncio.gather(*(one(record) for record in records))
        except BaseException:
            await self._forget(location, made)
            raise
        return made

    async def _forget(self, location: str | None, made: list[Copy]) -> None:
        """Delete copies no row names (a failed or refused step's)."""
        for copy in made:
            await self._quietly(self._at(location, copy.object_key))

    async def _drop(self, bucket: Bucket, record: FileRecord) -> None:
        """After a restore: the object of a version it dropped. One under its key stays
        when a version written since is there (it took the name)."""
        if record.object_key is not None:
            await self._quietly(record)
            return
        async with self._locks.hold(bucket.id, record.key):
            null = await self._index.run(versions.get_version, bucket.id, record.key, None)
            if null is None or null.delete_marker or null.object_key is not None:
                await self._quietly(record)

    def _at(self, location: str | None, name: str) -> FileRecord:
        return FileRecord(
            bucket_id="",
            key=name,
            size=0,
            content_type="",
            uploaded_at="",
            sha256="",
            blob_id="",
            location=location,
        )

    async def _quietly(self, record: FileRecord) -> None:
        try:
            await self._backend.delete_object(record)
        except (BackendUnavailable, FileNotFound) as exc:
            logger.warning("an object of a snapshot step stays in the cluster: %s", exc)
