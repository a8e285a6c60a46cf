"""bucketd on the S3 backend against the same SeaweedFS driven directly with boto3.

Issue-4 target: a 256 MiB upload and download through bucketd reach >= 60% of the same
transfer done straight against the cluster with boto3 (same part size and fan-out), in the
same run; the server's peak RSS stays under 150 MiB. The two are interleaved over several
rounds and the medians compared, because a shared machine's speed drifts within seconds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from boto3.s3.transfer import TransferConfig

from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.seaweed import SeaweedServer

from . import rawdisk
from .process import peak_rss_mib, reset_peak_rss
from .transfer import download, upload

PART = 5 * 1024 * 1024
PARALLEL = 2
CONFIG = """
[uploads]
default_max_bytes = 68719476736
deadline_seconds = 3600
"""


def _timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _direct_download(client: Any) -> int:
    body = client.get_object(Bucket="bench-direct", Key="large.bin")["Body"]
    return sum(len(chunk) for chunk in body.iter_chunks(1024 * 1024))


def run(
    size_mib: int = 256, part: int = PART, parallel: int = PARALLEL, rounds: int = 3
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-s3-"))
    size = size_mib * 1024 * 1024
    source = base / "source.bin"
    rawdisk.make_file(source, size)
    cluster = SeaweedServer(base / "seaweed").start()
    times: dict[str, list[float]] = {
        "direct_up": [],
        "bucketd_up": [],
        "direct_down": [],
        "bucketd_down": [],
    }
    rss = {"up": 0.0, "down": 0.0}
    try:
        client = cluster.client()
        client.create_bucket(Bucket="bench-direct")
        transfer = TransferConfig(
            multipart_chunksize=part, max_concurrency=parallel, multipart_threshold=part
        )
        tuning = f"part_size_bytes = {part}\nparallel_parts = {parallel}\n"
        live = LiveServer(
            base / "data", TEST_CONFIG + CONFIG + cluster.bucketd_config("bench", tuning)
        ).start()
        try:
            assert live.process is not None
            pid = live.process.pid
            with live.client() as http:
                bucket = new_bucket(http, "bench-s3")
            auth = {"Authorization": f"Bearer {live.admin_key}"}
            path = f"/v1/buckets/{bucket['id']}/files/large.bin"
            for _ in range(rounds):
                times["direct_up"].append(
                    _timed(
                        lambda: client.upload_file(
                            str(source), "bench-direct", "large.bin", Config=transfer
                        )
                    )
                )
                reset_peak_rss(pid)
                seconds, status = upload(
                    live.url, path, {**auth, "Content-Type": "application/octet-stream"}, source
                )
                assert status == 201, status
                times["bucketd_up"].append(seconds)
                rss["up"] = max(rss["up"], peak_rss_mib(pid))
                times["direct_down"].append(_timed(lambda: _direct_download(client)))
                reset_peak_rss(pid)
                seconds, received = download(live.url, path, auth)
                assert received == size
                times["bucketd_down"].append(seconds)
                rss["down"] = max(rss["down"], peak_rss_mib(pid))
        finally:
            live.stop()
    finally:
        cluster.stop()
    rate = {name: size / statistics.median(values) / 1e6 for name, values in times.items()}
    return {
        "size_mib": size_mib,
        "part_size_mib": part / 1024 / 1024,
        "parallel_parts": parallel,
        "rounds": rounds,
        "direct_upload_mb_s": round(rate["direct_up"], 1),
        "bucketd_upload_mb_s": round(rate["bucketd_up"], 1),
        "upload_vs_direct": round(rate["bucketd_up"] / rate["direct_up"], 3),
        "upload_peak_rss_mib": round(rss["up"], 1),
        "direct_download_mb_s": round(rate["direct_down"], 1),
        "bucketd_download_mb_s": round(rate["bucketd_down"], 1),
        "download_vs_direct": round(rate["bucketd_down"] / rate["direct_down"], 3),
        "download_peak_rss_mib": round(rss["down"], 1),
    }
