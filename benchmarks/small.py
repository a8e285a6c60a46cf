"""Small requests: the hello-world ceiling, then bucketd's small PUTs and GETs through /v1.

Every rate is also given as a ratio to the ceiling measured in the same run: a minimal
Starlette app on bucketd's own Uvicorn settings is the fastest any Python ASGI service can
answer on this machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.live import ROOT, LiveServer, free_port, new_bucket

from . import loadgen
from .loadgen import Request

CONFIG = """
[plans.pro]
requests_per_minute = 1000000000
max_buckets = 1000000
max_storage_bytes = 1125899906842624
"""
KEYS = 1000


def hello_ceiling(
    concurrency: int, seconds: float, workers: int = 1, server: str = "uvicorn"
) -> dict[str, Any]:
    """The hello-world app's rate in `workers` processes under bucketd's Uvicorn settings,
    or under Granian (`server="granian"`, its defaults with uvloop)."""
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.hello", str(port), str(workers)]
    if server == "granian":
        command = [
            *[sys.executable, "-m", "granian", "--interface", "asgi", "--loop", "uvloop"],
            *["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
            *["--no-ws", "benchmarks.hello:APP"],
        ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
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
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


BLOB_FILES = """
[storage]
inline_max_bytes = 0
"""
"""The blob layout: a blob file per content, however small."""
INLINE = ""
"""The default: small contents live in the index (`storage.inline_max_bytes`), one durable
commit each."""


def run(
    concurrencies: list[int],
    sizes: list[int],
    seconds: float,
    inline: bool = True,
    workers: int = 1,
) -> dict[str, Any]:
    """The ceiling, then the blob layout (a blob file per content) and, when `inline`, the
    same PUTs and GETs with the default, small contents inlined in the index; with `workers`,
    the hello app and bucketd both run that many processes on one socket."""
    results: dict[str, Any] = {"ceiling": {}, "workers": workers}
    for concurrency in concurrencies:
        results["ceiling"][str(concurrency)] = hello_ceiling(concurrency, seconds, workers)
    variants = {"put": BLOB_FILES, **({"inline put": INLINE} if inline else {})}
    for label, config in variants.items():
        put_key, get_key = label, label.replace("put", "get")
        results[put_key], results[get_key] = {}, {}
        measured = _measure(config, concurrencies, sizes, seconds, workers)
        for point, (put, get) in measured.items():
            ceiling = results["ceiling"][point.split("@")[1]]["ops_per_s"]
            put["vs_ceiling"] = round(put["ops_per_s"] / ceiling, 3)
            get["vs_ceiling"] = round(get["ops_per_s"] / ceiling, 3)
            results[put_key][point], results[get_key][point] = put, get
    return results


def _measure(
    config: str, concurrencies: list[int], sizes: list[int], seconds: float, workers: int
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """PUT then GET rates of one server configuration, by `size@concurrency`."""
    measured = {}
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-small-"))
    live = LiveServer(base / "data", config + CONFIG, workers=workers).start()
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
                measured[f"{size}@{concurrency}"] = (put, get)
    finally:
        live.stop()
        shutil.rmtree(base, ignore_errors=True)
    return measured
