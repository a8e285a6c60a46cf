"""Webhook delivery in a process of its own (`events.process`, the default), so posting
deliveries takes another core than serving requests: on the serving process's event loop a
delivery cost a quarter of a small PUT (docs/performance.md).

`bucketd serve` forks it before it opens anything (no thread, socket or connection exists
yet) and keeps one socket pair to it; the child opens its engine once the gateway's is open
(two processes turning a new SQLite file to WAL at once fail with "database is locked"). The
gateway writes a byte when commits with events land (SQLite tells only the process that
committed; over PostgreSQL they come from every gateway's NOTIFY); the delivery process
writes one JSON line per settled batch, which the gateway adds to its `/metrics`. The
delivery process dies with the gateway (the kernel's parent-death signal, and the socket's
end as a second sign). Should it die first, the gateway says so in its log and delivers on
its own loop from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import uvloop

from gateway.delivery.sender import Deliverer, Settled
from gateway.http.metrics import Metrics, share_between_processes
from gateway.settings import Settings
from storage.engine import Engine

logger = logging.getLogger("bucketd.webhooks")
PR_SET_PDEATHSIG = 1
STOP_SECONDS = 10.0
POOL_SIZE = 2
"""PostgreSQL connections the delivery process keeps: it runs one statement at a time."""


class DeliveryProcess:
    """The gateway's handle on the delivery process."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self._sock = sock
        self._wake_pending = False
        self._writer: asyncio.StreamWriter | None = None

    @classmethod
    def fork(cls, settings: Settings, inherited: list[int]) -> DeliveryProcess:
        """Start it; `inherited` are descriptors the child must not keep (the data dir's
        lock: closing the child's copy leaves the gateway's lock held)."""
        parent = os.getpid()

        def prepare(ours: socket.socket) -> None:
            ours.close()
            for fd in inherited:
                os.close(fd)
            die_with(parent)

        pid, ours = fork_child(
            prepare,
            lambda theirs: deliver(settings, theirs, by_signal=False),
            "the webhook delivery process",
        )
        return cls(pid, ours)

    async def attach(
        self,
        engine: Engine,
        record: Callable[[Settled], None],
        fallback: Callable[[], Awaitable[None]],
    ) -> None:
        """Until cancelled: wake the delivery process on commits with events and record
        what it settled; if it exits, run `fallback` (delivering here)."""
        reader, self._writer = await asyncio.open_connection(sock=self._sock)
        self._writer.write(b"w")  # the index is open and migrated: the child may open it
        engine.events.follow(self._wake)
        try:
            while line := await reader.readline():
                record([(outcome, lag) for outcome, lag in json.loads(line)])
        except (OSError, ValueError):  # a wake-up written to the dead process resets the pair
            pass
        self._writer = None
        logger.error(
            "the webhook delivery process (pid %d) exited; this process delivers from now on",
            self.pid,
        )
        await fallback()

    def _wake(self, org_id: str) -> None:
        if self._writer is None or self._wake_pending:
            return
        self._wake_pending = True
        asyncio.get_running_loop().call_soon(self._send_wake)

    def _send_wake(self) -> None:
        self._wake_pending = False
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(b"w")

    def stop(self) -> None:
        """Ask it to stop (the end of its socket pair: it takes no signal, since a SIGTERM to
        the whole process group, from `timeout` or a process manager, would stop it before
        its gateway; a batch it was posting is posted again by the next deliverer, as
        at-least-once allows); kill it if it has not after `STOP_SECONDS`."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self._sock.close()


def fork_child(
    prepare: Callable[[socket.socket], None],
    main: Callable[[socket.socket], Coroutine[Any, Any, None]],
    what: str,
) -> tuple[int, socket.socket]:
    """Fork a child that calls `prepare` with the parent's end of a socket pair, then runs
    `main` with its own end on a uvloop and exits (0 when `main` returns); the child's pid
    and the parent's end."""
    ours, theirs = socket.socketpair()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, measured by the tests' server
        code = 1
        try:
            prepare(ours)
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(main(theirs))
            code = 0
        except BaseException:
            logger.exception("%s failed", what)
        finally:
            os._exit(code)
    theirs.close()
    return pid, ours


def die_with(parent: int) -> None:
    """Have the kernel kill this process when the gateway dies (Linux), so a killed gateway
    restarted at once never finds its predecessor's deliverer still posting."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


async def deliver(
    settings: Settings, sock: socket.socket, metrics: Path | None = None, by_signal: bool = True
) -> None:
    """Deliver until the other end of `sock` closes, or SIGTERM when `by_signal` (the
    supervisor's delivery process; a single gateway's stops its own by the socket alone).
    Anything read from `sock` wakes the deliverer. What it settled is written back as JSON
    lines, or with `metrics` (the workers' directory of shared metrics) counted there."""
    stopping = asyncio.Event()
    # A terminal's Ctrl-C reaches the whole process group: the gateway (or supervisor)
    # alone decides, and stops this process once its own requests are done.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if by_signal:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    reader, writer = await asyncio.open_connection(sock=sock)
    if not await reader.read(4096):  # the gateway ended before its engine was open
        return
    config = settings.engine_config()
    index = dataclasses.replace(config.index, pool_size=min(config.index.pool_size, POOL_SIZE))
    engine = await Engine.open(dataclasses.replace(config, index=index), collect_garbage=False)
    try:
        woken = asyncio.Event()

        async def wait(seconds: float) -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), seconds)
            woken.clear()

        def record(settled: Settled) -> None:
            writer.write(json.dumps(settled).encode() + b"\n")

        if metrics is not None:
            share_between_processes(metrics)
            record = Metrics(metrics).deliveries_settled

        async def follow() -> None:
            while await reader.read(4096):
                woken.set()

        tasks = [
            asyncio.create_task(Deliverer(engine, settings.events, record, wait).forever()),
            asyncio.create_task(follow()),
            asyncio.create_task(stopping.wait()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await engine.close()
