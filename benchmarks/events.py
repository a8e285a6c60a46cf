"""Events: what the outbox costs a small PUT, and how fast webhooks are delivered.

One server, one receiver on loopback. First /v1 PUTs of 1 KiB at c=16 with no webhook and
with one, interleaved over `rounds` (the outbox row is written either way; the webhook adds
its delivery work on the same cores); then the delivery itself: the deliveries received per
second while the PUTs ran, and the lag from each event's commit (`eventTime`) to its
arrival, p50 and p99.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.live import LiveServer, new_bucket
from tests.support.receiver import Receiver

from . import loadgen
from .loadgen import Request
from .process import children, cpu_seconds

CONFIG = """
[plans.pro]
requests_per_minute = 1000000000
max_buckets = 1000000
max_storage_bytes = 1125899906842624
[events]
allowed_hosts = ["127.0.0.1"]
concurrency = 32
"""
KEYS = 1000


def _puts(bucket: str, auth: dict[str, str]) -> list[Request]:
    body = os.urandom(1024)
    headers = {**auth, "Content-Type": "application/octet-stream"}
    return [Request("PUT", f"/v1/buckets/{bucket}/files/k{i}", headers, body) for i in range(KEYS)]


def _measured(pid: int, load: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A load run, with the CPU per request over it of the serving process, of the webhook
    delivery process (its child) and of this process (the receiver; the load generator
    reports its own)."""
    delivering = children(pid)
    before = [cpu_seconds(p) for p in (pid, *delivering)]
    receiving = time.process_time()
    result = load()
    done = max(sum(result["statuses"].values()), 1)
    after = [cpu_seconds(p) for p in (pid, *delivering)]
    result["server_cpu_ms_per_op"] = round((after[0] - before[0]) * 1000 / done, 3)
    result["delivery_cpu_ms_per_op"] = round((sum(after[1:]) - sum(before[1:])) * 1000 / done, 3)
    result["receiver_cpu_ms_per_op"] = round((time.process_time() - receiving) * 1000 / done, 3)
    return result


def _lags(receiver: Receiver) -> list[float]:
    lags = []
    for received in receiver.received:
        written = datetime.fromisoformat(received.record["eventTime"].replace("Z", "+00:00"))
        lags.append(received.at - written.timestamp())
    return sorted(lags)


