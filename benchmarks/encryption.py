"""`python -m benchmarks.encryption [--size-mib N] [--rounds N]`: a large SSE-S3 object's
upload and download against the same without encryption, on one server, interleaved
round by round (a shared machine's speed drifts within seconds: the ratio of medians is
what counts). Issue 37's target: at least 0.8 both ways. Also the bytes a 1 MiB range of
the encrypted object reads from the blob (the packages it covers, not the object).

One PutObject each way (a multipart upload cannot ask for SSE-S3 yet), durable as in
production; the client is boto3, whose own SigV4 payload hash costs both sides alike."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from storage import encryption
from tests.support.live import TEST_CONFIG, LiveServer

from . import rawdisk

CONFIG = TEST_CONFIG + "\n[uploads]\ndefault_max_bytes = 68719476736\ndeadline_seconds = 3600\n"


def _timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run(size_mib: int = 1024, rounds: int = 3) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-sse-"))
    size = size_mib * 1024 * 1024
    source = base / "source.bin"
    rawdisk.make_file(source, size)
    live = LiveServer(base / "data", CONFIG, durable=True)
    live.start()
    times: dict[str, list[float]] = {"plain_up": [], "sse_up": [], "plain_down": [], "sse_down": []}
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="bench")

        def put(key: str, **extra: str) -> None:
            with open(source, "rb") as body:
                s3.put_object(Bucket="bench", Key=key, Body=body, **extra)

        def get(key: str) -> None:
            body = s3.get_object(Bucket="bench", Key=key)["Body"]
            assert sum(len(chunk) for chunk in body.iter_chunks(1024 * 1024)) == size

        for _ in range(rounds):
            times["plain_up"].append(_timed(lambda: put("plain")))
            times["sse_up"].append(_timed(lambda: put("sse", ServerSideEncryption="AES256")))
            times["plain_down"].append(_timed(lambda: get("plain")))
            times["sse_down"].append(_timed(lambda: get("sse")))
        middle = size // 2
        where = encryption.span(middle, middle + 1024 * 1024, size)
        ranged = s3.get_object(
            Bucket="bench", Key="sse", Range=f"bytes={middle}-{middle + 1024 * 1024 - 1}"
        )
        assert len(ranged["Body"].read()) == 1024 * 1024
    finally:
        live.stop()
    median = {name: statistics.median(values) for name, values in times.items()}
    mib = {name: size_mib / seconds for name, seconds in median.items()}
    return {
        "size_mib": size_mib,
        "rounds": rounds,
        "mib_per_s": mib,
        "upload_ratio": mib["sse_up"] / mib["plain_up"],
        "download_ratio": mib["sse_down"] / mib["plain_down"],
        "range_1mib_stored_bytes_read": where.stored_end - where.stored_start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encryption")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = run(args.size_mib, args.rounds)
    for name, value in result["mib_per_s"].items():
        print(f"{name:>10}: {value:8.1f} MiB/s")
    print(f"upload ratio (SSE-S3 / plain): {result['upload_ratio']:.2f}")
    print(f"download ratio (SSE-S3 / plain): {result['download_ratio']:.2f}")
    print(f"a 1 MiB range of the encrypted object reads {result['range_1mib_stored_bytes_read']}")


if __name__ == "__main__":
    main()
