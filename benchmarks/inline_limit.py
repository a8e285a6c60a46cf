"""Which `storage.inline_max_bytes` to ship: S3 PUT and GET of a few object sizes under a
few limits, durable (fsync on, as in production), one process and `--workers 2`.

Every limit's server is started at once and the points are taken size by size, limit by
limit, back to back, so the machine's load drifts across all cells alike; what is compared
is the ratio of a cell to its size's limit-0 cell (a blob file per content). After the
PUTs each server's index is opened read-only to count what the inline rows cost it: the
file's bytes and SQLite's overflow pages (a blob row over about 1 KB does not fit its
B-tree page; the rest of the content goes to a chain of overflow pages).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from tests.support.live import TEST_CONFIG, LiveServer

from .peers import BUCKET, KEYS, Endpoint, client, small

LIMITS = [0, 4096, 16384, 65536, 131072]
SIZES = [1024, 16384, 65536, 131072]
CROSSOVER = [8192, 16384, 32768, 65536]
"""Sizes around where inline stops paying (`inline-crossover`)."""


def _server(base: Path, limit: int, workers: int) -> LiveServer:
    config = f"[storage]\ninline_max_bytes = {limit}\n" + TEST_CONFIG
    return LiveServer(base / f"limit-{limit}-{workers}w", config, durable=True, workers=workers)


def fill(endpoint: Endpoint, size: int) -> None:
    """Every key the GETs ask for, at `size` (a short PUT run may not reach them all)."""
    s3 = client(endpoint, pool=16)
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda n: s3.put_object(Bucket=BUCKET, Key=f"small/{n}", Body=os.urandom(size)),
                range(KEYS),
            )
        )


def index_cost(data_dir: Path) -> dict[str, Any]:
    """The index's size, the pages its blob rows overflow to, and the blob files' bytes."""
    path = data_dir / "index.db"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        page_size, pages = db.execute("PRAGMA page_size").fetchone()[0], 0
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        overflow = db.execute(
            "SELECT COUNT(*) FROM dbstat WHERE name = 'blobs' AND pagetype = 'overflow'"
        ).fetchone()[0]
    blob_bytes = sum(p.stat().st_size for p in (data_dir / "blobs").rglob("*") if p.is_file())
    return {
        "index_bytes": page_size * pages,
        "overflow_pages": overflow,
        "blob_file_bytes": blob_bytes,
    }


def run(
    seconds: float,
    workers: list[int],
    limits: list[int] = LIMITS,
    sizes: list[int] = SIZES,
    rounds: int = 1,
    concurrency: int = 16,
) -> dict[str, Any]:
    """By workers, then `size` then `limit`, `rounds` times: the PUT and GET figures (rate,
    server CPU per request, p50 latency; medians over the rounds) and the index's cost once
    the size was written."""
    results: dict[str, Any] = {"limits": limits, "sizes": sizes, "concurrency": concurrency}
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-inline-"))
    try:
        for count in workers:
            with ExitStack() as stack:
                endpoints: dict[int, tuple[LiveServer, Endpoint]] = {}
                for limit in limits:
                    live = _server(base, limit, count).start()
                    stack.callback(live.stop)
                    access, secret = live.s3_credentials()
                    assert live.process is not None
                    endpoint = Endpoint(
                        f"limit {limit}", live.s3_url, access, secret, live.process.pid
                    )
                    client(endpoint).create_bucket(Bucket=BUCKET)
                    endpoints[limit] = (live, endpoint)
                runs: dict[str, list[dict[str, Any]]] = {}
                for _ in range(rounds):
                    for size in sizes:
                        for limit, (live, endpoint) in endpoints.items():
                            cell = _cell(endpoint, size, concurrency, seconds)
                            cell["index"] = index_cost(live.data_dir)
                            runs.setdefault(f"{size}@{limit}", []).append(cell)
                            print(f"{count}w size {size} limit {limit}: {cell}", flush=True)
                results[f"{count}w"] = {point: _median(cells) for point, cells in runs.items()}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def _cell(endpoint: Endpoint, size: int, concurrency: int, seconds: float) -> dict[str, Any]:
    fill(endpoint, size)
    cell: dict[str, Any] = {}
    for op in ("put", "get"):
        load = small(endpoint, size, concurrency, seconds, op, 2)
        if load["errors"]:
            raise RuntimeError(f"{load['errors']} errors at {size} bytes on {endpoint.name}")
        cell[op] = {
            "ops_per_s": load["ops_per_s"],
            "cpu_ms": load["server_cpu_ms_per_op"],
            "p50_ms": load["p50_ms"],
        }
    return cell


def _median(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (the index cost of the last)."""
    middle = (len(cells) - 1) // 2
    return {
        "put": {k: sorted(c["put"][k] for c in cells)[middle] for k in cells[0]["put"]},
        "get": {k: sorted(c["get"][k] for c in cells)[middle] for k in cells[0]["get"]},
        "index": cells[-1]["index"],
    }


def markdown(results: dict[str, Any]) -> str:
    """One table per worker count: a row per size, a column per limit, each cell
    PUT/s, GET/s and CPU ms per PUT / GET; then the index's size and overflow pages."""
    limits, lines = results["limits"], []
    header = ["| size | " + " | ".join(f"limit {kib(limit)}" for limit in limits) + " |"]
    header += ["|---" * (len(limits) + 1) + "|"]
    for key, cells in results.items():
        if not key.endswith("w"):
            continue
        title = f"`--workers {key[:-1]}`, c={results['concurrency']}"
        lines += [f"\n{title}: PUT/s, GET/s (CPU ms per PUT / GET)\n", *header]
        for size in results["sizes"]:
            row = []
            for limit in limits:
                put, get = cells[f"{size}@{limit}"]["put"], cells[f"{size}@{limit}"]["get"]
                row.append(
                    f"{put['ops_per_s']:.0f}, {get['ops_per_s']:.0f} "
                    f"({put['cpu_ms']:.2f} / {get['cpu_ms']:.2f})"
                )
            lines.append(f"| {kib(size)} | " + " | ".join(row) + " |")
        lines += [f"\n{title}: index MiB (blob overflow pages) after the size's PUTs\n", *header]
        for size in results["sizes"]:
            row = []
            for limit in limits:
                cost = cells[f"{size}@{limit}"]["index"]
                row.append(f"{cost['index_bytes'] / 2**20:.1f} ({cost['overflow_pages']})")
            lines.append(f"| {kib(size)} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def kib(size: int) -> str:
    return f"{size // 1024} KiB" if size else "0"
