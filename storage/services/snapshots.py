"""Snapshots of buckets and of the whole server: taken, listed, deleted, restored, forked.

A bucket snapshot is the bucket's versions, delete markers and settings at one moment:
index rows that share the contents on the local backend (`index/snapshots.py`), with
copies of its own on an S3 cluster (`backends/s3/snapshots.py`), the commit strategy's
choice. Restoring one gives the
bucket back exactly those; forking one makes a new bucket holding them. A snapshot of
another organization, or outside the actor's bucket restriction, is reported exactly as a
missing one. Server snapshots (every bucket of every organization) are the operator's:
the gateway decides who may use them; they are never visible as an organization's.
"""

from __future__ import annotations

from dataclasses import replace

from storage.backends.commits import Commits
from storage.config import EngineConfig
from storage.errors import (
    BucketNotFound,
    InvalidBucketState,
    InvalidInput,
    QuotaExceeded,
    SnapshotNotFound,
)
from storage.index import Index, snapshots
from storage.models import Actor, Bucket, FileRecord, Page, Snapshot
from storage.rules import ids
from storage.rules.clock import Clock
from storage.rules.validation import check_bucket_name, check_region
from storage.services.buckets import Buckets
from storage.services.organizations import Organizations
from storage.services.uploads import MultipartUploads

MAX_LABEL = 256


def check_label(name: object) -> str | None:
    """A snapshot's optional label: None, or 1 to 256 characters, no NUL (which PostgreSQL
    does not store in text)."""
    if name is None:
        return None
    if not isinstance(name, str) or not 0 < len(name) <= MAX_LABEL or "\x00" in name:
        raise InvalidInput(f"a snapshot's name is 1 to {MAX_LABEL} characters, no NUL")
    return name


