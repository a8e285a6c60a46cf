"""Large transfers through /v1 against the raw disk, with the server's peak RSS.

The issue-2 targets: upload and download of 1 GiB at >= 50% of the raw disk rates measured
in the same run, peak RSS < 150 MiB for each.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import httpx

from tests.support.live import LiveServer, new_bucket

from . import rawdisk
from .process import peak_rss_mib, reset_peak_rss
from .transfer import download, upload

CONFIG = """
[uploads]
default_max_bytes = 68719476736
deadline_seconds = 3600
[plans.pro]
requests_per_minute = 100000000
max_storage_bytes = 1125899906842624
"""


def run(sizes_mib: list[int], work_dir: Path | None = None) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-", dir=work_dir))
    results: dict[str, Any] = {"transfers": []}
    live = LiveServer(base / "data", CONFIG).start()
    try:
        assert live.process is not None
        pid = live.process.pid
        with live.client() as http:
            bucket = new_bucket(http, "bench-large")
        auth = {"Authorization": f"Bearer {live.admin_key}"}
        for size_mib in sizes_mib:
            size = size_mib * 1024 * 1024
            source = base / f"source-{size_mib}.bin"
            rawdisk.make_file(source, size)
            write_before = rawdisk.write_rate(source, base)
            path = f"/v1/buckets/{bucket['id']}/files/large-{size_mib}.bin"
            rawdisk.settle()
            reset_peak_rss(pid)
            seconds, status = upload(
                live.url, path, {**auth, "Content-Type": "application/octet-stream"}, source
            )
            assert status == 201, status
            upload_rss = peak_rss_mib(pid)
            # The disk of a shared machine drifts: the reference is the mean of a measure
            # just before and one just after the transfer.
            disk_write = (write_before + rawdisk.write_rate(source, base)) / 2
            read_before = rawdisk.read_rate(source)
            cold = rawdisk.settle()
            reset_peak_rss(pid)
            down_seconds, received = download(live.url, path, auth)
            assert received == size
            download_rss = peak_rss_mib(pid)
            disk_read = (read_before + rawdisk.read_rate(source)) / 2
            upload_rate = size / seconds / 1e6
            download_rate = size / down_seconds / 1e6
            results["transfers"].append(
                {
                    "size_mib": size_mib,
                    "raw_write_mb_s": round(disk_write, 1),
                    "upload_mb_s": round(upload_rate, 1),
                    "upload_vs_raw_write": round(upload_rate / disk_write, 3),
                    "upload_peak_rss_mib": round(upload_rss, 1),
                    "raw_read_mb_s": round(disk_read, 1),
                    "download_mb_s": round(download_rate, 1),
                    "download_vs_raw_read": round(download_rate / disk_read, 3),
                    "download_peak_rss_mib": round(download_rss, 1),
                    "cold_cache": cold,
                }
            )
            source.unlink()
            httpx.delete(live.url + path, headers=auth)
    finally:
        live.stop()
    return results
