"""CPU per request, stage by stage: S3 and /v1 PUT and GET of 1 KiB beside an empty app.

Each kind of request runs twice at the same concurrency from the raw-HTTP load generator
(requests built and SigV4-signed beforehand, so the client does no signing): once alone,
to read the server's CPU per request from `/proc` (user + system, every thread), and once
under `py-spy record --nonblocking --format raw`, whose samples `stages.py` buckets into
stages. A stage's microseconds are its share of the sampled (not idle) stacks times the
CPU per request of the run without the profiler. The empty app is `hello.py` on the same
Uvicorn settings (GET `/` and PUT `/put`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.live import ROOT, TEST_CONFIG, LiveServer, free_port, new_bucket

from . import loadgen, stages
from .loadgen import Request
from .peers import BUCKET, Endpoint, client, signed
from .process import cpu_seconds

SIZE = 1024
KEYS = 200
PY_SPY = Path(sys.executable).parent / "py-spy"
KINDS = ["S3 PUT", "S3 GET", "/v1 PUT", "/v1 GET", "empty PUT", "empty GET"]


def measure(
    url: str, pid: int, requests: list[Request], concurrency: int, seconds: float, rate: int
) -> dict[str, Any]:
    """The CPU per request of an unprofiled run, then the samples per stage of a profiled
    one; a run with any response >= 300 is refused."""
    before, kernel_before = cpu_seconds(pid), _kernel_seconds(pid)
    load = loadgen.run(url, requests, concurrency, seconds)
    done = max(sum(load["statuses"].values()), 1)
    cpu_us = (cpu_seconds(pid) - before) * 1e6 / done
    kernel_us = (_kernel_seconds(pid) - kernel_before) * 1e6 / done
    folded = Path(tempfile.mkdtemp(prefix="bucketd-budget-")) / "stacks.txt"
    spy = subprocess.Popen(
        [
            *[str(PY_SPY), "record", "--nonblocking", "--threads", "-r", str(rate)],
            *["-f", "raw", "--pid", str(pid), "-o", str(folded)],
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)  # py-spy attaches
        profiled = loadgen.run(url, requests, concurrency, seconds)
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)
    counts = stages.bucket(folded.read_text().splitlines()) if folded.exists() else {}
    shutil.rmtree(folded.parent, ignore_errors=True)
    errors = {s: n for run in (load, profiled) for s, n in run["statuses"].items() if int(s) >= 300}
    if errors or not counts:
        raise RuntimeError(f"errors {errors} or no samples ({counts}): no figures")
    busy = sum(n for stage, n in counts.items() if stage != stages.IDLE)
    return {
        "ops_per_s": load["ops_per_s"],
        "profiled_ops_per_s": profiled["ops_per_s"],
        "client_cpu_busy": load["client_cpu_busy"],
        "cpu_us_per_request": round(cpu_us, 1),
        "kernel_us_per_request": round(kernel_us, 1),
        "samples": busy,
        "stages_us": {
            stage: round(cpu_us * counts.get(stage, 0) / busy, 1) for stage in stages.order()
        },
    }


def _kernel_seconds(pid: int) -> float:
    """The system (kernel) part of `cpu_seconds`: what fsync, file and socket calls cost."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


def _bucketd_kinds(live: LiveServer) -> dict[str, list[Request]]:
    access, secret = live.s3_credentials()
    assert live.process is not None
    endpoint = Endpoint("bucketd", live.s3_url, access, secret, live.process.pid)
    client(endpoint).create_bucket(Bucket=BUCKET)
    with live.client() as http:
        bucket = new_bucket(http, "budget")["id"]
    auth = {"Authorization": f"Bearer {live.admin_key}"}
    typed = {**auth, "Content-Type": "application/octet-stream"}
    path = f"/v1/buckets/{bucket}/files/k"
    return {
        "S3 PUT": [signed(endpoint, "PUT", f"k{n}", os.urandom(SIZE)) for n in range(KEYS)],
        "S3 GET": [signed(endpoint, "GET", f"k{n}") for n in range(KEYS)],
        "/v1 PUT": [Request("PUT", f"{path}{n}", typed, os.urandom(SIZE)) for n in range(KEYS)],
        "/v1 GET": [Request("GET", f"{path}{n}", auth) for n in range(KEYS)],
    }


def run(seconds: float, concurrency: int = 16, rate: int = 200) -> dict[str, Any]:
    """Every kind measured against one bucketd process (the PUTs first: the GETs read what
    they stored) and one empty-app process."""
    if not PY_SPY.exists():
        raise RuntimeError(f"{PY_SPY} is missing: pip install py-spy")
    results: dict[str, Any] = {"object_bytes": SIZE, "concurrency": concurrency}
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-budget-"))
    live = LiveServer(base / "data", TEST_CONFIG, durable=True).start()
    try:
        assert live.process is not None
        for kind, requests in _bucketd_kinds(live).items():
            url = live.s3_url if kind.startswith("S3") else live.url
            results[kind] = measure(url, live.process.pid, requests, concurrency, seconds, rate)
    finally:
        live.stop()
        shutil.rmtree(base, ignore_errors=True)
    with _empty_app() as (url, pid):
        body = os.urandom(SIZE)
        for kind, request in (
            ("empty PUT", Request("PUT", "/put", {}, body)),
            ("empty GET", Request("GET", "/", {})),
        ):
            results[kind] = measure(url, pid, [request], concurrency, seconds, rate)
    return results


@contextmanager
def _empty_app() -> Iterator[tuple[str, int]]:
    """`hello.py` in its own process: its URL and process id."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.hello", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the empty app did not start")
        yield url, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)


def markdown(results: dict[str, Any]) -> str:
    """The table for docs/performance.md: µs of CPU per request by stage, and each kind's
    share beside it."""
    kinds = [k for k in KINDS if k in results]
    head = "| stage | " + " | ".join(kinds) + " |"
    lines = [head, "|---" + "|---:" * len(kinds) + "|"]
    for stage in stages.order():
        if any(results[k]["stages_us"][stage] for k in kinds):
            lines.append(
                f"| {stage} | " + " | ".join(_cell(results[k], stage) for k in kinds) + " |"
            )
    lines.append(
        "| **total CPU per request** | "
        + " | ".join(f"**{results[k]['cpu_us_per_request']:,.0f}**" for k in kinds)
        + " |"
    )
    lines.append(
        "| of which in the kernel (sys) | "
        + " | ".join(f"{results[k]['kernel_us_per_request']:,.0f}" for k in kinds)
        + " |"
    )
    lines.append(
        "| requests/s (unprofiled; profiled) | "
        + " | ".join(
            f"{results[k]['ops_per_s']:,.0f}; {results[k]['profiled_ops_per_s']:,.0f}"
            for k in kinds
        )
        + " |"
    )
    lines.append(
        "| samples (not idle) | " + " | ".join(str(results[k]["samples"]) for k in kinds) + " |"
    )
    return "\n".join(lines) + "\n"


def _cell(result: dict[str, Any], stage: str) -> str:
    us = result["stages_us"][stage]
    share = us / result["cpu_us_per_request"] if result["cpu_us_per_request"] else 0.0
    return f"{us:,.0f} ({share:.0%})"
