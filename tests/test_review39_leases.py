"""A hostile review of the S3 write leases (storage/backends/s3/settle.py): what a bad
reservation row or a writer stalled past its lease does to the reads and writes of its key,
against PostgreSQL and SeaweedFS with two engines (as tests/test_write_leases.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import pytest

from storage.attributes import Attributes
from storage.config import EngineConfig
from storage.engine import Engine
from storage.index.sql import Script, run, write
from storage.models import Actor
from tests.support.databases import gateway_configs
from tests.support.engine import chunks, read_through
from tests.support.engines import organization_with_bucket
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # PostgreSQL and SeaweedFS

LEASE = 0.3
SENT = Attributes("text/markdown", metadata=json.dumps({"colour": "blue"}))


def leased(config: EngineConfig, faults: str = "", lease: float = LEASE) -> EngineConfig:
    s3 = dataclasses.replace(config.storage.s3, write_lease_seconds=lease)
    storage = dataclasses.replace(config.storage, s3=s3)
    return dataclasses.replace(config, storage=storage, faults=faults)


async def setup(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> tuple[EngineConfig, Engine, Actor, str]:
    """A gateway's config (`a`), another gateway (`b`), and `k` written through `b`."""
    config_a, config_b = gateway_configs(tmp_path, postgres, seaweed)
    b = await Engine.open(config_b)
    actor, bucket_id = await organization_with_bucket(b)
    await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"old"))
    return config_a, b, actor, bucket_id


@write
def overwrite_commit_with(key: str, text: str) -> Script[None]:
    yield run("UPDATE reservations SET commit_with = ? WHERE key = ?", text, key)


async def cut_off(engine_config: EngineConfig, actor: Actor, bucket_id: str, key: str) -> None:
    """Write `key` through a gateway whose write dies right after its publish."""
    dying = await Engine.open(leased(engine_config, "put.after_publish=raise"))
    try:
        with pytest.raises(RuntimeError, match="injected fault"):
            await dying.files.put(actor, bucket_id, key, SENT, chunks(b"cut off " + key.encode()))
    finally:
        await dying.close()


async def test_a_reader_settles_a_write_whose_commit_with_is_not_json(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """A row whose `commit_with` does not decode (damaged, or written by another version of
    bucketd) made every read of its key fail with a JSONDecodeError (a 500), and every write
    of it too, forever: the write is settled with what its row's columns say instead."""
    config_a, b, actor, bucket_id = await setup(tmp_path, postgres, seaweed)
    try:
        await cut_off(config_a, actor, bucket_id, "k")
        await b._index.run(overwrite_commit_with, "k", "{not json")
        record, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"cut off k"
        assert record.content_type == SENT.content_type  # its own column
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()


async def test_heal_goes_past_a_write_whose_commit_with_has_another_shape(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """heal settles the lapsed writes in the order they were made: one whose `commit_with`
    names an attribute this version does not know raised a TypeError out of heal, which
    killed the janitor (it survives StorageError only): no write behind it was ever settled,
    and no abandoned upload expired again."""
    config_a, b, actor, bucket_id = await setup(tmp_path, postgres, seaweed)
    try:
        await cut_off(config_a, actor, bucket_id, "k")
        await cut_off(config_a, actor, bucket_id, "k2")
        shape = '{"attrs": {"future_column": 1}, "event": "put"}'
        await b._index.run(overwrite_commit_with, "k", shape)
        await asyncio.sleep(LEASE)
        await b._commits.heal(time.time() - 3600)
        k2 = await b.files.get(actor, bucket_id, "k2")  # committed by heal: no reread
        assert (k2.content_type, k2.metadata) == (SENT.content_type, SENT.metadata)
        k = await b.files.get(actor, bucket_id, "k")
        assert k.content_type == SENT.content_type
        _, content = await read_through(b, actor, bucket_id, "k")
        assert content == b"cut off k"
        assert await b.maintenance.check_consistency() == []
    finally:
        await b.close()
