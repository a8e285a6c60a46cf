"""`python -m benchmarks [large] [--sizes 256,1024]`: run scenarios, print and save results."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from . import large, s3_backend, soak

RESULTS = Path(__file__).resolve().parent / "results"


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
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("scenarios", nargs="*", default=["large"])
    parser.add_argument("--sizes", default="256,1024", help="large transfer sizes in MiB")
    parser.add_argument("--minutes", type=float, default=2.0, help="soak duration")
    parser.add_argument("--processes", type=int, default=4, help="soak client processes")
    args = parser.parse_args()
    report: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
        "machine": machine(),
    }
    if "large" in args.scenarios:
        report["large"] = large.run([int(s) for s in args.sizes.split(",")])
    if "soak" in args.scenarios:
        report["soak"] = soak.run(args.minutes, args.processes)
    if "s3-backend" in args.scenarios:
        report["s3_backend"] = s3_backend.run()
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"run-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"saved {out}")


main()
