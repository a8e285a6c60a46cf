"""Listing a bucket of many keys page by page: the cost of the first page against the last.

The bucket is filled through the engine in-process (empty files, no fsync: the fill is not
what is measured), then a live server lists it through /v1 with `limit=100` to the end.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from storage.attributes import Attributes
from storage.config import EngineConfig, StorageSettings
from storage.engine import Engine
from storage.models import Actor
from tests.support.live import LiveServer

CONFIG = """
[plans.pro]
requests_per_minute = 1000000000
max_buckets = 1000000
max_storage_bytes = 1125899906842624
"""


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


async def fill(data_dir: Path, keys: int) -> str:
    """Make a bucket of `keys` empty files; returns a key that can read it."""
    storage = StorageSettings(fsync=False, inline_max_bytes=16)
    engine = await Engine.open(EngineConfig(data_dir=data_dir, storage=storage))
    try:
        org = await engine.orgs.create("default", "pro")
        _, secret = await engine.keys.create(org.id, "lister", ["buckets:read", "files:read"])
        actor = Actor(org_id=org.id)
        bucket = await engine.buckets.create(actor, "listing", "us-east-1")
        while (await engine.buckets.get(actor, bucket.id)).status != "active":
            await asyncio.sleep(0.01)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for number in range(keys):
            queue.put_nowait(number)

        async def worker() -> None:
            while not queue.empty():
                number = queue.get_nowait()
                key = f"dir{number % 100:02d}/file-{number:07d}"
                await engine.files.put(actor, bucket.id, key, Attributes("text/plain"), _nothing())

        await asyncio.gather(*(worker() for _ in range(64)))
    finally:
        await engine.close()
    return secret


def run(keys: int = 100_000) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-list-"))
    started = time.perf_counter()
    secret = asyncio.run(fill(base / "data", keys))
    fill_seconds = time.perf_counter() - started
    live = LiveServer(base / "data", CONFIG).start()
    try:
        with httpx.Client(
            base_url=live.url + "/v1", headers={"Authorization": f"Bearer {secret}"}
        ) as http:
            bucket = http.get("/buckets").json()["data"][0]["id"]
            timings: list[float] = []
            seen = 0
            cursor = None
            while True:
                params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
                begun = time.perf_counter()
                body = http.get(f"/buckets/{bucket}/files", params=params).json()
                timings.append((time.perf_counter() - begun) * 1000)
                seen += len(body["data"])
                cursor = body["meta"]["nextCursor"]
                if cursor is None:
                    break
    finally:
        live.stop()
    assert seen == keys, seen
    return {"keys": keys, "fill_seconds": round(fill_seconds, 1), **ends(timings)}


def ends(timings: list[float]) -> dict[str, Any]:
    """A listing's page times (ms): the median of the first five pages against the last
    five."""
    first = statistics.median(timings[:5])
    last = statistics.median(timings[-5:])
    return {
        "pages": len(timings),
        "first_pages_ms": round(first, 2),
        "last_pages_ms": round(last, 2),
        "median_page_ms": round(statistics.median(timings), 2),
        "last_vs_first": round(last / first, 2),
    }
