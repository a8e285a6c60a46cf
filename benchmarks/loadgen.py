"""A small HTTP/1.1 load generator: keep-alive connections in worker processes.

Each process runs `connections / processes` asyncio connections that send the same request
back to back for a fixed time, parsing only the status line and Content-Length. It reports
operations per second, latency percentiles and how busy its own CPU was, so a saturated
client is never mistaken for a slow server.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import time
from dataclasses import dataclass
from queue import Empty
from typing import Any


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""

    def encode(self, host: str) -> bytes:
        lines = [f"{self.method} {self.path} HTTP/1.1", f"Host: {host}"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        if self.body or self.method in ("PUT", "POST"):
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


async def _connection(
    host: str,
    port: int,
    requests: list[bytes],
    until: float,
    latencies: list[float],
    statuses: dict[int, int],
    start: int = 0,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    index = start
    try:
        while time.perf_counter() < until:
            payload = requests[index % len(requests)]
            index += 1
            started = time.perf_counter()
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


def _process(
    host: str,
    port: int,
    requests: list[bytes],
    connections: int,
    seconds: float,
    out: Any,
    offset: int = 0,
) -> None:
    async def main() -> tuple[list[float], dict[int, int]]:
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        until = time.perf_counter() + seconds
        spread = max(1, len(requests) // max(connections, 1))
        await asyncio.gather(
            *[
                _connection(host, port, requests, until, latencies, statuses, offset + n * spread)
                for n in range(connections)
            ]
        )
        return latencies, statuses

    cpu_before = os.times()
    wall = time.perf_counter()
    latencies, statuses = asyncio.run(main())
    cpu_after = os.times()
    cpu = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    out.put(
        {
            "latencies": latencies,
            "statuses": statuses,
            "cpu": cpu,
            "wall": time.perf_counter() - wall,
        }
    )


def run(
    url: str | list[str],
    requests: list[Request],
    connections: int,
    seconds: float,
    processes: int | None = None,
) -> dict[str, Any]:
    """Drive `requests` (cycled) over `connections` for `seconds`; summary of what was seen.
    Several URLs (gateways) share the connections, one client process per URL at least."""
    urls = [url] if isinstance(url, str) else url
    processes = max(processes or min(connections, 2), len(urls))
    targets = [u.removeprefix("http://").split(":") for u in urls]
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    shares = [
        connections // processes + (1 if i < connections % processes else 0)
        for i in range(processes)
    ]
    workers = []
    for i, share in enumerate(shares):
        if not share:
            continue
        host, port = targets[i % len(targets)]
        encoded = [request.encode(f"{host}:{port}") for request in requests]
        offset = i * len(encoded) // processes
        workers.append(
            context.Process(
                target=_process,
                args=(host, int(port), encoded, share, seconds, queue, offset),
            )
        )
    for worker in workers:
        worker.start()
    try:
        results = [queue.get(timeout=seconds + 60) for _ in workers]
    except Empty:
        for worker in workers:
            worker.kill()
        raise RuntimeError(
            f"a client process never reported (exit codes {[w.exitcode for w in workers]})"
        ) from None
    for worker in workers:
        worker.join()
    latencies = sorted(x for r in results for x in r["latencies"])
    statuses: dict[int, int] = {}
    for r in results:
        for status, count in r["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    wall = max(r["wall"] for r in results)
    busy = max(r["cpu"] / r["wall"] for r in results)
    return {
        "connections": connections,
        "ops_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2) if latencies else None,
        "statuses": statuses,
        "client_cpu_busy": round(busy, 2),
        "client_saturated": busy > 0.9,
    }
