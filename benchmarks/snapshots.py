"""Snapshots of a bucket of many objects (issue 35 point 1): the time to take a snapshot,
restore it, fork it and delete it, in the engine in process (no HTTP: what is measured is
the index's work, which copies rows, never bytes).

The bucket is filled through the engine (`objects` small distinct contents kept inline, no
fsync: the fill is not what is measured); the measurements run on an index opened again
with fsync on, as `bucketd serve` runs. Before each restore a hundred objects are
overwritten and a hundred added, so the restore has versions to drop and to put back. On
SQLite (the data dir's index file) and, with `postgres`, on an embedded PostgreSQL.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

from storage.attributes import Attributes
from storage.config import EngineConfig, IndexSettings, StorageSettings
from storage.engine import Engine
from storage.models import Actor

T = TypeVar("T")
ROUNDS = 5
CHANGED = 100
TEXT = Attributes("text/plain")


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _timed(call: Awaitable[T], times: list[float]) -> T:
    """`call` (a coroutine not yet started) awaited, its milliseconds added to `times`."""
    begun = time.perf_counter()
    result = await call
    times.append((time.perf_counter() - begun) * 1000)
    return result


async def _fill(config: EngineConfig, objects: int) -> tuple[Actor, str]:
    engine = await Engine.open(config)
    try:
        actor = Actor(org_id=(await engine.orgs.create("bench", "pro")).id)
        bucket = await engine.buckets.create(actor, "snapshots", "us-east-1", at_once=True)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for number in range(objects):
            queue.put_nowait(number)

        async def worker() -> None:
            while not queue.empty():
                number = queue.get_nowait()
                key = f"dir{number % 100:02d}/file-{number:07d}"
                await engine.files.put(actor, bucket.id, key, TEXT, _body(key.encode()))

        await asyncio.gather(*(worker() for _ in range(64)))
        return actor, bucket.id
    finally:
        await engine.close()


async def _measure(
    config: EngineConfig, actor: Actor, bucket_id: str, objects: int
) -> dict[str, Any]:
    engine = await Engine.open(config)
    times: dict[str, list[float]] = {"snapshot": [], "restore": [], "fork": [], "delete": []}
    try:
        for round_ in range(ROUNDS):
            snapshot = await _timed(engine.snapshots.create(actor, bucket_id), times["snapshot"])
            assert snapshot.file_count == objects, snapshot
            for number in range(CHANGED):
                key = f"dir{number % 100:02d}/file-{number:07d}"
                await engine.files.put(actor, bucket_id, key, TEXT, _body(b"changed"))
                await engine.files.put(
                    actor, bucket_id, f"new/{round_}/{number}", TEXT, _body(b"n")
                )
            restored = await _timed(engine.snapshots.restore(actor, snapshot.id), times["restore"])
            assert restored.file_count == objects, restored
            fork = await _timed(
                engine.snapshots.fork(actor, snapshot.id, f"fork-{round_}"), times["fork"]
            )
            assert fork.file_count == objects, fork
            await engine.buckets.delete(actor, fork.id, force=True)
            await _timed(engine.snapshots.delete(actor, snapshot.id), times["delete"])
        problems = await engine.maintenance.check_consistency()
        assert problems == [], problems[:5]
    finally:
        await engine.close()
    return {op: round(statistics.median(ms), 1) for op, ms in times.items()}


def _on(index: IndexSettings, objects: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-snapshots-"))
    try:
        storage = StorageSettings(fsync=False, inline_max_bytes=64)
        filling = EngineConfig(data_dir=base, storage=storage, index=index)
        started = time.perf_counter()
        actor, bucket_id = asyncio.run(_fill(filling, objects))
        fill_seconds = time.perf_counter() - started
        measuring = EngineConfig(
            data_dir=base, storage=StorageSettings(inline_max_bytes=64), index=index
        )
        medians = asyncio.run(_measure(measuring, actor, bucket_id, objects))
        return {**medians, "fill_seconds": round(fill_seconds, 1)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(objects: int = 10_000, postgres: bool = False) -> dict[str, Any]:
    """Median milliseconds of `ROUNDS` snapshots, restores, forks and deletes of a bucket of
    `objects` objects, per index."""
    result: dict[str, Any] = {"objects": objects, "rounds": ROUNDS}
    result["sqlite"] = _on(IndexSettings(), objects)
    if postgres:
        from tests.support.postgres import Postgres

        server = Postgres(Path(tempfile.mkdtemp(prefix="bucketd-bench-pg-")))
        try:
            result["postgres"] = _on(IndexSettings(url=server.new_database()), objects)
        finally:
            server.stop()
    return result
