"""The operator's tools over snapshots (issue 35, point 1). The deep check re-hashes the
contents only snapshots hold: a blob a deleted file left to a snapshot alone is still
verified by `bucketd check --deep` and the background scrub, on disk and (the snapshot's
own copies) in an S3 cluster. `bucketd export --snapshot` writes the files a snapshot
held, from a stopped data dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.config import EngineConfig, IndexSettings, StorageSettings
from storage.engine import Engine
from tests.support import launch
from tests.support.engines import organization_with_bucket
from tests.support.seaweed import SeaweedServer
from tests.support.snapshots import TEXT, chunks, cluster_objects, cluster_settings

CONTENT = b"only a snapshot keeps this content"


@pytest.mark.anyio
async def test_check_deep_names_a_rotten_blob_only_a_snapshot_holds(tmp_path: Path) -> None:
    data = tmp_path / "data"
    blob_files = StorageSettings(fsync=False, inline_max_bytes=0)  # the blob file rots
    engine = await Engine.open(EngineConfig(data_dir=data, storage=blob_files))
    try:
        actor, bucket = await organization_with_bucket(engine)
        record = await engine.files.put(actor, bucket, "kept.txt", TEXT, chunks(CONTENT))
        await engine.files.put(actor, bucket, "sound.txt", TEXT, chunks(b"sound"))
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.files.delete(actor, bucket, "kept.txt")
        assert await engine.scrub.run() == []
    finally:
        await engine.close()
    blob = data / "blobs" / record.sha256[:2] / record.sha256[2:4] / record.sha256
    rotten = bytearray(blob.read_bytes())
    rotten[3] ^= 0x01
    os.chmod(blob, 0o644)
    blob.write_bytes(bytes(rotten))

    result = launch.run(["check", "--deep", "--data-dir", str(data)], env=dict(os.environ))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"snapshot {snapshot.id} of bucket" in result.stdout
    assert "'kept.txt': corrupt" in result.stdout and "1 problems" in result.stdout
    assert "sound.txt" not in result.stdout


@pytest.mark.anyio
async def test_the_scrub_reads_a_snapshots_own_copies_in_the_cluster(
    tmp_path: Path, seaweed: SeaweedServer
) -> None:
    """On S3 a snapshot's contents are copies in `<brand>-snapshots`: one replaced behind
    bucketd's back (same size, other bytes) is found, as a missing content (every read names
    the object's ETag, which no longer matches)."""
    s3 = cluster_settings(seaweed)
    config = EngineConfig(
        data_dir=tmp_path, index=IndexSettings(), storage=StorageSettings(backend="s3", s3=s3)
    )
    engine = await Engine.open(config)
    try:
        actor, bucket = await organization_with_bucket(engine)
        await engine.files.put(actor, bucket, "kept.txt", TEXT, chunks(CONTENT))
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.files.delete(actor, bucket, "kept.txt")
        assert await engine.scrub.run() == []
        (copy,) = cluster_objects(seaweed, f"{s3.brand}-snapshots")
        rotten = CONTENT.replace(b"only", b"ONLY")
        seaweed.client().put_object(Bucket=f"{s3.brand}-snapshots", Key=copy, Body=rotten)
        problems = await engine.scrub.run()
        assert len(problems) == 1 and problems[0].startswith(f"snapshot {snapshot.id} ")
        assert "'kept.txt': missing" in problems[0] and engine.scrub.found["missing"] == 1
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_export_writes_the_files_a_snapshot_held(tmp_path: Path) -> None:
    data = tmp_path / "data"
    engine = await Engine.open(EngineConfig(data_dir=data, storage=StorageSettings(fsync=False)))
    try:
        actor, bucket = await organization_with_bucket(engine, versioning="Enabled")
        await engine.files.put(actor, bucket, "a.txt", TEXT, chunks(b"first"))
        await engine.files.put(actor, bucket, "a.txt", TEXT, chunks(b"one"))
        await engine.files.put(actor, bucket, "b/c.txt", TEXT, chunks(b"two"))
        await engine.files.put(actor, bucket, "gone.txt", TEXT, chunks(b"marked"))
        await engine.files.delete(actor, bucket, "gone.txt")
        snapshot = await engine.snapshots.create(actor, bucket)
        await engine.files.put(actor, bucket, "a.txt", TEXT, chunks(b"changed since"))
        await engine.files.delete(actor, bucket, "b/c.txt")
        await engine.files.put(actor, bucket, "new.txt", TEXT, chunks(b"new"))
    finally:
        await engine.close()
    env = dict(os.environ)
    target = tmp_path / "export"

    result = launch.run(
        ["export", "--snapshot", snapshot.id, str(target), "--data-dir", str(data)], env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    written = {
        str(path.relative_to(target)): path.read_bytes()
        for path in target.rglob("*")
        if path.is_file()
    }
    assert written == {"a.txt": b"one", "b/c.txt": b"two"}

    missing = launch.run(
        ["export", "--snapshot", "snap_missing", str(target), "--data-dir", str(data)], env=env
    )
    assert missing.returncode != 0 and "snapshot not found" in missing.stderr
    through_a_server = launch.run(["export", "--snapshot", snapshot.id, str(target)], env=env)
    assert through_a_server.returncode == 2
    assert "fork the snapshot and export the fork" in through_a_server.stderr
