"""`python -m benchmarks.encryption_multipart [--size-mib N] [--rounds N]`: an SSE-S3
and an SSE-C multipart upload against the same without encryption, on one durable server,
interleaved round by round (ratios of medians: a shared machine drifts within seconds). Times the
parts (8 MiB each, sealed as they arrive) and the completion apart: completing an
encrypted upload opens every part and seals the object as one content, where a plaintext
completion only copies the parts (docs/architecture.md, "Encryption at rest")."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.live import LiveServer

from .encryption import CONFIG

PART = 8 * 1024 * 1024


def run(size_mib: int = 256, rounds: int = 3) -> dict[str, float]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-sse-mpu-"))
    live = LiveServer(base / "data", CONFIG, durable=True)
    live.start()
    part = os.urandom(PART)
    count = max(1, size_mib * 1024 * 1024 // PART)
    times: dict[str, list[float]] = {}
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="bench")

        def upload(name: str, each: dict[str, str] | None = None, **extra: str) -> None:
            """`extra` goes on the create, `each` on every request (SSE-C's key)."""
            each = each or {}
            started = time.perf_counter()
            made = s3.create_multipart_upload(Bucket="bench", Key=name, **extra, **each)
            upload_id = made["UploadId"]
            etags = [
                s3.upload_part(
                    Bucket="bench", Key=name, UploadId=upload_id, PartNumber=n, Body=part, **each
                )["ETag"]
                for n in range(1, count + 1)
            ]
            uploaded = time.perf_counter()
            listed = [{"PartNumber": n + 1, "ETag": etag} for n, etag in enumerate(etags)]
            s3.complete_multipart_upload(
                Bucket="bench",
                Key=name,
                UploadId=upload_id,
                MultipartUpload={"Parts": listed},
                **each,
            )
            times.setdefault(f"{name}_parts", []).append(uploaded - started)
            times.setdefault(f"{name}_complete", []).append(time.perf_counter() - uploaded)

        customer = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(16).hex()}
        for _ in range(rounds):
            upload("plain")
            upload("sse", ServerSideEncryption="AES256")
            upload("ssec", customer)
    finally:
        live.stop()
    median = {name: statistics.median(values) for name, values in times.items()}
    mib = count * PART / 1024 / 1024
    return {
        "size_mib": mib,
        "plain_parts_mib_per_s": mib / median["plain_parts"],
        "sse_parts_mib_per_s": mib / median["sse_parts"],
        "parts_ratio": median["plain_parts"] / median["sse_parts"],
        "plain_complete_ms": median["plain_complete"] * 1000,
        "sse_complete_ms": median["sse_complete"] * 1000,
        "ssec_parts_mib_per_s": mib / median["ssec_parts"],
        "ssec_parts_ratio": median["plain_parts"] / median["ssec_parts"],
        "ssec_complete_ms": median["ssec_complete"] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encryption_multipart")
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name, value in run(args.size_mib, args.rounds).items():
        print(f"{name:>22}: {value:10.2f}")


if __name__ == "__main__":
    main()
