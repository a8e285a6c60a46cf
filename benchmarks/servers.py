"""`python -m benchmarks servers`: the hello-world app under bucketd's Uvicorn settings and
under Granian, one and two processes, interleaved over rounds: which server stack answers
faster on this machine (the issue asked to keep the faster one by measurement)."""

from __future__ import annotations

import statistics
from typing import Any

from .small import hello_ceiling

SERVERS = ("uvicorn", "granian")


def run(seconds: float, rounds: int = 2, concurrency: int = 16) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for workers in (1, 2):
            for server in SERVERS:
                measured = hello_ceiling(concurrency, seconds, workers, server)
                if measured["statuses"].keys() != {200}:
                    raise RuntimeError(f"{server} answered {measured['statuses']}: no figure")
                runs.setdefault(f"{server} x{workers}", []).append(measured)
    results: dict[str, Any] = {}
    for name, measures in runs.items():
        results[name] = {
            "ops_per_s": round(statistics.median(m["ops_per_s"] for m in measures), 1),
            "client_cpu_busy": max(m["client_cpu_busy"] for m in measures),
        }
    for workers in (1, 2):
        uvicorn, granian = (results[f"{s} x{workers}"]["ops_per_s"] for s in SERVERS)
        results[f"granian_vs_uvicorn_x{workers}"] = round(granian / uvicorn, 3)
    return results
