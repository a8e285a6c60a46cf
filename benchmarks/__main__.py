"""`python -m benchmarks [scenario ...] [--quick]`: measure, print, save, chart.

Scenarios (all by default): `small` (the hello-world ceiling, then /v1 small PUT/GET),
`large` (big transfers against the raw disk), `listing` (first and last pages of a big
bucket), `versions` (first and last pages of ListObjectVersions over 100,000 versions),
`peers` (the S3 endpoint beside SeaweedFS, by default and with fsync on, rclone and moto;
the null backend beside the empty app). Also, not in the default set:
`ab --base REV` (this tree against another revision, interleaved), `idle` (the CPU of a
server nobody talks to, `--seconds` long),
`events` (what the outbox costs a PUT, webhook delivery rate and lag), `cluster-events`
(10,000 events through three gateways on PostgreSQL and SeaweedFS: none lost),
`s3-backend` (bucketd on SeaweedFS against SeaweedFS direct), `snapshots` (snapshot,
restore, fork and delete of a bucket of 10,000 objects on SQLite and PostgreSQL), `budget` (CPU per
request stage by stage, S3 and /v1 PUT and GET of 1 KiB against the empty app),
`inline-limit` (S3 PUT and GET of 1-128 KiB under inline limits 0-128 KiB, durable, one and
two workers: how `storage.inline_max_bytes` was chosen), `inline-crossover` (blob file
against inline at 8-64 KiB, one process, three interleaved rounds), `servers`
(the hello-world app under Uvicorn and Granian), `writers` (two worker processes
committing to one SQLite index: each under a file lock, or through one writer process) and
`soak`. Each run writes
`benchmarks/results/run-<time>.json`, `latest.md` and `latest.png`, and copies the chart and
table of a full run to `docs/bench/` for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

from . import (
    ab,
    budget,
    events,
    idle,
    inline_limit,
    large,
    listing,
    peers,
    report,
    s3_backend,
    scale_out,
    servers,
    small,
    snapshots,
    soak,
    versions,
    writers,
)

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
DOCS_CHART = ROOT.parent / "docs" / "bench" / "latest.png"
DEFAULT = ["small", "large", "listing", "versions", "peers"]


def machine() -> dict[str, object]:
    with open("/proc/meminfo") as handle:
        total_kib = int(handle.readline().split()[1])
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(total_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("scenarios", nargs="*", default=DEFAULT)
    parser.add_argument("--quick", action="store_true", help="smaller and shorter (< 2 minutes)")
    parser.add_argument("--sizes", help="large transfer sizes in MiB (default 256,1024; quick 64)")
    parser.add_argument("--seconds", type=float, help="duration of each small-request point")
    parser.add_argument("--minutes", type=float, default=2.0, help="soak duration")
    parser.add_argument("--base", default="HEAD", help="ab: the revision to compare with")
    parser.add_argument("--processes", type=int, default=4, help="soak client processes")
    parser.add_argument("--workers", type=int, default=1, help="small: server processes")
    args = parser.parse_args()
    quick = args.quick
    seconds = args.seconds or (1.5 if quick else 4.0)
    sizes = [int(s) for s in (args.sizes or ("64" if quick else "256,1024")).split(",")]
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "quick": quick,
    }
    started = time.monotonic()
    for scenario in args.scenarios:
        print(f"== {scenario}", flush=True)
        if scenario == "small":
            concurrencies = [16] if quick else [1, 16, 64]
            result["small"] = small.run(
                concurrencies, [1024] if quick else [1024, 65536], seconds, workers=args.workers
            )
        elif scenario == "budget":
            result["budget"] = budget.run(seconds)
            print(budget.markdown(result["budget"]))
        elif scenario == "inline-limit":
            result["inline_limit"] = inline_limit.run(seconds, [1, 2])
            print(inline_limit.markdown(result["inline_limit"]))
        elif scenario == "inline-crossover":
            crossover = inline_limit.run(seconds, [1], [0, 131072], inline_limit.CROSSOVER, 3)
            result["inline_crossover"] = crossover
            print(inline_limit.markdown(crossover))
        elif scenario == "servers":
            result["servers"] = servers.run(seconds)
        elif scenario == "writers":
            result["writers"] = writers.run(seconds)
        elif scenario == "large":
            result["large"] = large.run(sizes)
        elif scenario == "listing":
            result["listing"] = listing.run(10_000 if quick else 100_000)
        elif scenario == "versions":
            result["versions"] = versions.run(1_000 if quick else 10_000)
        elif scenario == "peers":
            names = list(peers.PEERS)
            if quick:
                names = [n for n in names if n not in ("rclone", "moto")]
            result["peers"] = peers.run(names, 1024, 16, seconds, 64 if quick else 256)
        elif scenario == "ab":
            result["ab"] = ab.run(args.base, seconds)
        elif scenario == "events":
            result["events"] = events.run(seconds)
        elif scenario == "cluster-events":
            result["cluster_events"] = events.cluster()
        elif scenario == "s3-backend":
            result["s3_backend"] = s3_backend.run()
        elif scenario == "idle":
            result["idle"] = idle.run(args.seconds or 30.0)
        elif scenario == "snapshots":
            result["snapshots"] = snapshots.run(1_000 if quick else 10_000, postgres=True)
        elif scenario == "scale-out":
            result["scale_out"] = scale_out.run(seconds)
        elif scenario == "soak":
            result["soak"] = soak.run(args.minutes, args.processes)
        else:
            parser.error(f"unknown scenario {scenario}")
    result["seconds"] = round(time.monotonic() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"run-{stamp}.json").write_text(json.dumps(result, indent=2))
    table = report.markdown(result)
    (RESULTS / "latest.md").write_text(table)
    report.chart(result, RESULTS / "latest.png")
    if not quick and args.scenarios == DEFAULT and (RESULTS / "latest.png").exists():
        DOCS_CHART.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(RESULTS / "latest.png", DOCS_CHART)
        shutil.copy(RESULTS / "latest.md", DOCS_CHART.with_suffix(".md"))
    print(json.dumps(result, indent=2))
    print(table)
    print(f"saved {RESULTS / f'run-{stamp}.json'} ({result['seconds']} s)")


main()
