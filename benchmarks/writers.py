"""Two ways for several worker processes to commit to one SQLite index, measured side by side.

- `cross-process` (what bucketd does): every worker has its own `SQLiteDriver`, which
  group-commits that worker's pending writes under an exclusive `flock` on
  `<index>-writer`; workers take turns on the file.
- `one-writer`: the workers send each write over a Unix socket to one writer process whose
  single `SQLiteDriver` group-commits the writes of every worker together, and answers each
  one when its commit is durable.

Both use the real driver (WAL, `synchronous = FULL`), N worker processes with C writes in
flight each (one small row per write, like a small PUT's index transaction), for the same
seconds; the figures are durable writes per second and the CPU of every process (the
writer's included) per write.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from storage.faults import Faults
from storage.index.sql import NoFiles, Query
from storage.index.sqlite import SQLiteDriver

from .process import cpu_seconds

ROW = Query("INSERT INTO bench_rows (worker, payload) VALUES (?, ?)", (), "count")


def _insert(worker: int, payload: bytes) -> Generator[Query, Any, int]:
    count: int = yield ROW._replace(args=(worker, payload))
    return count


async def _driver(path: Path) -> SQLiteDriver:
    return await SQLiteDriver.open(path, True, NoFiles(), Faults())


def _prepare(path: Path) -> None:
    async def main() -> None:
        driver = await _driver(path)
        await driver.write(_create)
        await driver.close()

    asyncio.run(main())


def _create() -> Generator[Query, Any, None]:
    yield Query(
        "CREATE TABLE IF NOT EXISTS bench_rows (id INTEGER PRIMARY KEY, worker INT, payload BLOB)",
        (),
        "count",
    )


async def _load(write: Any, worker: int, inflight: int, seconds: float) -> int:
    done = 0
    until = time.monotonic() + seconds

    async def one() -> None:
        nonlocal done
        payload = os.urandom(64)
        while time.monotonic() < until:
            await write(worker, payload)
            done += 1

    await asyncio.gather(*(one() for _ in range(inflight)))
    return done


def _cross_worker(path: str, worker: int, inflight: int, seconds: float, out: Any) -> None:
    async def main() -> int:
        driver = await _driver(Path(path))

        async def write(worker: int, payload: bytes) -> None:
            await driver.write(_insert, worker, payload)

        try:
            return await _load(write, worker, inflight, seconds)
        finally:
            await driver.close()

    out.put((asyncio.run(main()), time.process_time()))


def _writer_process(path: str, socket_path: str, ready: Any) -> None:
    async def main() -> None:
        driver = await _driver(Path(path))

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            async def answer(request_id: bytes, worker: int, payload: bytes) -> None:
                await driver.write(_insert, worker, payload)
                writer.write(request_id)

            pending = set()
            try:
                while True:
                    head = await reader.readexactly(12)
                    request_id, worker, size = head[:8], *struct.unpack("!HH", head[8:])
                    payload = await reader.readexactly(size)
                    task = asyncio.create_task(answer(request_id, worker, payload))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
            except asyncio.IncompleteReadError:
                writer.close()

        server = await asyncio.start_unix_server(serve, socket_path)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _socket_worker(socket_path: str, worker: int, inflight: int, seconds: float, out: Any) -> None:
    async def main() -> int:
        reader, writer = await asyncio.open_unix_connection(socket_path)
        waiting: dict[bytes, asyncio.Future[None]] = {}
        counter = iter(range(1 << 62))

        async def answers() -> None:
            while True:
                request_id = await reader.readexactly(8)
                waiting.pop(request_id).set_result(None)

        listener = asyncio.create_task(answers())

        async def write(worker: int, payload: bytes) -> None:
            request_id = next(counter).to_bytes(8, "big")
            done = asyncio.get_running_loop().create_future()
            waiting[request_id] = done
            writer.write(request_id + struct.pack("!HH", worker, len(payload)) + payload)
            await done

        try:
            return await _load(write, worker, inflight, seconds)
        finally:
            listener.cancel()
            writer.close()

    out.put((asyncio.run(main()), time.process_time()))


def _measure(design: str, workers: int, inflight: int, seconds: float) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bucketd-bench-writers-"))
    path = base / "index.db"
    try:
        _prepare(path)
        out: Any = multiprocessing.Queue()
        helpers = []
        if design == "one-writer":
            socket_path = str(base / "writer.sock")
            ready = multiprocessing.Event()
            writer = multiprocessing.Process(
                target=_writer_process, args=(str(path), socket_path, ready)
            )
            writer.start()
            ready.wait(30)
            helpers.append(writer)
            target, first = _socket_worker, socket_path
        else:
            target, first = _cross_worker, str(path)
        processes = [
            multiprocessing.Process(target=target, args=(first, n, inflight, seconds, out))
            for n in range(workers)
        ]
        started = time.perf_counter()
        for process in processes:
            process.start()
        commits, cpu = 0, 0.0
        for _ in processes:
            done, used = out.get(timeout=seconds + 60)
            commits, cpu = commits + done, cpu + used
        wall = time.perf_counter() - started
        for process in processes:
            process.join()
        for helper in helpers:
            assert helper.pid is not None
            cpu += cpu_seconds(helper.pid)
            helper.terminate()
            helper.join()
        return {
            "design": design,
            "workers": workers,
            "inflight_per_worker": inflight,
            "writes_per_s": round(commits / wall, 1),
            "cpu_ms_per_write": round(cpu * 1000 / max(commits, 1), 3),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(seconds: float, rounds: int = 2) -> dict[str, Any]:
    """Both designs at 2 workers with 16 writes in flight each, interleaved over `rounds`."""
    results: dict[str, list[dict[str, Any]]] = {"cross-process": [], "one-writer": []}
    for _ in range(rounds):
        for design in results:
            results[design].append(_measure(design, 2, 16, seconds))
    medians = {
        design: sorted(runs, key=lambda r: r["writes_per_s"])[len(runs) // 2]
        for design, runs in results.items()
    }
    return {
        **medians,
        "one_writer_vs_cross_process": round(
            medians["one-writer"]["writes_per_s"] / medians["cross-process"]["writes_per_s"], 3
        ),
        "rounds": results,
    }
