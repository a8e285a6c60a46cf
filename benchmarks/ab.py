"""`python -m benchmarks ab --base REV`: this tree against another revision, to judge a
change against the noise.

Both trees serve in turn (a git worktree of `REV` beside this one, fsync on, fresh data
dirs) under the same load: /v1 PUT and then GET of 1 KiB objects at c=16, interleaved over
`rounds` so drift in the machine falls on both. Reported per tree and operation: the
median ops/s and server CPU per request (from `/proc`), the range of ops/s over the rounds,
and the ratio of the medians; any error fails the run.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.support.live import ROOT, LiveServer, new_bucket

from . import loadgen
from .loadgen import Request
from .process import cpu_seconds
from .small import CONFIG, KEYS

TEXT = {"Content-Type": "text/plain"}


def _round(tree: Path, base: Path, seconds: float) -> dict[str, dict[str, float]]:
    base.mkdir(parents=True)
    live = LiveServer(base / "data", CONFIG, durable=True, root=tree).start()
    try:
        body = os.urandom(1024)
        with live.client() as http:
            bucket = new_bucket(http, "ab-bench")["id"]
            for i in range(KEYS):  # every key exists before the GETs, however few PUTs run
                http.put(f"/buckets/{bucket}/files/k{i}", content=body, headers=TEXT)
        auth = {"Authorization": f"Bearer {live.admin_key}"}
        files = f"/v1/buckets/{bucket}/files"
        puts = [
            Request("PUT", f"{files}/k{i}", {**auth, "Content-Type": "text/plain"}, body)
            for i in range(KEYS)
        ]
        gets = [Request("GET", f"{files}/k{i}", auth) for i in range(KEYS)]
        assert live.process is not None
        found = {}
        for name, requests in (("put", puts), ("get", gets)):
            before = cpu_seconds(live.process.pid)
            load = loadgen.run(live.url, requests, 16, seconds)
            done = max(sum(load["statuses"].values()), 1)
            errors = sum(c for status, c in load["statuses"].items() if int(status) >= 400)
            if errors:
                raise RuntimeError(f"{tree}: {errors} errors in the {name} run: a failed run")
            found[name] = {
                "ops_per_s": load["ops_per_s"],
                "cpu_ms": (cpu_seconds(live.process.pid) - before) * 1000 / done,
                "client_cpu_busy": load["client_cpu_busy"],
            }
        return found
    finally:
        live.stop()
        shutil.rmtree(base, ignore_errors=True)


def run(base_rev: str, seconds: float, rounds: int = 3) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="bucketd-bench-ab-"))
    other = scratch / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(other), base_rev],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    trees = {"base": other, "this": ROOT}
    seen: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
    try:
        for n in range(rounds):
            for name, tree in trees.items():
                seen[name].append(_round(tree, scratch / f"{name}{n}", seconds))
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, capture_output=True
        )
        shutil.rmtree(scratch, ignore_errors=True)
    result: dict[str, Any] = {"base": base_rev, "rounds": rounds}
    for op in ("put", "get"):
        summary = {}
        for name, runs in seen.items():
            rates = [r[op]["ops_per_s"] for r in runs]
            summary[name] = {
                "ops_per_s": statistics.median(rates),
                "ops_per_s_range": [min(rates), max(rates)],
                "server_cpu_ms_per_op": round(statistics.median(r[op]["cpu_ms"] for r in runs), 3),
                "client_cpu_busy": max(r[op]["client_cpu_busy"] for r in runs),
            }
        summary["this_vs_base"] = round(
            summary["this"]["ops_per_s"] / summary["base"]["ops_per_s"], 3
        )
        result[op] = summary
    return result
