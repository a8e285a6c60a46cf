"""Snapshots on an S3 cluster (`ObjectCommits`' part): a version's object is deleted with
the version, so a snapshot keeps copies of its own.

- Taking one copies each object the bucket's versions name, server-side, into the
  snapshots' cluster bucket (`<brand>-snapshots`, a folder `<snapshot id>/` per snapshot,
  each copy under a name of its own), then records the snapshot in one transaction whose
  rows name the copies (`index/copies.py`); a version written meanwhile, whose content was
  not copied, makes it a Conflict, and the copies go; an object deleted meanwhile is left
  out (its version is gone from the rows, or the Conflict follows). A busy bucket's
  snapshot is taken again, `TAKE_ATTEMPTS` times in all, before the Conflict is answered.
- Restoring or forking one copies the snapshot's objects back into the bucket's cluster
  bucket, each under a new name (`.bucketd-restored/<id>`, never a name a live version
  has), then restores in one transaction; the objects of the versions it dropped are
  deleted after it commits (an object under its key only while no version written since
  took the name).
- Deleting one deletes its folder after the transaction.

Server snapshots do the same over every bucket, their copies in one folder
(`<server snapshot id>/`). Restoring one copies each bucket's contents back first: into
the bucket where it exists, into its own cluster bucket made again where it was deleted
since; then one transaction restores the index (`restores.restore_server_snapshot`),
refusing with a Conflict if the buckets changed meanwhile. Once it commits, the objects of
the versions it dropped go, and the cluster buckets of the buckets it dropped (made since
the snapshot) are deleted as a bucket deletion deletes them (`commits.py`).

Whatever fails before the transaction commits deletes the copies it made (and the cluster
buckets it made again): a failure leaves the previous state, an orphan object at worst,
never a row without its object; the step can simply be run again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

from storage import encryption
from storage.backends.protocol import ObjectStore
from storage.backends.s3.locks import KeyLocks
from storage.backends.s3.names import RESTORED_PREFIX
from storage.errors import BackendUnavailable, Conflict, FileNotFound, InvalidBucketState
from storage.faults import Faults
from storage.index import Index, copies, restores, snapshots, versions
from storage.index.copies import Copy
from storage.models import Bucket, FileRecord, Snapshot
from storage.rules.clock import Clock

logger = logging.getLogger("bucketd.engine")
COPIES_AT_ONCE = 16


def cluster_bucket(bucket_id: str, location: str | None) -> Bucket:
    """A bucket as the backend needs it to make or delete its cluster bucket: its place."""
    return Bucket(
        id=bucket_id,
        org_id="",
        name="",
        region="",
        status="active",
        status_reason=None,
        created_at="",
        max_upload_bytes=0,
        allowed_content_types=(),
        file_count=0,
        size_bytes=0,
        location=location,
    )


TAKE_ATTEMPTS = 3


async def _again(take: Callable[[], Awaitable[Snapshot]]) -> Snapshot:
    """`take`, again while the versions change under it (Conflict), `TAKE_ATTEMPTS` times."""
    for attempt in range(1, TAKE_ATTEMPTS + 1):
        try:
            return await take()
        except Conflict:
            if attempt == TAKE_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


class ClusterSnapshots:
    def __init__(
        self, index: Index, backend: ObjectStore, locks: KeyLocks, clock: Clock, faults: Faults
    ) -> None:
        self._index = index
        self._faults = faults
        self._backend = backend
        self._locks = locks
        self._clock = clock

    async def take(self, bucket: Bucket, snapshot_id: str, name: str | None) -> Snapshot:
        return await _again(lambda: self._take(bucket, snapshot_id, name))

    async def _take(self, bucket: Bucket, snapshot_id: str, name: str | None) -> Snapshot:
        records = await self._index.run(copies.contents, bucket.id, None)
        location = self._backend.snapshots_location
        await self._backend.create_bucket(location)
        made = await self._copy(
            records, location, lambda: f"{snapshot_id}/{uuid.uuid4().hex}", gone_ok=True
        )
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
        made = await self._copy_back(snapshot_id, bucket.location)
        try:
            restored = await self._index.run(
                restores.restore_snapshot, snapshot_id, self._clock.iso(), quota, made
            )
        except BaseException:
            await self._forget(bucket.location, made)
            raise
        for record in restored.dropped:
            await self._drop(record)
        return restored.bucket_id

    async def fork(self, snapshot_id: str, bucket: Bucket, max_buckets: int, quota: int) -> None:
        await self._backend.provision_bucket(bucket)
        try:
            made = await self._copy_back(snapshot_id, bucket.location)
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

    # Server snapshots: every bucket.

    async def take_server(self, snapshot_id: str, name: str | None) -> Snapshot:
        return await _again(lambda: self._take_server(snapshot_id, name))

    async def _take_server(self, snapshot_id: str, name: str | None) -> Snapshot:
        records = await self._index.run(copies.server_contents)
        location = self._backend.snapshots_location
        await self._backend.create_bucket(location)
        made = await self._copy(
            records, location, lambda: f"{snapshot_id}/{uuid.uuid4().hex}", gone_ok=True
        )
        try:
            snapshot = await self._index.run(
                snapshots.create_server_snapshot, snapshot_id, name, self._clock.iso(), made
            )
        except BaseException:
            await self._forget(location, made)
            raise
        kept = await self._index.run(copies.snapshot_blobs, snapshot_id)
        await self._forget(location, [c for c in made if c.blob_id not in kept])
        return snapshot

    async def restore_server(
        self, snapshot_id: str, drop_locked: bool
    ) -> list[tuple[str, str | None, str]]:
        """Restore every bucket; the buckets dropped (id, location, status), whose cluster
        buckets the caller deletes."""
        plan = await self._index.run(restores.server_plan, snapshot_id)
        made: dict[str, list[Copy]] = {}
        provisioned: dict[str, str | None] = {}
        try:
            for step in plan:
                if not step.exists:
                    if step.location is None:
                        raise InvalidBucketState(
                            f"bucket {step.bucket_id} of the snapshot has no place in the "
                            "cluster to be made again in"
                        )
                    await self._backend.create_bucket(step.location)
                    provisioned[step.bucket_id] = step.location
                made[step.bucket_id] = await self._copy_back(step.snapshot_id, step.location)
            self._faults.hit("server_restore.before_commit")
            restored = await self._index.run(
                restores.restore_server_snapshot,
                snapshot_id,
                drop_locked,
                self._clock.iso(),
                made,
                frozenset(provisioned),
            )
        except BaseException:
            await self._undo(plan, made, provisioned, set())
            raise
        await self._undo(plan, made, provisioned, restored.filled)
        for record in restored.dropped:
            await self._drop(record)
        return restored.gone

    async def _undo(
        self,
        plan: list[restores.ServerPlan],
        made: dict[str, list[Copy]],
        provisioned: dict[str, str | None],
        filled: set[str],
    ) -> None:
        """The copies no bucket took, and the cluster buckets made again for none."""
        for step in plan:
            if step.bucket_id in filled:
                continue
            if step.bucket_id in provisioned:
                await self.drop_cluster_bucket(cluster_bucket(step.bucket_id, step.location))
            else:
                await self._forget(step.location, made.get(step.bucket_id, []))

    async def drop_cluster_bucket(self, bucket: Bucket) -> None:
        try:
            await self._backend.delete_bucket(bucket)
        except BackendUnavailable as exc:
            logger.warning("cluster bucket %s stays: %s", bucket.location, exc)

    async def _copy_back(self, snapshot_id: str, location: str | None) -> list[Copy]:
        records = await self._index.run(copies.contents, None, snapshot_id)
        located = [replace(r, location=self._backend.snapshots_location) for r in records]
        return await self._copy(located, location, lambda: f"{RESTORED_PREFIX}{uuid.uuid4().hex}")

    async def _copy(
        self,
        records: list[FileRecord],
        location: str | None,
        name: Callable[[], str],
        gone_ok: bool = False,
    ) -> list[Copy]:
        """A server-side copy of each record's object into `location`, `COPIES_AT_ONCE` at
        a time (with `gone_ok`, one deleted since it was listed is left out); on a failure,
        those made are deleted."""
        made: list[Copy] = []
        gate = asyncio.Semaphore(COPIES_AT_ONCE)

        async def one(record: FileRecord) -> None:
            async with gate:
                target = name()
                try:
                    stored = await self._backend.copy_object(record, target, location)
                except FileNotFound:
                    if gone_ok:
                        return
                    raise
                made.append(
                    Copy(
                        record.blob_id,
                        stored.blob_id,
                        stored.backend_etag,
                        target,
                        encryption.stored_size(record),
                    )
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

    async def _drop(self, record: FileRecord) -> None:
        """After a restore: the object of a version it dropped. One under its key stays
        when a version written since is there (it took the name)."""
        if record.object_key is not None:
            await self._quietly(record)
            return
        async with self._locks.hold(record.bucket_id, record.key):
            null = await self._index.run(versions.get_version, record.bucket_id, record.key, None)
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
