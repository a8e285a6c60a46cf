"""The peers benchmark's rows of request handling alone and of the durability-equal
comparison (benchmarks/peers.py, benchmarks/report.py): a tiny real run of the null backend
beside the empty app, and the report's rows from a run's figures."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import peers, report


@pytest.mark.slow  # two servers and ten load-generator processes: 10-14 s here
def test_a_tiny_run_measures_the_null_backend_beside_the_empty_app() -> None:
    results = peers.run(["bucketd-null", "empty"], 1024, 4, 0.1, 1, rounds=1, processes=1, keys=8)
    for name in ("bucketd-null", "empty"):
        for op in ("put", "get", "seq_put"):
            measured = results[name][op]
            assert measured["ops_per_s"] > 0 and measured["errors"] == 0, (name, op)
            # /proc counts CPU in 10 ms ticks: a 0.1 s run may show none
            assert measured["server_cpu_ms_per_op"] >= 0, (name, op)
        assert "large" not in results[name]
    handling = results["request_handling"]
    for op in ("put", "get"):
        expected = results["bucketd-null"][op]["ops_per_s"] / results["empty"][op]["ops_per_s"]
        assert handling[f"{op}_vs_empty_1_process"] == round(expected, 3)
    measures = [row[0] for row in report.peer_rows(results)]
    assert measures == [
        "S3 PUT 1 KiB c=4, null backend, 1 process vs empty (ops/s)",
        "S3 GET 1 KiB c=4, null backend, 1 process vs empty (ops/s)",
    ]


def _measured(put: float, get: float, cpu: float, large: bool = True) -> dict[str, Any]:
    result: dict[str, Any] = {
        "put": {"ops_per_s": put, "server_cpu_ms_per_op": cpu},
        "get": {"ops_per_s": get, "server_cpu_ms_per_op": cpu / 2},
        "seq_put": {"p50_ms": cpu * 2},
    }
    if large:
        result["large"] = {"upload_mb_s": put / 10, "download_mb_s": get / 10}
    return result


def test_the_report_reads_bucketd_against_seaweedfs_with_and_without_fsync() -> None:
    figures = {
        "bucketd": _measured(800, 2700, 2.0),
        "bucketd-2w": _measured(1000, 3000, 2.0),
        "bucketd-null": _measured(1500, 3000, 1.0, large=False),
        "bucketd-null-2w": _measured(2000, 4000, 1.0, large=False),
        "empty": _measured(6000, 6000, 0.2, large=False),
        "empty-2w": _measured(8000, 8000, 0.2, large=False),
        "seaweedfs": _measured(2000, 3500, 1.0),
        "seaweedfs-fsync": _measured(500, 3500, 1.0),
        "harness": {"object_bytes": 1024, "concurrency": 16},
    }
    results = {**figures, "bucketd_vs_seaweedfs": {"put": 0.4}}
    rows = {row[0]: row for row in report.peer_rows(results)}
    assert rows["S3 PUT 1 KiB c=16, bucketd --workers 2 vs seaweedfs (ops/s)"][3:] == (0.5, "≥ 1")
    assert rows["S3 PUT 1 KiB c=16, bucketd --workers 2 vs seaweedfs-fsync (ops/s)"][3] == 2.0
    assert rows["S3 PUT 1 KiB c=16 vs seaweedfs-fsync (ops/s)"][3] == 1.6
    assert rows["S3 upload large vs seaweedfs-fsync (MB/s)"][3] == 1.6
    null_rows = [name for name in rows if "null backend" in name]
    assert null_rows == [
        f"S3 {op} 1 KiB c=16, null backend, {processes} vs {other} (ops/s)"
        for processes, empty in (("1 process", "empty"), ("2 processes", "empty-2w"))
        for other in (empty, "seaweedfs")
        for op in ("PUT", "GET")
    ]
    assert rows["S3 PUT 1 KiB c=16, null backend, 2 processes vs empty-2w (ops/s)"][3] == 0.25
    assert not any(
        name.endswith(("vs empty (ops/s)", "vs bucketd-null (ops/s)"))
        and "null backend" not in name
        for name in rows
    )
