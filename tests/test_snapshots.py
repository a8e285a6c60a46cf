"""Snapshots at the engine level (issue 35, point 1): the engine in process over an index
held in memory and blobs on disk (tests/support/engines.py). A snapshot copies rows, never
bytes; restoring or forking one gives back exactly its versions and settings, and the
consistency check (`bucketd check`) holds after every step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from storage.config import (
    EngineConfig,
    IndexSettings,
    PlanLimits,
    Plans,
    StorageSettings,
)
from storage.engine import Engine
from storage.errors import (
    BucketNameTaken,
    InvalidBucketState,
    InvalidInput,
    ObjectLocked,
    QuotaExceeded,
    SnapshotNotFound,
    UploadNotFound,
)
from storage.models import Actor
from storage.rules.object_lock import Lock
from storage.tools.backup import backup
from storage.tools.migrate import migrate
from tests.support.engines import engine_on, memory_engine, organization_with_bucket
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer
from tests.support.snapshots import (
    TEXT,
    chunks,
    cluster_config,
    cluster_objects,
    cluster_settings,
    consistent,
    read,
    stored_names,
    versions,
)

INDEXES = pytest.mark.parametrize("kind", ["memory", "postgres"])


@pytest.mark.anyio
@INDEXES
async def test_restore_gives_back_exactly_the_versions_and_settings(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with engine_on(kind, tmp_path, request) as engine:
        actor, bucket = await organization_with_bucket(engine, versioning="Enabled")
        await engine.files.put(actor, bucket, "a", TEXT, chunks(b"one"))
        await engine.files.put(actor, bucket, "a", TEXT, chunks(b"two"))
        await engine.files.put(actor, bucket, "gone", TEXT, chunks(b"soon a marker"))
        await engine.files.delete(actor, bucket, "gone")
        before = await versions(engine, actor, bucket)
        usage = (await engine.buckets.get(actor, bucket)).size_bytes
        snapshot = await engine.snapshots.create(actor, bucket, name="first")
        assert (snapshot.file_count, snapshot.size_bytes, snapshot.buckets) == (4, 19, 1)
        assert snapshot.id.startswith("snap_") and snapshot.name == "first"

        await engine.files.put(actor, bucket, "a", TEXT, chunks(b"three"))
        await engine.files.put(actor, bucket, "new", TEXT, chunks(b"new content"))
        listed = await engine.files.list_versions(actor, bucket, limit=1000)
        for record, _ in listed.versions:  # every version of before goes for good
            await engine.files.delete_version(actor, bucket, record.key, record.version_id)
        await engine.buckets.update(actor, bucket, {"versioning": "Suspended"})
        await engine.maintenance.collect_garbage()
        await consistent(engine)

        restored = await engine.snapshots.restore(actor, snapshot.id)
        assert restored.versioning == "Enabled"
        assert restored.size_bytes == usage
        assert await versions(engine, actor, bucket) == before
        assert await read(engine, actor, bucket, "a") == b"two"
        await consistent(engine)
        await engine.maintenance.collect_garbage()
        assert await read(engine, actor, bucket, "a") == b"two"
        org = await engine.orgs.get(actor.org_id)
        assert org.stored_bytes == usage
        blob_files = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
        assert blob_files == []  # the contents came back from the index (kept inline)


@pytest.mark.anyio
@INDEXES
async def test_a_fork_shares_the_contents_and_outlives_its_source(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with engine_on(kind, tmp_path, request) as engine:
        actor, bucket = await organization_with_bucket(engine)
        await engine.files.put(actor, bucket, "k", TEXT, chunks(b"shared bytes"))
        snapshot = await engine.snapshots.create(actor, bucket)
        stats = await engine.maintenance.stats()
        fork = await engine.snapshots.fork(actor, snapshot.id, "the-fork")
        assert (fork.status, fork.file_count, fork.size_bytes) == ("active", 1, 12)
        assert (await engine.maintenance.stats()).blobs == stats.blobs  # no byte copied
        with pytest.raises(BucketNameTaken):
            await engine.snapshots.fork(actor, snapshot.id, "the-fork")
        await engine.buckets.delete(actor, bucket, force=True)
        await engine.snapshots.delete(actor, snapshot.id)
        await engine.maintenance.collect_garbage()
        assert await read(engine, actor, fork.id, "k") == b"shared bytes"
        with pytest.raises(InvalidBucketState):  # nothing else to restore into: fork instead
            other = await engine.snapshots.create(actor, fork.id)
            await engine.buckets.delete(actor, fork.id, force=True)
            await engine.snapshots.restore(actor, other.id)
        await consistent(engine)


@pytest.mark.anyio
async def test_snapshots_are_the_organizations_own(tmp_path: Path) -> None:
    async with memory_engine(tmp_path) as engine:
        actor, bucket = await organization_with_bucket(engine)
        other, other_bucket = await organization_with_bucket(engine)
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.snapshots.create(other, other_bucket)
        for call in (
            engine.snapshots.get(other, snapshot.id),
            engine.snapshots.delete(other, snapshot.id),
            engine.snapshots.restore(other, snapshot.id),
            engine.snapshots.fork(other, snapshot.id, "stolen"),
            engine.snapshots.get(actor, "snap_missing"),
            engine.snapshots.get_server(snapshot.id),
        ):
            with pytest.raises(SnapshotNotFound):
                await call
        listed = await engine.snapshots.list(actor, None, None, 10)
        assert [s.id for s in listed.items] == [snapshot.id]
        with pytest.raises(InvalidInput):
            await engine.snapshots.create(actor, bucket, name="x" * 257)


@pytest.mark.anyio
@INDEXES
async def test_a_server_snapshot_brings_back_every_bucket(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with engine_on(kind, tmp_path, request) as engine:
        actor, kept = await organization_with_bucket(engine)
        _, deleted = await organization_with_bucket(engine)
        await engine.files.put(actor, kept, "k", TEXT, chunks(b"kept"))
        deleted_org = (await engine.buckets.get_any(deleted)).org_id
        owner = Actor(org_id=deleted_org)
        await engine.files.put(owner, deleted, "d", TEXT, chunks(b"deleted"))
        server = await engine.snapshots.create_server(name="clean")
        assert (server.bucket_id, server.buckets, server.file_count) == (None, 2, 2)
        assert [s.id for s in (await engine.snapshots.list(actor, None, None, 10)).items] == []

        await engine.files.put(actor, kept, "k", TEXT, chunks(b"changed"))
        name = (await engine.buckets.get(actor, kept)).name
        await engine.buckets.update(actor, kept, {"name": "renamed"})
        made = await engine.buckets.create(actor, name, "us-east-1", at_once=True)
        await engine.buckets.delete(owner, deleted, force=True)
        await engine.snapshots.restore_server(server.id)

        assert await read(engine, actor, kept, "k") == b"kept"
        assert await read(engine, owner, deleted, "d") == b"deleted"
        assert [b.id for b in (await engine.buckets.list(actor, None, 10)).items] == [kept]
        assert (await engine.buckets.get(actor, kept)).name == name  # the name comes back
        assert made.id != kept
        await consistent(engine)
        await engine.snapshots.delete_server(server.id)
        await consistent(engine)


@pytest.mark.anyio
async def test_contents_only_snapshots_hold_count_against_the_quota(tmp_path: Path) -> None:
    """A snapshot counts against no quota itself; each content its organization's snapshots
    name and no version of its buckets still names counts once, at its size."""
    plans = Plans(free=PlanLimits(max_storage_bytes=100))
    async with memory_engine(tmp_path, plans=plans) as engine:
        actor, bucket = await organization_with_bucket(engine, plan="free")
        await engine.files.put(actor, bucket, "a", TEXT, chunks(b"a" * 60))
        snapshot = await engine.snapshots.create(actor, bucket)
        again = await engine.snapshots.create(actor, bucket)  # the same content: once
        assert await engine.snapshots.held_bytes(actor) == 0  # the bucket still names it
        await engine.files.put(actor, bucket, "b", TEXT, chunks(b"b" * 30))

        await engine.files.delete(actor, bucket, "a")
        assert await engine.snapshots.held_bytes(actor) == 60
        with pytest.raises(QuotaExceeded):  # 30 stored + 60 held + 11 > 100
            await engine.files.put(actor, bucket, "c", TEXT, chunks(b"c" * 11))
        await engine.files.put(actor, bucket, "c", TEXT, chunks(b"c" * 10))
        fork = await engine.snapshots.fork(actor, snapshot.id, "forked")  # 100: held 60 moved
        assert (await engine.orgs.get(actor.org_id)).stored_bytes == 100
        assert await engine.snapshots.held_bytes(actor) == 0
        with pytest.raises(QuotaExceeded):
            await engine.snapshots.fork(actor, snapshot.id, "forked-again")
        await engine.buckets.delete(actor, fork.id, force=True)
        assert await engine.snapshots.held_bytes(actor) == 60

        await engine.snapshots.restore(actor, snapshot.id)  # back to "a" alone: 60 stored
        assert await engine.snapshots.held_bytes(actor) == 0
        assert (await engine.orgs.get(actor.org_id)).stored_bytes == 60
        await engine.snapshots.delete(actor, again.id)
        await engine.files.delete(actor, bucket, "a")
        await engine.snapshots.delete(actor, snapshot.id)
        assert await engine.snapshots.held_bytes(actor) == 0
        await engine.files.put(actor, bucket, "d", TEXT, chunks(b"d" * 100))
        await consistent(engine)


@pytest.mark.anyio
async def test_a_backup_carries_the_snapshots_and_the_contents_only_they_hold(
    tmp_path: Path,
) -> None:
    """`bucketd backup` copies the index (snapshot rows included) and every blob the index
    names, those only a snapshot still holds too: the backup restores the snapshot."""
    config = EngineConfig(data_dir=tmp_path / "data", storage=StorageSettings(fsync=False))
    engine = await Engine.open(config)
    try:
        actor, bucket = await organization_with_bucket(engine)
        await engine.files.put(actor, bucket, "k", TEXT, chunks(b"only the snapshot keeps me"))
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.files.delete(actor, bucket, "k")
        await engine.maintenance.collect_garbage()
        backup(tmp_path / "data", tmp_path / "backup")
    finally:
        await engine.close()
    copy = await Engine.open(replace(config, data_dir=tmp_path / "backup"))
    try:
        await consistent(copy)
        await copy.snapshots.restore(actor, snapshot.id)
        assert await read(copy, actor, bucket, "k") == b"only the snapshot keeps me"
        await consistent(copy)
    finally:
        await copy.close()


@pytest.mark.anyio
async def test_migrate_carries_bucket_and_server_snapshots_into_the_cluster(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """`bucketd migrate` uploads what a snapshot names as the S3 backend keeps it (objects
    of its own, in the folder of the snapshot or of its server snapshot): a bucket
    snapshot restores on the cluster, and a server snapshot too, making a bucket deleted
    before the move again in the cluster."""
    config = EngineConfig(data_dir=tmp_path / "data", storage=StorageSettings(fsync=False))
    engine = await Engine.open(config)
    try:
        actor, bucket = await organization_with_bucket(engine)
        await engine.files.put(actor, bucket, "k", TEXT, chunks(b"only the snapshot keeps me"))
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.files.delete(actor, bucket, "k")
        owner, dropped = await organization_with_bucket(engine)
        await engine.files.put(owner, dropped, "d", TEXT, chunks(b"deleted before the move"))
        server = await engine.snapshots.create_server()
        await engine.buckets.delete(owner, dropped, force=True)
        await engine.maintenance.collect_garbage()
    finally:
        await engine.close()
    s3 = cluster_settings(seaweed)
    target = EngineConfig(
        data_dir=tmp_path / "target",
        index=IndexSettings(url=postgres.new_database()),
        storage=StorageSettings(backend="s3", s3=s3),
    )
    report = await migrate(config, target, lambda line: None)
    assert report.problems == []
    folders = {name.split("/")[0] for name in cluster_objects(seaweed, f"{s3.brand}-snapshots")}
    assert folders == {snapshot.id, server.id}
    moved = await Engine.open(target)
    try:
        await moved.snapshots.restore(actor, snapshot.id)
        assert await read(moved, actor, bucket, "k") == b"only the snapshot keeps me"
        await moved.snapshots.restore_server(server.id)
        assert await versions(moved, actor, bucket) == []
        assert await read(moved, owner, dropped, "d") == b"deleted before the move"
        location = str((await moved.buckets.get(owner, dropped)).location)
        assert cluster_objects(seaweed, location) == await stored_names(moved, owner, dropped)
        await consistent(moved)
        await moved.snapshots.delete_server(server.id)
        folders = {n.split("/")[0] for n in cluster_objects(seaweed, f"{s3.brand}-snapshots")}
        assert folders == {snapshot.id}
        await consistent(moved)
    finally:
        await moved.close()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_on_an_s3_cluster_a_snapshot_keeps_copies_of_its_own(
    kind: str, tmp_path: Path, seaweed: SeaweedServer, request: pytest.FixtureRequest
) -> None:
    """The S3 backend deletes a version's object with the version: a snapshot copies the
    objects (server-side) into its folder of `<brand>-snapshots`, a restore or fork copies
    them back, and no object is left that no row names, nor a row without its object."""
    s3 = cluster_settings(seaweed)
    config = cluster_config(tmp_path, s3, request, kind)
    engine = await Engine.open(config)
    try:
        actor, plain = await organization_with_bucket(engine)
        _, versioned = await organization_with_bucket(engine, versioning="Enabled")
        owner = Actor(org_id=(await engine.buckets.get_any(versioned)).org_id)
        await engine.files.put(actor, plain, "k", TEXT, chunks(b"kept"))
        await engine.files.put(owner, versioned, "v", TEXT, chunks(b"one"))
        await engine.files.put(owner, versioned, "v", TEXT, chunks(b"two"))
        await engine.files.put(owner, versioned, "gone", TEXT, chunks(b"marked"))
        await engine.files.delete(owner, versioned, "gone")
        before = await versions(engine, owner, versioned)
        first = await engine.snapshots.create(actor, plain)
        second = await engine.snapshots.create(owner, versioned)
        copies = cluster_objects(seaweed, f"{s3.brand}-snapshots")
        assert len(copies) == 4 and {c.split("/")[0] for c in copies} == {first.id, second.id}

        await engine.files.put(actor, plain, "k", TEXT, chunks(b"overwritten"))
        await engine.files.put(actor, plain, "new", TEXT, chunks(b"new"))
        for record, _ in (await engine.files.list_versions(owner, versioned, limit=100)).versions:
            await engine.files.delete_version(owner, versioned, record.key, record.version_id)
        await engine.snapshots.restore(actor, first.id)
        await engine.snapshots.restore(owner, second.id)
        assert await read(engine, actor, plain, "k") == b"kept"
        assert await versions(engine, owner, versioned) == before
        assert await read(engine, owner, versioned, "v") == b"two"
        plain_bucket = await engine.buckets.get(actor, plain)
        assert cluster_objects(seaweed, str(plain_bucket.location)) == await stored_names(
            engine, actor, plain
        )

        fork = await engine.snapshots.fork(owner, second.id, "s3-fork")
        assert await read(engine, owner, fork.id, "v") == b"two"
        await engine.snapshots.delete(actor, first.id)
        await engine.snapshots.delete(owner, second.id)
        assert cluster_objects(seaweed, f"{s3.brand}-snapshots") == set()
        assert await read(engine, owner, fork.id, "v") == b"two"
        await consistent(engine)
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_a_restore_keeps_protected_versions_and_gives_back_the_settings(
    tmp_path: Path,
) -> None:
    """A restore never drops a version under legal hold (the test fixture's server reset
    alone may); it gives back the bucket's settings (its object lock stays, for good) and
    aborts its multipart uploads in flight."""
    async with memory_engine(tmp_path) as engine:
        actor, bucket = await organization_with_bucket(engine, versioning="Enabled")
        await engine.buckets.update(actor, bucket, {"tags": [("team", "a")]})
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.buckets.update(actor, bucket, {"tags": None, "versioning": "Suspended"})
        held = replace(TEXT, lock=Lock(legal_hold=True))
        await engine.buckets.update(actor, bucket, {"versioning": "Enabled"})
        await engine.buckets.set_object_lock(actor, bucket, None)
        record = await engine.files.put(actor, bucket, "held", held, chunks(b"held"))
        upload = await engine.multipart.create(actor, bucket, "big", TEXT)
        await engine.multipart.upload_part(actor, bucket, "big", upload.upload_id, 1, chunks(b"p"))
        with pytest.raises(ObjectLocked):
            await engine.snapshots.restore(actor, snapshot.id)
        await engine.files.protect(actor, bucket, "held", record.version_id, legal_hold=False)
        restored = await engine.snapshots.restore(actor, snapshot.id)
        assert json.loads(restored.tags or "{}") == {"team": "a"}
        assert restored.object_lock is not None and restored.versioning == "Enabled"
        assert await versions(engine, actor, bucket) == []
        with pytest.raises(UploadNotFound):
            await engine.multipart.get(actor, bucket, "big", upload.upload_id)
        assert (await engine.orgs.get(actor.org_id)).part_bytes == 0

        await engine.files.put(actor, bucket, "held", held, chunks(b"held again"))
        server = await engine.snapshots.create_server()
        await engine.files.put(actor, bucket, "more", held, chunks(b"more"))
        with pytest.raises(ObjectLocked):
            await engine.snapshots.restore_server(server.id)
        await engine.snapshots.restore_server(server.id, drop_locked=True)
        assert [key for key, *_ in await versions(engine, actor, bucket)] == ["held"]
        await consistent(engine)
