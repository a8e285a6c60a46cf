"""`python -m benchmarks.encryption [--size-mib N] [--rounds N]`: a large SSE-S3 object's
upload and download against the same without encryption, on one server, interleaved
round by round (a shared machine's speed drifts within seconds: the ratio of medians is
what counts). Issue 37's target: at least 0.8 both ways. Also the bytes a 1 MiB range of
the encrypted object makes the server read (the packages it covers, not the object).

One PutObject each way (a multipart upload has its own benchmark), durable as in
production. Each row says the CPU the server (all its processes) and the client spent per
MiB: a client that is busy the whole time measures itself, not the server. boto3 is the
first client (its SigV4 payload hash and its reads cost about as much CPU per MiB as the
server's plaintext path, so its plaintext download is bound by the client); curl reading
a presigned URL into /dev/null is the second, for the downloads, where installed.
`--root DIR` runs the server from another source tree (`git archive REV | tar -x -C DIR`):
the same rows for two revisions, back to back."""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage import encryption
from tests.support.live import TEST_CONFIG, LiveServer

from . import process, rawdisk

CONFIG = TEST_CONFIG + "\n[uploads]\ndefault_max_bytes = 68719476736\ndeadline_seconds = 3600\n"
ROWS = ("plain_up", "sse_up", "plain_down", "sse_down", "plain_down_curl", "sse_down_curl")


def _client_cpu() -> float:
    """CPU of this process (boto3) and of its finished children (curl)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Rows:
    """Per row, each round's (seconds, server CPU seconds, client CPU seconds)."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.runs: dict[str, list[tuple[float, float, float]]] = {}

    def time(self, row: str, action: Callable[[], None]) -> None:
        server = process.tree_cpu_seconds(self.server_pid)
        client = _client_cpu()
        started = time.perf_counter()
        action()
        seconds = time.perf_counter() - started
        server = process.tree_cpu_seconds(self.server_pid) - server
        self.runs.setdefault(row, []).append((seconds, server, _client_cpu() - client))

    def medians(self, size_mib: int) -> dict[str, dict[str, float]]:
        out = {}
        for row, runs in self.runs.items():
            seconds, server, client = (statistics.median(r[i] for r in runs) for i in range(3))
            out[row] = {
                "mib_per_s": size_mib / seconds,
                "server_ms_per_mib": 1000 * server / size_mib,
                "client_ms_per_mib": 1000 * client / size_mib,
                "client_busy": client / seconds,
            }
        return out


def run(size_mib: int = 1024, rounds: int = 3, root: Path | None = None) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-sse-"))
    size = size_mib * 1024 * 1024
    source = base / "source.bin"
    rawdisk.make_file(source, size)
    live = LiveServer(base / "data", CONFIG, durable=True, **({"root": root} if root else {}))
    live.start()
    curl = shutil.which("curl")
    try:
        assert live.process is not None
        rows = Rows(live.process.pid)
        s3: Any = live.s3()
        s3.create_bucket(Bucket="bench")

        def put(key: str, **extra: str) -> None:
            with open(source, "rb") as body:
                s3.put_object(Bucket="bench", Key=key, Body=body, **extra)

        def get(key: str) -> None:
            body = s3.get_object(Bucket="bench", Key=key)["Body"]
            assert sum(len(chunk) for chunk in body.iter_chunks(1024 * 1024)) == size

        def fetch(key: str) -> Callable[[], None]:
            params = {"Bucket": "bench", "Key": key}
            url = s3.generate_presigned_url("get_object", Params=params)

            def action() -> None:
                assert curl is not None
                got = subprocess.run(
                    [curl, "-sf", "-o", "/dev/null", "-w", "%{size_download}", url],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                assert int(got) == size

            return action

        for _ in range(rounds):
            rows.time("plain_up", lambda: put("plain"))
            rows.time("sse_up", lambda: put("sse", ServerSideEncryption="AES256"))
            rows.time("plain_down", lambda: get("plain"))
            rows.time("sse_down", lambda: get("sse"))
            if curl is not None:
                rows.time("plain_down_curl", fetch("plain"))
                rows.time("sse_down_curl", fetch("sse"))
        middle = size // 2 + 1000
        where = encryption.span(middle, middle + 1024 * 1024, size)
        before = process.tree_bytes_read(live.process.pid)
        ranged = s3.get_object(
            Bucket="bench", Key="sse", Range=f"bytes={middle}-{middle + 1024 * 1024 - 1}"
        )
        assert len(ranged["Body"].read()) == 1024 * 1024
        range_read = process.tree_bytes_read(live.process.pid) - before
    finally:
        live.stop()
        shutil.rmtree(base, ignore_errors=True)
    result = rows.medians(size_mib)
    ratio = {
        "upload_ratio": result["sse_up"]["mib_per_s"] / result["plain_up"]["mib_per_s"],
        "download_ratio": result["sse_down"]["mib_per_s"] / result["plain_down"]["mib_per_s"],
    }
    if curl is not None:
        plain = result["plain_down_curl"]["mib_per_s"]
        ratio["download_ratio_curl"] = result["sse_down_curl"]["mib_per_s"] / plain
    return {
        "size_mib": size_mib,
        "rounds": rounds,
        "rows": result,
        **ratio,
        "range_1mib_packages_bytes": where.stored_end - where.stored_start,
        "range_1mib_server_bytes_read": range_read,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encryption")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", type=Path, help="the source tree the server runs from")
    args = parser.parse_args()
    result = run(args.size_mib, args.rounds, args.root)
    print("row              MiB/s  server CPU ms/MiB  client CPU ms/MiB (busy)")
    for name, row in result["rows"].items():
        print(
            f"{name:>15}: {row['mib_per_s']:7.1f}  {row['server_ms_per_mib']:17.3f}  "
            f"{row['client_ms_per_mib']:17.3f} ({row['client_busy']:.0%})"
        )
    print(f"upload ratio (SSE-S3 / plain), boto3: {result['upload_ratio']:.2f}")
    print(f"download ratio (SSE-S3 / plain), boto3: {result['download_ratio']:.2f}")
    if "download_ratio_curl" in result:
        print(f"download ratio (SSE-S3 / plain), curl: {result['download_ratio_curl']:.2f}")
    print(
        f"a 1 MiB range of the encrypted object made the server read "
        f"{result['range_1mib_server_bytes_read']:,} bytes "
        f"(its packages: {result['range_1mib_packages_bytes']:,})"
    )


if __name__ == "__main__":
    main()
