"""The engine in process over an index held in memory: the services' unit level, with no
server, no index file and no thread per test (`index.url = "sqlite://:memory:"`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from storage.config import EngineConfig, IndexSettings, LifecycleSettings, StorageSettings
from storage.engine import Engine
from storage.models import Actor
from tests.support.names import unique_name


@asynccontextmanager
async def memory_engine(data_dir: Path, **config: Any) -> AsyncIterator[Engine]:
    """An engine whose index lives in memory (contents on `data_dir`), closed after."""
    engine = await Engine.open(
        EngineConfig(
            data_dir=data_dir,
            index=IndexSettings(url="sqlite://:memory:"),
            storage=StorageSettings(fsync=False),
            lifecycle=LifecycleSettings(interval_seconds=0),
            **config,
        )
    )
    try:
        yield engine
    finally:
        await engine.close()


async def organization_with_bucket(
    engine: Engine, plan: str = "pro", **fields: Any
) -> tuple[Actor, str]:
    """A new organization's actor and an active bucket of it."""
    org = await engine.orgs.create(unique_name("org"), plan)
    actor = Actor(org_id=org.id)
    bucket = await engine.buckets.create(actor, unique_name("b"), "us-east-1", **fields)
    while (await engine.buckets.get(actor, bucket.id)).status != "active":
        await asyncio.sleep(0.001)
    return actor, bucket.id


@asynccontextmanager
async def engine_on(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Engine]:
    """An engine over an index in memory, or (`postgres`) a new database of the session's
    PostgreSQL, with blobs on disk."""
    if kind == "memory":
        async with memory_engine(tmp_path) as engine:
            yield engine
        return
    config = EngineConfig(
        data_dir=tmp_path,
        index=IndexSettings(url=request.getfixturevalue("postgres").new_database()),
        storage=StorageSettings(fsync=False),
    )
    engine = await Engine.open(config)
    try:
        yield engine
    finally:
        await engine.close()


class OnItsOwnLoop:
    """An operation of another gateway: an engine opened on `config` in a thread of its own,
    with an event loop of its own (so a fault point's sleep there stalls that gateway, not
    the test), doing `operation` once; what it answered (or raised) lands in `answered`."""

    def __init__(self, config: EngineConfig, operation: Callable[[Engine], Awaitable[Any]]) -> None:
        self.answered: list[Any] = []
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run(config, operation)))
        self.thread.start()

    async def _run(
        self, config: EngineConfig, operation: Callable[[Engine], Awaitable[Any]]
    ) -> None:
        engine = await Engine.open(config)
        try:
            self.answered.append(await operation(engine))
        except BaseException as exc:
            self.answered.append(exc)
        finally:
            await engine.close()

    async def ended(self) -> None:
        await asyncio.to_thread(self.thread.join, 30)
