"""Scale-out: 1, 2 and 3 gateways over the same PostgreSQL index, SeaweedFS cluster and Redis,
small PUTs and GETs spread over all the gateways of a configuration.

On this 2-core machine every gateway, PostgreSQL, the five SeaweedFS processes, Redis and
the load generator share the same two cores, so more gateways cannot add capacity here;
the run shows what the shared services cost per request and that adding gateways does not
collapse throughput. On a machine (or machines) with a core per gateway the rates should
grow with the gateways until PostgreSQL's commits or the S3 cluster become the limit.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.cluster import Redis, SeaweedCluster
from tests.support.live import LiveServer, new_bucket
from tests.support.postgres import Postgres

from . import loadgen
from .loadgen import Request

CONFIG = """
[plans.pro]
requests_per_minute = 1000000000
max_buckets = 1000000
max_storage_bytes = 1125899906842624
"""
KEYS = 500


def run(
    seconds: float, gateways: tuple[int, ...] = (1, 2, 3), size: int = 4096, concurrency: int = 16
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-scale-"))
    postgres = Postgres(base / "postgres")
    weed = SeaweedCluster(base / "seaweed").start()
    redis = Redis(base / "redis")
    results: dict[str, Any] = {"size": size, "concurrency": concurrency, "gateways": {}}
    try:
        for count in gateways:
            results["gateways"][str(count)] = _measure(
                base / f"run{count}", count, postgres, weed, redis, size, concurrency, seconds
            )
    finally:
        redis.stop()
        weed.stop()
        postgres.stop()
        shutil.rmtree(base, ignore_errors=True)
    one = results["gateways"].get("1")
    for measured in results["gateways"].values():
        for op in ("put", "get"):
            if one and one[op]["ops_per_s"]:
                measured[op]["vs_one_gateway"] = round(
                    measured[op]["ops_per_s"] / one[op]["ops_per_s"], 3
                )
    return results


def _measure(
    base: Path,
    count: int,
    postgres: Postgres,
    weed: SeaweedCluster,
    redis: Redis,
    size: int,
    concurrency: int,
    seconds: float,
) -> dict[str, Any]:
    config = (
        CONFIG
        + f'[index]\nurl = "{postgres.new_database()}"\n'
        + f'[ratelimit]\nredis_url = "{redis.url}"\n'
        + weed.bucketd_config(brand="bench" + uuid.uuid4().hex[:6])
        + "[uploads]\ndeadline_seconds = 60\n"
    )
    servers: list[LiveServer] = []
    try:
        for n in range(count):
            (base / f"gateway{n}").mkdir(parents=True)
            servers.append(LiveServer(base / f"gateway{n}" / "data", config).start())
        key = servers[0].admin_key
        with servers[0].client(key) as http:
            bucket = new_bucket(http, "scale")["id"]
        auth = {"Authorization": f"Bearer {key}"}
        body = os.urandom(size)
        puts = [
            Request(
                "PUT",
                f"/v1/buckets/{bucket}/files/k{i}",
                {**auth, "Content-Type": "application/octet-stream"},
                body,
            )
            for i in range(KEYS)
        ]
        urls = [server.url for server in servers]
        put = loadgen.run(urls, puts, concurrency, seconds)
        with servers[0].client(key) as http:
            stored = [f["key"] for f in iter_files(http, bucket)]
        gets = [Request("GET", f"/v1/buckets/{bucket}/files/{k}", auth) for k in stored]
        get = loadgen.run(urls, gets, concurrency, seconds)
        return {"put": put, "get": get}
    finally:
        for server in servers:
            server.stop()


def iter_files(http: httpx.Client, bucket: str) -> Iterator[dict[str, Any]]:
    """The files the PUT run stored (its connections cover only part of the keys)."""
    params = {"limit": "100"}
    while True:
        page = http.get(f"/buckets/{bucket}/files", params=params).json()
        yield from page["data"]
        if page["meta"]["nextCursor"] is None:
            return
        params["cursor"] = page["meta"]["nextCursor"]
