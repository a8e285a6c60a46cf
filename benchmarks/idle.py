"""`python -m benchmarks idle --seconds 30`: the CPU of a server nobody talks to.

One `bucketd serve` (the tests' config, fresh data dir) is left alone for a settle and then
`seconds`; the CPU of its serving process and of its helper processes (the webhook delivery
process) is read from /proc before and after. Every idle gateway pays it, and so does every
test server between requests (docs/performance.md, "An idle server"). The kernel counts in
10 ms ticks: over 30 s that is 0.33 ms/s, so compare trees back to back, several times.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tests.support.live import TEST_CONFIG, LiveServer

from .process import children, cpu_seconds, tree_cpu_seconds


def _helpers_cpu(pid: int) -> float:
    return sum(tree_cpu_seconds(child) for child in children(pid))


def run(seconds: float, settle: float = 3.0) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bucketd-idle-") as scratch:
        live = LiveServer(Path(scratch) / "data", TEST_CONFIG).start()
        try:
            assert live.process is not None
            pid = live.process.pid
            time.sleep(settle)
            serving, helpers, started = cpu_seconds(pid), _helpers_cpu(pid), time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - started
            serving = (cpu_seconds(pid) - serving) * 1000 / elapsed
            helpers = (_helpers_cpu(pid) - helpers) * 1000 / elapsed
        finally:
            live.stop()
    result = {"serving_ms_per_s": serving, "helpers_ms_per_s": helpers}
    result["total_ms_per_s"] = serving + helpers
    print(", ".join(f"{name} {value:.2f}" for name, value in result.items()))
    return result
