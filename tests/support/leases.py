"""Two gateways over one PostgreSQL index and one SeaweedFS cluster, for the tests of the S3
backend's write leases: gateway A (a config, opened by the test, often with a fault point
and a short lease) and gateway B (an engine) that meets what A left."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from storage import encryption
from storage.attributes import Attributes, copied
from storage.backends.s3.names import STAGING_PREFIX
from storage.config import EngineConfig
from storage.engine import Engine
from storage.index import reservations
from storage.models import Actor, FileRecord, WriteOptions
from tests.support.databases import gateway_configs
from tests.support.engine import chunks, read_through
from tests.support.engines import OnItsOwnLoop, organization_with_bucket
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer

LEASE = 0.3
"""Gateway A's write lease: short, so that its lapse costs the tests little."""


def leased(config: EngineConfig, faults: str = "", lease: float = LEASE) -> EngineConfig:
    """`config` with a write lease of `lease` seconds and the fault points `faults`."""
    s3 = dataclasses.replace(config.storage.s3, write_lease_seconds=lease)
    storage = dataclasses.replace(config.storage, s3=s3)
    return dataclasses.replace(config, storage=storage, faults=faults)


async def two_gateways(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> tuple[EngineConfig, Engine, Actor, str]:
    """Gateway A's config, gateway B, and a bucket whose key `k` B wrote ("old")."""
    config_a, config_b = gateway_configs(tmp_path, postgres, seaweed)
    b = await Engine.open(config_b)
    actor, bucket_id = await organization_with_bucket(b)
    await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), chunks(b"old"))
    return config_a, b, actor, bucket_id


async def until_reserved(engine: Engine, bucket_id: str, key: str) -> None:
    """Wait until a write of `key` (gateway A's) holds its reservation."""
    deadline = time.monotonic() + 20
    while not await engine._index.run(reservations.on_key, bucket_id, key):
        assert time.monotonic() < deadline, "A never reserved"
        await asyncio.sleep(0.01)


async def sealed_source(
    b: Engine, actor: Actor, bucket_id: str, content: bytes, attrs: Attributes
) -> FileRecord:
    """`src` encrypted at rest (SSE-S3): a copy of it gets an ETag known only once copied
    (`commits._copy_etag`), as a multipart source's does on a cluster that gives those an
    ETag of the parts' form."""
    sealed = WriteOptions(encryption=encryption.SSE_S3)
    await b.files.put(actor, bucket_id, "src", attrs, chunks(content), options=sealed)
    source = await b.files.get(actor, bucket_id, "src")
    assert source.encryption is not None
    return source


def staged_objects(seaweed: SeaweedServer, location: str | None) -> list[str]:
    """The staged copies' objects the cluster holds in `location` (`names.staging`)."""
    listed = seaweed.client().list_objects_v2(Bucket=location, Prefix=STAGING_PREFIX)
    return [item["Key"] for item in listed.get("Contents", [])]


async def copy_cut_off(
    config: EngineConfig, fault: str, actor: Actor, source: FileRecord, bucket_id: str
) -> None:
    """Copy `source` onto `k` through a gateway whose copy dies at the fault point `fault`."""
    dying = await Engine.open(leased(config, f"{fault}=raise"))
    try:
        with pytest.raises(RuntimeError, match="injected fault"):
            await dying.files.copy(actor, source, bucket_id, "k", copied(source))
    finally:
        await dying.close()


def stalled(
    config: EngineConfig, point: str, operation: Callable[[Engine], Awaitable[Any]]
) -> OnItsOwnLoop:
    """Gateway A doing `operation`, stalled 1.5 s at the fault point `point`: five of its
    leases."""
    return OnItsOwnLoop(leased(config, f"{point}=sleep:1.5"), operation)


def stalled_copy(
    config: EngineConfig, point: str, actor: Actor, source: FileRecord, bucket_id: str
) -> OnItsOwnLoop:
    """Gateway A copying `source` onto `k`, stalled at `point`."""
    return stalled(
        config, point, lambda a: a.files.copy(actor, source, bucket_id, "k", copied(source))
    )


async def past_its_lease(b: Engine, bucket_id: str) -> None:
    """Once A's write of `k` holds its reservation, until its lease has lapsed (A stalled)."""
    await until_reserved(b, bucket_id, "k")
    await asyncio.sleep(LEASE + 0.1)


def stalled_put(
    config: EngineConfig, point: str, actor: Actor, bucket_id: str, content: bytes, sent: Attributes
) -> OnItsOwnLoop:
    """Gateway A writing `content` to `k` with `sent`, stalled at `point`."""
    return stalled(
        config, point, lambda a: a.files.put(actor, bucket_id, "k", sent, chunks(content))
    )


async def until_read(b: Engine, actor: Actor, bucket_id: str, content: bytes) -> None:
    """Until B reads `content` at `k` (A's stalled write, once published and settled)."""
    deadline = time.monotonic() + 20
    while (await read_through(b, actor, bucket_id, "k"))[1] != content:
        assert time.monotonic() < deadline, "A's write was never read"
        await asyncio.sleep(0.02)
