"""Server snapshots on an S3 cluster (issue 35, point 1, both backends), against the
session's real SeaweedFS: taken as server-side copies in the snapshot's own folder,
restored by copying each bucket's contents back (into its cluster bucket made again when
the bucket was deleted since), the cluster buckets of buckets made since deleted. After
every step the cluster holds exactly the objects the index names, and a refused restore
leaves no trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from storage.backends.s3.names import stored_under
from storage.config import EngineConfig, StorageSettings
from storage.engine import Engine
from storage.errors import Conflict, ObjectLocked
from storage.models import Actor
from storage.rules.object_lock import Lock
from tests.support.engines import organization_with_bucket
from tests.support.seaweed import SeaweedServer
from tests.support.snapshots import (
    TEXT,
    chunks,
    cluster_buckets,
    cluster_config,
    cluster_objects,
    cluster_settings,
    consistent,
    read,
    stored_names,
    versions,
)


async def objects_match_rows(engine: Engine, seaweed: SeaweedServer, brand: str) -> None:
    """Every cluster bucket of the brand is a bucket's, holding exactly the objects its
    versions name (the snapshots' folder and the parts' bucket aside)."""
    held: dict[str, set[str]] = {}
    for org in (await engine.orgs.list(None, 100)).items:
        actor = Actor(org_id=org.id)
        for bucket in (await engine.buckets.list(actor, None, 100)).items:
            held[str(bucket.location)] = await stored_names(engine, actor, bucket.id)
    snapshots = f"{brand}-snapshots"
    assert cluster_buckets(seaweed, brand) - {snapshots, f"{brand}-parts"} == set(held)
    for location, names in held.items():
        assert (location, cluster_objects(seaweed, location)) == (location, names)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_on_an_s3_cluster_a_server_snapshot_brings_back_every_bucket(
    kind: str, tmp_path: Path, seaweed: SeaweedServer, request: pytest.FixtureRequest
) -> None:
    s3 = cluster_settings(seaweed)
    config = cluster_config(tmp_path, s3, request, kind)
    engine = await Engine.open(config)
    try:
        actor, kept = await organization_with_bucket(engine)
        _, deleted = await organization_with_bucket(engine, versioning="Enabled")
        owner = Actor(org_id=(await engine.buckets.get_any(deleted)).org_id)
        await engine.files.put(actor, kept, "k", TEXT, chunks(b"kept"))
        await engine.files.put(owner, deleted, "v", TEXT, chunks(b"one"))
        await engine.files.put(owner, deleted, "v", TEXT, chunks(b"two"))
        await engine.files.put(owner, deleted, "gone", TEXT, chunks(b"marked"))
        await engine.files.delete(owner, deleted, "gone")
        before = await versions(engine, owner, deleted)
        server = await engine.snapshots.create_server(name="clean")
        assert (server.buckets, server.file_count) == (2, 5)
        folder = cluster_objects(seaweed, f"{s3.brand}-snapshots")
        assert len(folder) == 4 and {name.split("/")[0] for name in folder} == {server.id}

        name = (await engine.buckets.get(actor, kept)).name
        await engine.files.put(actor, kept, "k", TEXT, chunks(b"overwritten"))
        await engine.files.put(actor, kept, "new", TEXT, chunks(b"new"))
        await engine.buckets.update(actor, kept, {"name": "renamed-since"})
        made = await engine.buckets.create(actor, name, "us-east-1", at_once=True)
        await engine.files.put(actor, made.id, "m", TEXT, chunks(b"made since"))
        await engine.buckets.delete(owner, deleted, force=True)
        await engine.snapshots.restore_server(server.id)

        assert await read(engine, actor, kept, "k") == b"kept"
        assert (await engine.buckets.get(actor, kept)).name == name
        assert [b.id for b in (await engine.buckets.list(actor, None, 10)).items] == [kept]
        assert await versions(engine, owner, deleted) == before
        assert await read(engine, owner, deleted, "v") == b"two"
        await objects_match_rows(engine, seaweed, s3.brand)
        assert cluster_objects(seaweed, f"{s3.brand}-snapshots") == folder
        await consistent(engine)

        # A refused restore (a version under legal hold made since) changes nothing: the
        # copies it made and the cluster bucket it made again go.
        await engine.buckets.delete(owner, deleted, force=True)
        _, locked = await organization_with_bucket(engine, versioning="Enabled")
        holder = Actor(org_id=(await engine.buckets.get_any(locked)).org_id)
        await engine.buckets.set_object_lock(holder, locked, None)
        held = replace(TEXT, lock=Lock(legal_hold=True))
        await engine.files.put(holder, locked, "held", held, chunks(b"held"))
        with pytest.raises(ObjectLocked):
            await engine.snapshots.restore_server(server.id)
        await objects_match_rows(engine, seaweed, s3.brand)
        await consistent(engine)
        await engine.snapshots.restore_server(server.id, drop_locked=True)
        assert await versions(engine, owner, deleted) == before
        await objects_match_rows(engine, seaweed, s3.brand)
        await consistent(engine)

        await engine.snapshots.delete_server(server.id)
        assert cluster_objects(seaweed, f"{s3.brand}-snapshots") == set()
        assert await read(engine, owner, deleted, "v") == b"two"
        await consistent(engine)
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_a_server_restore_that_fails_before_its_commit_leaves_the_cluster_as_it_was(
    tmp_path: Path, seaweed: SeaweedServer
) -> None:
    """The cluster fails once every copy is made (an injected fault): the copies go, the
    cluster bucket made again goes, the index is untouched; run again, it restores."""
    s3 = cluster_settings(seaweed)
    config = EngineConfig(data_dir=tmp_path, storage=StorageSettings(backend="s3", s3=s3))
    failing = replace(config, faults="server_restore.before_commit=raise")
    engine = await Engine.open(failing)
    try:
        actor, kept = await organization_with_bucket(engine)
        _, deleted = await organization_with_bucket(engine)
        owner = Actor(org_id=(await engine.buckets.get_any(deleted)).org_id)
        await engine.files.put(actor, kept, "k", TEXT, chunks(b"kept"))
        await engine.files.put(owner, deleted, "d", TEXT, chunks(b"deleted"))
        server = await engine.snapshots.create_server()
        await engine.files.put(actor, kept, "k", TEXT, chunks(b"overwritten"))
        made = await engine.buckets.create(actor, "made-since", "us-east-1", at_once=True)
        await engine.buckets.delete(owner, deleted, force=True)
        with pytest.raises(RuntimeError, match="injected fault"):
            await engine.snapshots.restore_server(server.id)
        assert await read(engine, actor, kept, "k") == b"overwritten"
        assert {b.id for b in (await engine.buckets.list(actor, None, 10)).items} == {
            kept,
            made.id,
        }
        await objects_match_rows(engine, seaweed, s3.brand)
        await consistent(engine)
    finally:
        await engine.close()
    engine = await Engine.open(config)
    try:
        await engine.snapshots.restore_server(server.id)
        assert await read(engine, actor, kept, "k") == b"kept"
        assert await read(engine, owner, deleted, "d") == b"deleted"
        await objects_match_rows(engine, seaweed, s3.brand)
        await consistent(engine)
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_a_snapshot_whose_object_went_meanwhile_is_a_conflict_not_a_404(
    tmp_path: Path, seaweed: SeaweedServer, request: pytest.FixtureRequest
) -> None:
    """An object deleted between the listing of the versions and its copy (another
    client's delete, here its object removed behind the index's back so that the row
    stays) is left out of the copies; the rows then name a content not copied, so the
    snapshot is taken again and, the row never going, ends in a Conflict (try again): a
    404 for a file nobody asked about, before, failed snapshots of busy servers."""
    s3 = cluster_settings(seaweed)
    engine = await Engine.open(cluster_config(tmp_path, s3, request))
    try:
        actor, bucket = await organization_with_bucket(engine)
        await engine.files.put(actor, bucket, "kept", TEXT, chunks(b"kept"))
        gone = await engine.files.put(actor, bucket, "gone", TEXT, chunks(b"gone"))
        location = str((await engine.buckets.get(actor, bucket)).location)
        seaweed.client().delete_object(Bucket=location, Key=stored_under(gone))
        with pytest.raises(Conflict):
            await engine.snapshots.create_server(name="busy")
        with pytest.raises(Conflict):
            await engine.snapshots.create(actor, bucket, name="busy")
        assert cluster_objects(seaweed, f"{s3.brand}-snapshots") == set()  # copies gone
        await engine.files.delete(actor, bucket, "gone")
        taken = await engine.snapshots.create_server(name="quiet")
        assert taken.file_count == 1
    finally:
        await engine.close()
