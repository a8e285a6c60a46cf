"""The services' rules at the unit level: the engine in process over an index held in
memory (tests/support/engines.py), no HTTP. What a version carries through the writes
that make one (issue 33), quotas, conditions and locks, each decided by the services
whichever protocol asks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from storage.attributes import Attributes, copied
from storage.config import PlanLimits, Plans
from storage.errors import FileNotFound, ObjectLocked, PreconditionFailed, QuotaExceeded
from storage.models import Condition, DeleteCondition, WriteOptions
from storage.rules.object_lock import BucketLock, Lock
from tests.support.engines import memory_engine, organization_with_bucket
from tests.support.live import LiveServer, new_bucket

FULL = Attributes(
    "text/plain",
    metadata=json.dumps({"m": "a"}),
    headers=json.dumps({"Cache-Control": "max-age=1"}),
    tags=json.dumps({"t": "a"}),
    acl="public-read",
)


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.mark.anyio
async def test_a_copy_keeps_what_the_rule_keeps_and_never_the_acl(tmp_path: Path) -> None:
    async with memory_engine(tmp_path) as engine:
        actor, bucket = await organization_with_bucket(engine)
        source = await engine.files.put(actor, bucket, "src", FULL, chunks(b"x"))
        kept = await engine.files.copy(actor, source, bucket, "kept", copied(source))
        assert (kept.metadata, kept.headers, kept.tags, kept.acl) == (
            FULL.metadata,
            FULL.headers,
            FULL.tags,
            None,
        )
        asked = Attributes("text/csv", tags=json.dumps({"t": "b"}))
        replaced = await engine.files.copy(
            actor, source, bucket, "replaced", copied(source, asked, tags=asked.tags)
        )
        assert (replaced.content_type, replaced.metadata, replaced.tags) == (
            "text/csv",
            None,
            asked.tags,
        )
        untagged = await engine.files.copy(actor, source, bucket, "bare", copied(source, tags=""))
        assert untagged.tags is None


@pytest.mark.anyio
async def test_a_restored_version_carries_what_it_carried(tmp_path: Path) -> None:
    async with memory_engine(tmp_path) as engine:
        actor, bucket = await organization_with_bucket(engine, versioning="Enabled")
        old = await engine.files.put(actor, bucket, "k", FULL, chunks(b"old"))
        await engine.files.put(actor, bucket, "k", Attributes("text/csv"), chunks(b"new"))
        restored = await engine.files.restore(actor, bucket, "k", old.version_id)
        assert (restored.content_type, restored.metadata, restored.tags, restored.acl) == (
            "text/plain",
            FULL.metadata,
            FULL.tags,
            None,
        )


@pytest.mark.anyio
async def test_the_quota_counts_every_version_kept(tmp_path: Path) -> None:
    plans = Plans(free=PlanLimits(max_storage_bytes=1000))
    async with memory_engine(tmp_path, plans=plans) as engine:
        actor, bucket = await organization_with_bucket(engine, "free", versioning="Enabled")
        half = b"x" * 500
        await engine.files.put(actor, bucket, "k", Attributes("text/plain"), chunks(half))
        await engine.files.put(actor, bucket, "k", Attributes("text/plain"), chunks(half))
        with pytest.raises(QuotaExceeded):
            await engine.files.put(actor, bucket, "k", Attributes("text/plain"), chunks(half))


@pytest.mark.anyio
async def test_conditions_hold_in_the_transaction(tmp_path: Path) -> None:
    async with memory_engine(tmp_path) as engine:
        actor, bucket = await organization_with_bucket(engine)
        plain = Attributes("text/plain")
        first = await engine.files.put(actor, bucket, "k", plain, chunks(b"a"))
        create_only = WriteOptions(condition=Condition(if_none_match_any=True))
        with pytest.raises(PreconditionFailed):
            await engine.files.put(actor, bucket, "k", plain, chunks(b"b"), options=create_only)
        with pytest.raises(PreconditionFailed):
            await engine.files.delete(
                actor, bucket, "k", condition=DeleteCondition(if_match='"nope"')
            )
        assert (await engine.files.get(actor, bucket, "k")).sha256 == first.sha256


@pytest.mark.anyio
async def test_a_legal_hold_keeps_a_version_whatever_asks(tmp_path: Path) -> None:
    async with memory_engine(tmp_path) as engine:
        actor, bucket = await organization_with_bucket(engine, object_lock=BucketLock())
        held = replace(Attributes("text/plain"), lock=Lock(legal_hold=True))
        record = await engine.files.put(actor, bucket, "k", held, chunks(b"x"))
        with pytest.raises(ObjectLocked):
            await engine.files.delete_version(actor, bucket, "k", record.version_id)
        await engine.files.protect(actor, bucket, "k", record.version_id, legal_hold=False)
        await engine.files.delete_version(actor, bucket, "k", record.version_id)
        with pytest.raises(FileNotFound):
            await engine.files.get_version(actor, bucket, "k", record.version_id)


def test_an_index_in_memory_is_one_process(tmp_path: Path) -> None:
    """Each process would hold an index of its own: one worker, webhooks delivered by the
    serving process, and more workers refused."""
    from gateway.settings import SettingsError, load_settings

    memory = {"BUCKETD_INDEX__URL": "sqlite://:memory:"}
    settings = load_settings(None, memory, {"data_dir": tmp_path})
    assert (settings.worker_count(), settings.delivery_process()) == (1, False)
    with pytest.raises(SettingsError):
        load_settings(None, {**memory, "BUCKETD_WORKERS": "2"}, {"data_dir": tmp_path})


def test_a_throwaway_server_holds_its_index_in_memory(tmp_path: Path) -> None:
    """Its admin key is printed at start as ever; the CLI's commands, which open the data
    dir's index, have none to open."""
    live = LiveServer(tmp_path / "data", config='[index]\nurl = "sqlite://:memory:"\n').start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "throwaway")
            put = http.put(
                f"/buckets/{bucket['id']}/files/k",
                content=b"kept while it runs",
                headers={"Content-Type": "text/plain"},
            )
            assert put.status_code == 201, put.text
            got = http.get(f"/buckets/{bucket['id']}/files/k")
            assert got.content == b"kept while it runs"
        assert not (tmp_path / "data" / "index.db").exists()
    finally:
        live.stop()