def run(seconds: float, rounds: int = 2) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-events-"))
    live = LiveServer(base / "data", CONFIG, durable=True).start()
    receiver = Receiver().start()
    try:
        auth = {"Authorization": f"Bearer {live.admin_key}"}
        with live.client() as http:
            plain = new_bucket(http, "plain")["id"]
            hooked = new_bucket(http, "hooked")["id"]
            made = http.post(f"/buckets/{hooked}/webhooks", json={"url": receiver.url})
            assert made.status_code == 201, made.text
        assert live.process is not None
        pid = live.process.pid
        without, with_hook = [], []
        for _ in range(rounds):
            without.append(
                _measured(pid, lambda: loadgen.run(live.url, _puts(plain, auth), 16, seconds))
            )
            receiver.received.clear()
            started = time.time()
            with_hook.append(
                _measured(pid, lambda: loadgen.run(live.url, _puts(hooked, auth), 16, seconds))
            )
            expected = sum(with_hook[-1]["statuses"].values())
            deadline = time.monotonic() + 60
            while len(receiver.received) < expected and time.monotonic() < deadline:
                time.sleep(0.05)
        lags = _lags(receiver)
        arrived = [r.at for r in receiver.received]
        plain_rate = statistics.median(r["ops_per_s"] for r in without)
        hooked_rate = statistics.median(r["ops_per_s"] for r in with_hook)
        return {
            "put_without_webhook": plain_rate,
            "put_with_webhook": hooked_rate,
            "with_vs_without": round(hooked_rate / plain_rate, 3),
            "errors": sum(
                count
                for r in (*without, *with_hook)
                for status, count in r["statuses"].items()
                if int(status) >= 400
            ),
            "client_cpu_busy": max(r["client_cpu_busy"] for r in (*without, *with_hook)),
            "server_cpu_ms_per_put_without": statistics.median(
                r["server_cpu_ms_per_op"] for r in without
            ),
            "server_cpu_ms_per_put_with": statistics.median(
                r["server_cpu_ms_per_op"] for r in with_hook
            ),
            "delivery_process_cpu_ms_per_put": statistics.median(
                r["delivery_cpu_ms_per_op"] for r in with_hook
            ),
            "receiver_cpu_ms_per_put": statistics.median(
                r["receiver_cpu_ms_per_op"] for r in with_hook
            ),
            "delivered": len(arrived),
            "expected": expected,
            "deliveries_per_s": round(len(arrived) / (max(arrived) - started), 1) if arrived else 0,
            "lag_p50_ms": round(lags[len(lags) // 2] * 1000, 1) if lags else None,
            "lag_p99_ms": round(lags[int(len(lags) * 0.99) - 1] * 1000, 1) if lags else None,
        }
    finally:
        receiver.stop()
        live.stop()
        shutil.rmtree(base, ignore_errors=True)


def cluster(events: int = 10_000, gateways: int = 3) -> dict[str, Any]:
    """`events` PUTs spread over `gateways` gateways on PostgreSQL and a SeaweedFS cluster,
    one webhook: every event id must arrive (none lost; duplicates counted), in order per
    key; the delivery rate and lag while they ran."""
    from tests.support.cluster import SeaweedCluster
    from tests.support.postgres import Postgres

    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-cluster-events-"))
    postgres = Postgres(base / "postgres")
    weed = SeaweedCluster(base / "seaweed").start()
    receiver = Receiver().start()
    servers: list[LiveServer] = []
    try:
        config = (
            CONFIG
            + f'[index]\nurl = "{postgres.new_database()}"\n'
            + weed.bucketd_config(brand="ev" + os.urandom(3).hex())
        )
        for n in range(gateways):
            (base / f"gateway{n}").mkdir(parents=True)
            servers.append(LiveServer(base / f"gateway{n}" / "data", config).start())
        key = servers[0].admin_key
        with servers[0].client(key) as http:
            bucket = new_bucket(http, "cluster-events")["id"]
            made = http.post(f"/buckets/{bucket}/webhooks", json={"url": receiver.url})
            assert made.status_code == 201, made.text
        auth = {"Authorization": f"Bearer {key}"}
        written = 0
        started = time.time()
        loads = []
        while written < events:  # in slices, until enough events were written
            load = loadgen.run([s.url for s in servers], _puts(bucket, auth), 16, 5.0)
            loads.append(load)
            written += sum(c for status, c in load["statuses"].items() if int(status) == 201)
        deadline = time.monotonic() + 120
        while len(receiver.received) < written and time.monotonic() < deadline:
            time.sleep(0.1)
        ids = [r.record["bucketd"]["eventId"] for r in receiver.received]
        order_kept = all(seqs == sorted(seqs) for seqs in _sequencers_by_key(receiver).values())
        lags = _lags(receiver)
        return {
            "gateways": gateways,
            "written": written,
            "delivered_ids": len(set(ids)),
            "duplicates": len(ids) - len(set(ids)),
            "lost": written - len(set(ids)),
            "order_per_key_kept": order_kept,
            "errors": sum(
                c for load in loads for status, c in load["statuses"].items() if int(status) >= 400
            ),
            "put_per_s": round(written / (time.time() - started), 1),
            "lag_p50_ms": round(lags[len(lags) // 2] * 1000, 1) if lags else None,
            "lag_p99_ms": round(lags[int(len(lags) * 0.99) - 1] * 1000, 1) if lags else None,
        }
    finally:
        for server in servers:
            server.stop()
        receiver.stop()
        weed.stop()
        postgres.stop()
        shutil.rmtree(base, ignore_errors=True)


def _sequencers_by_key(receiver: Receiver) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for received in receiver.received:
        obj = received.record["s3"]["object"]
        found.setdefault(obj["key"], []).append(obj["sequencer"])
    return found
