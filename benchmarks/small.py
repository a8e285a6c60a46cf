"""Small requests: the hello-world ceiling, then bucketd's small PUTs and GETs through /v1.

Every rate is also given as a ratio to the ceiling measured in the same run: a minimal
Starlette app on bucketd's own Uvicorn settings is the fastest any Python ASGI service can
answer on this machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.live import ROOT, LiveServer, free_port, new_bucket

from . import loadgen
from .loadgen import Request

CONFIG = """
[plans.pro]
requests_per_minute = 1000000000
max_buckets = 1000000
max_storage_bytes = 1125899906842624
"""
KEYS = 1000


def hello_ceiling(concurrency: int, seconds: float) -> dict[str, Any]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.hello", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        return loadgen.run(
            f"http://127.0.0.1:{port}", [Request("GET", "/", {})], concurrency, seconds
        )
    finally:
        process.terminate()
        process.wait()


def run(
    concurrencies: list[int], sizes: list[int], seconds: float, config: str = ""
) -> dict[str, Any]:
    results: dict[str, Any] = {"ceiling": {}, "put": {}, "get": {}}
    for concurrency in concurrencies:
        results["ceiling"][str(concurrency)] = hello_ceiling(concurrency, seconds)
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-small-"))
    live = LiveServer(base / "data", config + CONFIG).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "small")["id"]
        auth = {"Authorization": f"Bearer {live.admin_key}"}
        for size in sizes:
            body = os.urandom(size)
            puts = [
                Request(
                    "PUT",
                    f"/v1/buckets/{bucket}/files/s{size}/k{i}",
                    {**auth, "Content-Type": "application/octet-stream"},
                    body,
                )
                for i in range(KEYS)
            ]
            gets = [
                Request("GET", f"/v1/buckets/{bucket}/files/s{size}/k{i}", auth)
                for i in range(KEYS)
            ]
            for concurrency in concurrencies:
                put = loadgen.run(live.url, puts, concurrency, seconds)
                get = loadgen.run(live.url, gets, concurrency, seconds)
                ceiling = results["ceiling"][str(concurrency)]["ops_per_s"]
                put["vs_ceiling"] = round(put["ops_per_s"] / ceiling, 3)
                get["vs_ceiling"] = round(get["ops_per_s"] / ceiling, 3)
                results["put"][f"{size}@{concurrency}"] = put
                results["get"][f"{size}@{concurrency}"] = get
    finally:
        live.stop()
    return results
