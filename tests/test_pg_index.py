"""Two engines (two gateways) over one PostgreSQL index and one S3 cluster, at once: usage
and quotas stay exact, concurrent overwrites leave one whole version, and each sees the
other's writes immediately."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage.attributes import Attributes
from storage.engine import Engine
from storage.errors import FileNotFound, QuotaExceeded
from storage.index import reservations
from storage.models import Actor
from storage.rules.sharing import Sharing
from tests.support.databases import QUOTA, gateway_configs
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer


async def body(data: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(data), 4096):
        yield data[i : i + 4096]
        await asyncio.sleep(0)


async def two_gateways(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> tuple[Engine, Engine]:
    a, b = gateway_configs(tmp_path, postgres, seaweed)
    return await Engine.open(a), await Engine.open(b)


async def active_bucket(engine: Engine, actor: Actor, name: str) -> str:
    bucket = await engine.buckets.create(actor, name, "us-east-1")
    while (await engine.buckets.get(actor, bucket.id)).status != "active":
        await asyncio.sleep(0.01)
    return bucket.id


async def read(engine: Engine, actor: Actor, bucket_id: str, key: str) -> bytes:
    record = await engine.files.get(actor, bucket_id, key)
    return b"".join([chunk async for chunk in await engine.files.open(record, 0, record.size)])


@pytest.mark.anyio
@pytest.mark.serial  # a sleep between one gateway's publish and its commit
async def test_a_gateway_publishing_a_key_makes_the_other_wait_its_turn(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """Gateway A publishes `k` and stalls before its commit; B's write of `k` waits for A's
    commit, then publishes and commits its own. Without the wait B's object replaced A's in
    the cluster, A's commit then named A's object, and `k` read as missing."""
    slow_a, config_b = gateway_configs(tmp_path, postgres, seaweed)
    slow_a = dataclasses.replace(slow_a, faults="put.after_publish=sleep:2.0")
    b = await Engine.open(config_b)
    failures: list[BaseException] = []
    try:
        actor = Actor(org_id=(await b.orgs.create("turns", "pro")).id)
        bucket_id = await active_bucket(b, actor, "turns")

        async def write_on_a() -> None:
            a = await Engine.open(slow_a)
            try:
                await a.files.put(actor, bucket_id, "k", Attributes("text/plain"), body(b"from a"))
            finally:
                await a.close()

        def gateway_a() -> None:  # a loop of its own: the fault's sleep blocks it
            try:
                asyncio.run(write_on_a())
            except BaseException as exc:
                failures.append(exc)

        thread = threading.Thread(target=gateway_a)
        thread.start()
        while not await b._index.run(reservations.settleable, time.time() + 60, 0):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # A has published and sleeps before its commit
        await b.files.put(actor, bucket_id, "k", Attributes("text/plain"), body(b"from b"))
        await asyncio.to_thread(thread.join, 30)
        assert failures == []
        assert await read(b, actor, bucket_id, "k") == b"from b"
    finally:
        await b.close()


@pytest.mark.anyio
@pytest.mark.slow  # two gateways on one PostgreSQL and SeaweedFS
async def test_two_gateways_share_one_index(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    a, b = await two_gateways(tmp_path, postgres, seaweed)
    try:
        org = await a.orgs.create("shared", "pro")
        actor = Actor(org_id=org.id)
        bucket_id = await active_bucket(a, actor, "shared")
        assert (await b.buckets.get(actor, bucket_id)).status == "active"

        await a.files.put(
            actor, bucket_id, "from-a", Attributes("text/plain"), body(b"written on a")
        )
        assert await read(b, actor, bucket_id, "from-a") == b"written on a"

        versions = {f"version {n} ".encode() * (500 + n) for n in range(16)}
        distinct = [(f"k{n}", f"content {n}".encode() * 50) for n in range(30)]
        writes = [
            gateway.files.put(
                actor, bucket_id, "contested", Attributes("text/plain"), body(content)
            )
            for gateway, content in zip([a, b] * 8, sorted(versions), strict=True)
        ]
        writes += [
            (a if n % 2 else b).files.put(
                actor, bucket_id, key, Attributes("text/plain"), body(content)
            )
            for n, (key, content) in enumerate(distinct)
        ]
        await asyncio.gather(*writes)
        deletes = [(a if n % 2 else b).files.delete(actor, bucket_id, f"k{n}") for n in range(10)]
        await asyncio.gather(*deletes)

        assert await read(a, actor, bucket_id, "contested") in versions
        record = await b.files.get(actor, bucket_id, "contested")
        content = await read(b, actor, bucket_id, "contested")
        assert record.sha256 == hashlib.sha256(content).hexdigest()
        for n, (key, content) in enumerate(distinct):
            if n < 10:
                with pytest.raises(FileNotFound):
                    await a.files.get(actor, bucket_id, key)
            else:
                assert await read(a if n % 2 else b, actor, bucket_id, key) == content

        page = await b.files.list(actor, bucket_id, limit=100)
        assert len(page.items) == 1 + 1 + 20
        usage = await a.orgs.get(org.id)
        assert usage.stored_bytes == sum(f.size for f in page.items)
        assert await a.maintenance.check_consistency() == []
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
async def test_a_buckets_rate_without_a_key_is_read_by_every_gateway(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    """The rate a bucket's owner sets for requests without a key (migration 0018) is the
    index's: made and changed through one gateway, read through the other."""
    a, b = await two_gateways(tmp_path, postgres, seaweed)
    try:
        actor = Actor(org_id=(await a.orgs.create("rates", "pro")).id)
        made = await a.buckets.create(actor, "rated", "us-east-1", sharing=Sharing(anonymous_rpm=5))
        assert (await b.buckets.get_any(made.id)).anonymous_rpm == 5
        await b.buckets.update(actor, made.id, {"anonymous_rpm": 0})
        assert (await a.buckets.get_any(made.id)).anonymous_rpm == 0
        await a.buckets.update(actor, made.id, {"anonymous_rpm": None})
        assert (await b.buckets.get_any(made.id)).anonymous_rpm is None
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
async def test_a_quota_holds_across_gateways(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    a, b = await two_gateways(tmp_path, postgres, seaweed)
    try:
        org = await a.orgs.create("tight", "free")
        actor = Actor(org_id=org.id)
        bucket_id = await active_bucket(b, actor, "tight")
        results = await asyncio.gather(
            *[
                (a if n % 2 else b).files.put(
                    actor, bucket_id, f"f{n}", Attributes("text/plain"), body(b"x" * 1000)
                )
                for n in range(30)
            ],
            return_exceptions=True,
        )
        stored = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, QuotaExceeded)]
        assert len(stored) == QUOTA // 1000 and len(refused) == 30 - len(stored)
        assert (await b.orgs.get(org.id)).stored_bytes == QUOTA
        assert await b.maintenance.check_consistency() == []
    finally:
        await a.close()
        await b.close()
