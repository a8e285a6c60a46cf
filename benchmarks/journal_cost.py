"""`python -m benchmarks.journal_cost [--puts N] [--rounds R]`: what test mode's journal of
requests costs the server: its CPU time (every process of it, from /proc) for N small S3
PUTs from boto3, with test mode on (each request recorded) and off, servers started
alternately so drift in the machine's load falls on both. Prints one JSON object."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .process import tree_cpu_seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _server_cpu_per_puts(test_mode: bool, puts: int) -> float:
    """Server CPU seconds for `puts` PUTs of 100 bytes to a fresh `bucketd dev`."""
    import boto3
    from botocore.config import Config

    with tempfile.TemporaryDirectory(prefix="bucketd-journal-") as scratch:
        ready = Path(scratch) / "ready.json"
        access, secret = "bench" + secrets.token_hex(4), secrets.token_urlsafe(24)
        environ = {
            **os.environ,
            "BUCKETD_ACCESS_KEY_ID": access,
            "BUCKETD_SECRET_ACCESS_KEY": secret,
            "BUCKETD_BUCKETS": "bench",
            "BUCKETD_ACCESS_LOG": "false",
            "BUCKETD_TEST_MODE": "true" if test_mode else "false",
        }
        command = [sys.executable, "-m", "gateway", "dev", "--data-dir", scratch + "/data"]
        command += ["--port", str(_free_port()), "--s3-port", str(_free_port())]
        process = subprocess.Popen(
            [*command, "--ready-file", str(ready)],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not ready.exists():
                if process.poll() is not None:
                    raise RuntimeError("bucketd did not start")
                time.sleep(0.05)
            s3: Any = boto3.client(
                "s3",
                endpoint_url=json.loads(ready.read_text())["s3"],
                aws_access_key_id=access,
                aws_secret_access_key=secret,
                region_name="us-east-1",
                config=Config(s3={"addressing_style": "path"}),
            )
            body = b"x" * 100
            for n in range(50):  # warm up: imports, caches, connections
                s3.put_object(Bucket="bench", Key=f"warm/{n}", Body=body)
            before = tree_cpu_seconds(process.pid)
            for n in range(puts):
                s3.put_object(Bucket="bench", Key=f"k/{n}", Body=body, ContentType="text/plain")
            return tree_cpu_seconds(process.pid) - before
        finally:
            process.terminate()
            process.wait(15)


def _record_cpu_us(entries: int = 10_000) -> float:
    """CPU microseconds of one `Journal.record` (the insert and the bound's delete), alone:
    the part of the cost the server's noise hides."""
    from storage.services.journal import Entry, Journal

    with tempfile.TemporaryDirectory(prefix="bucketd-journal-") as scratch:
        journal = Journal(Path(scratch), 1000)
        headers = {"content-type": "text/plain", "content-length": "100"}
        started = time.process_time()
        for n in range(entries):
            journal.record(
                Entry(
                    time.time(),
                    "s3",
                    "PUT",
                    "PutObject",
                    "bench",
                    f"k/{n}",
                    200,
                    headers,
                    100,
                    0,
                    "key_1",
                    "bench1",
                )
            )
        spent = time.process_time() - started
        journal.close()
        return spent / entries * 1e6


def run(puts: int, rounds: int) -> dict[str, Any]:
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode in ("off", "on"):
            seconds[mode].append(_server_cpu_per_puts(mode == "on", puts))
    off, on = min(seconds["off"]), min(seconds["on"])
    return {
        "puts": puts,
        "server_cpu_seconds_off": seconds["off"],
        "server_cpu_seconds_on": seconds["on"],
        "per_request_ms_off": round(off / puts * 1000, 3),
        "per_request_ms_on": round(on / puts * 1000, 3),
        "journal_ms_per_request": round((on - off) / puts * 1000, 3),
        "record_cpu_us": round(_record_cpu_us(), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--puts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    print(json.dumps(run(options.puts, options.rounds), indent=2))


if __name__ == "__main__":
    main()
