"""ListObjectVersions over a bucket of many versions: the cost of the first page against the
last, on the S3 endpoint (boto3, 1,000 per page) and on /v1 (100 per page).

The bucket is filled through the engine in-process (empty versions, no fsync: the fill is
not what is measured): `keys` keys of `per_key` versions each, every tenth key ending in a
delete marker.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from storage.attributes import Attributes
from storage.config import EngineConfig, StorageSettings
from storage.engine import Engine
from storage.models import Actor
from tests.support.live import LiveServer

from .listing import CONFIG, _nothing, ends


async def fill(data_dir: Path, keys: int, per_key: int) -> tuple[str, str]:
    """(organization id, a key that reads it), once the bucket holds keys * per_key
    versions."""
    storage = StorageSettings(fsync=False, inline_max_bytes=16)
    engine = await Engine.open(EngineConfig(data_dir=data_dir, storage=storage))
    try:
        org = await engine.orgs.create("default", "pro")
        _, secret = await engine.keys.create(org.id, "lister", ["buckets:read", "files:read"])
        actor = Actor(org_id=org.id)
        bucket = await engine.buckets.create(actor, "versions", "us-east-1", versioning="Enabled")
        while (await engine.buckets.get(actor, bucket.id)).status != "active":
            await asyncio.sleep(0.01)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for number in range(keys):
            queue.put_nowait(number)

        async def worker() -> None:
            while not queue.empty():
                number = queue.get_nowait()
                key = f"dir{number % 100:02d}/file-{number:07d}"
                for _ in range(per_key - (number % 10 == 0)):
                    await engine.files.put(
                        actor, bucket.id, key, Attributes("text/plain"), _nothing()
                    )
                if number % 10 == 0:
                    await engine.files.delete(actor, bucket.id, key)

        await asyncio.gather(*(worker() for _ in range(64)))
        return org.id, secret
    finally:
        await engine.close()


def _s3_pages(live: LiveServer, org: str) -> tuple[int, list[float]]:
    s3 = live.s3(*live.s3_credentials(org, "buckets:read,files:read"))
    timings: list[float] = []
    seen = 0
    markers: dict[str, str] = {}
    while True:
        begun = time.perf_counter()
        page = s3.list_object_versions(Bucket="versions", MaxKeys=1000, **markers)
        timings.append((time.perf_counter() - begun) * 1000)
        seen += len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))
        if not page["IsTruncated"]:
            return seen, timings
        markers = {
            "KeyMarker": page["NextKeyMarker"],
            "VersionIdMarker": page["NextVersionIdMarker"],
        }


def _v1_pages(live: LiveServer, secret: str) -> tuple[int, list[float]]:
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=live.url + "/v1", headers=headers) as http:
        bucket = next(b for b in http.get("/buckets").json()["data"] if b["name"] == "versions")
        timings: list[float] = []
        seen = 0
        cursor = None
        while True:
            params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
            begun = time.perf_counter()
            body = http.get(f"/buckets/{bucket['id']}/versions", params=params).json()
            timings.append((time.perf_counter() - begun) * 1000)
            seen += len(body["data"])
            cursor = body["meta"]["nextCursor"]
            if cursor is None:
                return seen, timings


def run(keys: int = 10_000, per_key: int = 10) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-versions-"))
    started = time.perf_counter()
    org, secret = asyncio.run(fill(base / "data", keys, per_key))
    fill_seconds = time.perf_counter() - started
    live = LiveServer(base / "data", CONFIG).start()
    try:
        s3_seen, s3_timings = _s3_pages(live, org)
        v1_seen, v1_timings = _v1_pages(live, secret)
    finally:
        live.stop()
    total = keys * per_key
    assert s3_seen == total and v1_seen == total, (s3_seen, v1_seen, total)
    return {
        "versions": total,
        "keys": keys,
        "fill_seconds": round(fill_seconds, 1),
        "s3": ends(s3_timings),
        "v1": ends(v1_timings),
    }
