"""`python -m benchmarks.fixture_reset [--resets N]`: what `bucketd.testing`'s clean state
costs a test (docs/testing.md, "A fresh state in every test"): the session's start and its
clean snapshot, once; then `bucketd_reset`'s reset (clock, faults, the server snapshot
restored, the keys and webhooks made since removed, journal), N times each after a test
that wrote nothing, after one that made a bucket and wrote 11 files, and after one that
wrote 100 files to a declared bucket.
Prints one JSON object, times in milliseconds."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from bucketd.testing import BucketdServer, running_bucketd


def _times(server: BucketdServer, resets: int, between: Callable[[int], None]) -> dict[str, float]:
    """The reset's time, `resets` times, each after `between(n)` ran as a test would."""
    spent = []
    for n in range(resets):
        between(n)
        started = time.perf_counter()
        server.reset()
        spent.append((time.perf_counter() - started) * 1000)
    spent.sort()
    return {
        "median_ms": round(statistics.median(spent), 1),
        "p90_ms": round(spent[int(len(spent) * 0.9) - 1], 1),
        "max_ms": round(spent[-1], 1),
    }


def run(resets: int) -> dict[str, Any]:
    started = time.perf_counter()
    with running_bucketd(["photos", "logs"]) as plain:
        up = time.perf_counter()
        server = plain.with_clean_state()
        clean = time.perf_counter()
        s3 = server.s3()
        body = b"x" * 100

        def nothing(n: int) -> None:
            return None

        def a_bucket(n: int) -> None:
            s3.create_bucket(Bucket="uploads")
            for key in range(10):
                s3.put_object(Bucket="uploads", Key=f"k{key}", Body=body)
            s3.put_object(Bucket="photos", Key="cat.jpg", Body=body)

        def a_hundred(n: int) -> None:
            for key in range(100):
                s3.put_object(Bucket="logs", Key=f"day/{key}", Body=body)

        try:
            return {
                "resets": resets,
                "start_ms": round((up - started) * 1000),
                "clean_snapshot_ms": round((clean - up) * 1000),
                "after_nothing": _times(server, resets, nothing),
                "after_a_bucket_and_11_files": _times(server, resets, a_bucket),
                "after_100_files": _times(server, resets, a_hundred),
            }
        finally:
            s3.close()
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resets", type=int, default=40)
    print(json.dumps(run(parser.parse_args().resets), indent=2))


if __name__ == "__main__":
    main()