class Snapshots:
    def __init__(
        self,
        index: Index,
        commits: Commits,
        config: EngineConfig,
        orgs: Organizations,
        buckets: Buckets,
        multipart: MultipartUploads,
        clock: Clock,
        contents_location: str | None = None,
    ) -> None:
        """`contents_location`: where the backend keeps snapshots' own contents (the S3
        backend's copies); None where they are the buckets' (local blobs)."""
        self._index = index
        self._contents_location = contents_location
        self._commits = commits
        self._config = config
        self._orgs = orgs
        self._buckets = buckets
        self._multipart = multipart
        self._clock = clock

    async def create(self, actor: Actor, bucket_id: str, name: str | None = None) -> Snapshot:
        """All of the bucket's current and noncurrent versions and delete markers, and its
        settings, in one transaction."""
        bucket = await self._buckets.get(actor, bucket_id)
        label = check_label(name)
        await self._check_count(actor.org_id)
        snapshot_id = ids.new_id(ids.SNAPSHOT_PREFIX)
        return await self._commits.take_snapshot(bucket, snapshot_id, label)

    async def _check_count(self, org_id: str) -> None:
        """The plan's `max_snapshots`: no storage quota counts a snapshot, but each copies
        its bucket's index rows. Checked before the snapshot's own transaction, so requests
        racing at the limit may pass it by as many as run at once (a bound, not a count)."""
        limit = self._orgs.plan(await self._orgs.get(org_id)).max_snapshots
        if await self._index.run(snapshots.count_snapshots, org_id) >= limit:
            raise QuotaExceeded(f"the plan allows at most {limit} snapshots; delete one first")

    async def list(
        self, actor: Actor, bucket_id: str | None, after: str | None, limit: int
    ) -> Page[Snapshot]:
        """One bucket's snapshots, or (None) all the organization's bucket snapshots,
        those of deleted buckets too (a key restricted to a bucket: that bucket's)."""
        if bucket_id is not None:
            bucket_id = (await self._buckets.get(actor, bucket_id)).id
        else:
            bucket_id = actor.bucket_id
        found = await self._index.run(
            snapshots.list_snapshots, actor.org_id, bucket_id, after, limit + 1
        )
        return snapshots.page(found, limit)

    async def get(self, actor: Actor, snapshot_id: str) -> Snapshot:
        found = await self._index.run(snapshots.get_snapshot, snapshot_id)
        if found is None:
            raise SnapshotNotFound("snapshot not found")
        snapshot, parent = found
        if (
            parent is not None
            or snapshot.org_id != actor.org_id
            or snapshot.bucket_id is None
            or not actor.can_see(snapshot.bucket_id)
        ):
            raise SnapshotNotFound("snapshot not found")
        return snapshot

    async def delete(self, actor: Actor, snapshot_id: str) -> None:
        """The snapshot goes; contents no bucket version or other snapshot names go too."""
        await self.get(actor, snapshot_id)
        await self._commits.delete_snapshot(snapshot_id)

    async def restore(self, actor: Actor, snapshot_id: str) -> Bucket:
        """The bucket the snapshot was taken of gets back exactly its versions (ids, order,
        attributes) and settings, keeping its current name; versions since are dropped and
        its multipart uploads in flight aborted. InvalidBucketState when the bucket was
        deleted (fork instead), ObjectLocked when a version under retention or legal hold
        would go, QuotaExceeded when it would grow past the quota."""
        snapshot = await self.get(actor, snapshot_id)
        assert snapshot.bucket_id is not None
        try:
            bucket = await self._buckets.get(actor, snapshot.bucket_id)
        except BucketNotFound:
            raise InvalidBucketState(
                "the bucket was deleted since: fork the snapshot instead"
            ) from None
        quota = await self._quota(actor.org_id)
        bucket_id = await self._commits.restore_snapshot(snapshot_id, bucket, quota)
        await self._remove_aborted_parts()
        return await self._buckets.get(replace(actor, decided=None), bucket_id)

    async def fork(
        self, actor: Actor, snapshot_id: str, name: object, region: object = None
    ) -> Bucket:
        """A new active bucket holding the snapshot's versions and settings, sharing its
        contents; it counts against the plan's buckets and storage quota."""
        await self.get(actor, snapshot_id)
        config = await self._index.run(snapshots.snapshot_config, snapshot_id)
        if config is None:
            raise SnapshotNotFound("snapshot not found")
        org = await self._orgs.get(actor.org_id)
        uploads = self._config.uploads
        bucket = Bucket(
            id=ids.new_id(self._config.id_prefix),
            org_id=org.id,
            name=check_bucket_name(name),
            region=check_region(
                config["region"] if region is None else region, self._config.regions
            ),
            status="active",
            status_reason=None,
            created_at=self._clock.iso(),
            max_upload_bytes=uploads.default_max_bytes,
            allowed_content_types=tuple(uploads.allowed_content_types),
            file_count=0,
            size_bytes=0,
        )
        bucket = replace(bucket, location=self._commits.backend.location_for(bucket))
        plan = self._orgs.plan(org)
        await self._commits.fork_snapshot(
            snapshot_id, bucket, plan.max_buckets, plan.max_storage_bytes
        )
        return await self._buckets.get(replace(actor, decided=None), bucket.id)

    async def held_bytes(self, actor: Actor) -> int:
        """What the organization's snapshots count against its storage quota: each distinct
        content they name that none of its buckets' versions still names, once, at its
        size (its usage's `snapshotBytes`)."""
        return await self._index.run(snapshots.snapshot_usage, actor.org_id)

    async def _quota(self, org_id: str) -> int:
        return self._orgs.plan(await self._orgs.get(org_id)).max_storage_bytes

    # Server snapshots: the operator's (the gateway decides who).

    async def create_server(self, name: str | None = None) -> Snapshot:
        """A snapshot of every bucket of every organization, in one transaction.
        Organizations, API keys and webhooks are not part of it."""
        label = check_label(name)
        snapshot_id = ids.new_id(ids.SNAPSHOT_PREFIX)
        return await self._commits.take_server_snapshot(snapshot_id, label)

    async def list_server(self, after: str | None, limit: int) -> Page[Snapshot]:
        found = await self._index.run(snapshots.list_snapshots, None, None, after, limit + 1)
        return snapshots.page(found, limit)

    async def get_server(self, snapshot_id: str) -> Snapshot:
        found = await self._index.run(snapshots.get_snapshot, snapshot_id)
        if found is None or found[0].org_id is not None or found[0].bucket_id is not None:
            raise SnapshotNotFound("snapshot not found")
        return found[0]

    async def delete_server(self, snapshot_id: str) -> None:
        await self.get_server(snapshot_id)
        await self._commits.delete_snapshot(snapshot_id)

    async def restore_server(self, snapshot_id: str, drop_locked: bool = False) -> None:
        """Every bucket as the snapshot has it: buckets made since are deleted, deleted ones
        made again (same id, name and organization, where it still exists), the rest
        restored. `drop_locked` (test mode's reset only): versions under retention or
        legal hold go too, instead of refusing."""
        await self.get_server(snapshot_id)
        await self._commits.restore_server_snapshot(snapshot_id, drop_locked)
        await self._remove_aborted_parts()

    async def current_files(
        self, snapshot_id: str, after: str | None, limit: int
    ) -> tuple[Snapshot, Page[FileRecord]]:
        """A bucket snapshot and one page (by key) of the files it held current, readable
        with `engine.files.open`: what `bucketd export --snapshot` writes, on a stopped data
        dir (the operator's; through the API, a snapshot is read by forking it)."""
        found = await self._index.run(snapshots.get_snapshot, snapshot_id)
        if found is None or found[0].bucket_id is None:
            raise SnapshotNotFound("snapshot not found")
        records = await self._index.run(
            snapshots.snapshot_files, snapshot_id, self._contents_location, after, limit + 1
        )
        return found[0], Page.of(records, limit, lambda record: record.key)

    async def _remove_aborted_parts(self) -> None:
        """The parts of the uploads a restore aborted (what the janitor would remove)."""
        await self._multipart.collect_garbage(temp_files=False)
