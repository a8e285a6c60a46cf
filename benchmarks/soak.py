"""Soak: minutes of mixed load from several processes, then a full consistency check.

Each worker process loops over random uploads (1 B to 2 MiB), overwrites of shared keys,
downloads (bytes checked against their ETag), listings, renames and deletes until the time
is up. Afterwards every listed file is downloaded and checked, the server is stopped and
`bucketd check` verifies counters, reference counts and blob files.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.support.live import TEST_CONFIG, LiveServer, new_bucket

KEYS = [f"dir{d}/file{f}" for d in range(4) for f in range(25)]
SIZES = [1, 100, 4096, 65536, 1 << 20, 2 << 20]


def _worker(
    url: str, secret: str, bucket_ids: list[str], seconds: float, seed: int, out: Any
) -> None:
    rng = random.Random(seed)
    statuses: Counter[str] = Counter()
    corrupt = 0
    deadline = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=url + "/v1", headers=headers, timeout=60) as http:
        while time.monotonic() < deadline:
            bucket = rng.choice(bucket_ids)
            key = rng.choice(KEYS)
            base = f"/buckets/{bucket}/files"
            roll = rng.random()
            try:
                if roll < 0.4:
                    body = rng.randbytes(8) * (rng.choice(SIZES) // 8 + 1)
                    response = http.put(
                        f"{base}/{key}",
                        content=body,
                        headers={"Content-Type": "application/octet-stream"},
                    )
                elif roll < 0.7:
                    response = http.get(f"{base}/{key}")
                    if response.status_code == 200:
                        digest = hashlib.sha256(response.content).hexdigest()
                        corrupt += response.headers["etag"] != f'"{digest}"'
                elif roll < 0.8:
                    response = http.get(
                        base, params={"prefix": key.split("/")[0] + "/", "limit": 100}
                    )
                elif roll < 0.9:
                    response = http.patch(f"{base}/{key}", json={"key": rng.choice(KEYS)})
                else:
                    response = http.delete(f"{base}/{key}")
                statuses[str(response.status_code)] += 1
            except httpx.TransportError as exc:
                statuses[type(exc).__name__] += 1
    out.put({"statuses": dict(statuses), "corrupt": corrupt})


def _verify(live: LiveServer, bucket_ids: list[str]) -> int:
    """Download every listed file; returns how many disagree with their listing."""
    bad = 0
    with live.client() as http:
        for bucket in bucket_ids:
            for item in http.get(f"/buckets/{bucket}/files", params={"limit": 100}).json()["data"]:
                response = http.get(f"/buckets/{bucket}/files/{item['key']}")
                digest = hashlib.sha256(response.content).hexdigest()
                bad += item["etag"] != f'"{digest}"' or len(response.content) != item["size"]
    return bad


def run(minutes: float = 2.0, processes: int = 4) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-soak-"))
    live = LiveServer(base / "data", TEST_CONFIG).start()
    try:
        with live.client() as http:
            bucket_ids = [new_bucket(http, f"soak-{i}")["id"] for i in range(3)]
        queue: Any = multiprocessing.get_context("spawn").Queue()
        workers = [
            multiprocessing.get_context("spawn").Process(
                target=_worker,
                args=(live.url, live.admin_key, bucket_ids, minutes * 60, seed, queue),
            )
            for seed in range(processes)
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        results = [queue.get() for _ in workers]
        for worker in workers:
            worker.join()
        elapsed = time.monotonic() - started
        mismatched = _verify(live, bucket_ids)
    finally:
        live.stop()
    check = live.cli("check").strip().splitlines()[-1] if live.process is None else "not run"
    statuses: Counter[str] = Counter()
    for result in results:
        statuses.update(result["statuses"])
    served = sum(statuses.values())
    return {
        "minutes": minutes,
        "processes": processes,
        "requests": served,
        "requests_per_second": round(served / elapsed, 1),
        "statuses": dict(sorted(statuses.items())),
        "corrupt_downloads": sum(r["corrupt"] for r in results),
        "listing_mismatches": mismatched,
        "check": check,
    }
