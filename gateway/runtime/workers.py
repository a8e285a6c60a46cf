"""`bucketd serve --workers N`: a supervisor and N worker processes on the same sockets and
data dir, with no difference a client can see.

The supervisor binds the sockets, opens the engine once for what happens once per start
(migrations, a previous run's temp files, claims and leases, the admin key), closes it,
then forks the workers and the webhook delivery process: when it forks it holds no engine,
thread or event loop. Each worker opens its own engine and serves both listeners; the
kernel spreads connections over the workers.

What the workers share, and where that rule lives:
- the SQLite index, its commits serialized by a `flock` (`storage/index/sqlite.py`);
- blobs, held across processes while a write commits (`storage/backends/local/blobs.py`);
- rate limits, in shared memory (`worker_limit.py`), or Redis when configured;
- key revocations, counted in shared memory (`generation.py`) so no worker uses a revoked key;
- the clock's offset (test mode), in shared memory (`storage/rules/clock.py`);
- test mode's fault rules and their counts, in shared memory (`gateway/s3/faults.py`);
- metrics, in prometheus_client's per-process files (`metrics.py`);
- notifications of commits: each child has a socket pair to the supervisor, which relays
  every line to every other child, so event streams, the delivery process and the key
  caches hear of commits made by any worker.
Background jobs (provisioning, the janitor, scrub, lifecycle) run in worker 0.

Signals: SIGTERM or SIGINT stops the workers (each finishes its requests in flight), then
the delivery process; a second one kills them. SIGHUP builds the settings again and
replaces the workers one at a time, each old one told to stop once its successor serves;
the sockets stay open throughout, so no connection is refused. A child that dies is
started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import multiprocess

from gateway.app import Role
from gateway.delivery.process import deliver, die_with, fork_child
from gateway.http.generation import Generation
from gateway.http.metrics import share_between_processes
from gateway.http.worker_limit import WorkerRateLimiter
from gateway.runtime import logs
from gateway.runtime.bootstrap import apply_bootstrap, ensure_admin_key
from gateway.runtime.reload import keeping_fixed
from gateway.runtime.server import (
    Sockets,
    announce,
    connection_guard,
    serve_engine,
    write_ready_file,
)
from gateway.s3.faults import FaultTable
from gateway.settings import Settings, SettingsError
from storage.engine import Engine
from storage.faults import Faults
from storage.rules.clock import Clock

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
"""What the supervisor blocks while it forks."""

logger = logging.getLogger("bucketd.workers")
READY = "\0ready"
"""A worker's first line: it serves (its predecessor, in a rolling restart, may stop)."""
STOP_SECONDS = 15.0
"""How long workers have to finish requests in flight before they are killed."""
RESTART_PAUSE_SECONDS = 1.0
"""Pause before starting again a child that died within this long of its start."""


@dataclass
class Child:
    pid: int
    slot: int
    """The worker's number (0 runs the background jobs); -1: the delivery process."""
    sock: socket.socket
    started: float
    buffer: bytes = b""
    retiring: bool = False
    successor_of: int | None = None
    """In a rolling restart, the pid this worker replaces once it serves."""


@dataclass
class Supervisor:
    settings: Settings
    faults: str
    count: int
    reload: Callable[[], Settings] | None
    lock_fd: int
    ready_file: Path | None = None
    stop_requested: threading.Event = field(default_factory=threading.Event)
    """Set by a SIGINT or SIGTERM that came before the supervisor's own handlers."""
    unready: int = -1
    """Workers of the first start not yet serving; at 0 the ready file is written."""
    children: dict[int, Child] = field(default_factory=dict)
    stopping: bool = False
    to_replace: list[int] = field(default_factory=list)

    def run(self, sockets: Sockets) -> None:
        self.sockets = sockets
        asyncio.run(self._prepare())
        Faults(self.faults).hit("supervisor.prepared")
        self.metrics_dir = Path(tempfile.mkdtemp(prefix="bucketd-metrics-"))
        self.limiter = WorkerRateLimiter(self.settings.ratelimit.window_seconds)
        self.revocations = Generation()
        self.clock = Clock()
        self.fault_rules = FaultTable()
        self.selector = selectors.DefaultSelector()
        self.signals, self.wake = socket.socketpair()
        self.wake.setblocking(False)
        self.selector.register(self.signals, selectors.EVENT_READ, None)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake.fileno())
        try:
            # Checked only now that the supervisor's handlers are in place: a stop that came
            # between a check before them and their installation set the flag and was lost.
            if self.stop_requested.is_set():  # stopped while starting: fork nothing
                return
            if self.settings.delivery_process():
                self._start(-1, self.settings)
            self.unready = self.count
            for slot in range(self.count):
                self._start(slot, self.settings)
            announce(self.settings, self.sockets, self.count)
            self._loop()
        finally:
            signal.set_wakeup_fd(-1)
            self._stop_all()
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
            self.sockets.close()

    async def _prepare(self) -> None:
        config = dataclasses.replace(self.settings.engine_config(), faults=self.faults, workers=1)
        engine = await Engine.open(config)
        try:
            if not engine.config.shared:  # alone on the index: a previous run's claims are void
                await engine.release_previous_run()
            await ensure_admin_key(engine, self.settings.data_dir, sys.stdout)
            await apply_bootstrap(engine, self.settings.bootstrap, sys.stdout)
        finally:
            await engine.close()

    def _loop(self) -> None:
        while self.children or not self.stopping:
            for key, _ in self.selector.select(timeout=1.0):
                if key.data is None:
                    for signum in self.signals.recv(64):
                        self._on_signal(signum)
                else:
                    self._receive(key.data)

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGCHLD:
            self._reap()
        elif signum in (signal.SIGTERM, signal.SIGINT):
            if self.stopping:
                self._signal_all(signal.SIGKILL, workers=True)
                self._signal_all(signal.SIGKILL, workers=False)
                return
            self.stopping = True
            self.to_replace.clear()
            self._signal_all(signal.SIGTERM, workers=True)
        elif signum == signal.SIGHUP and not self.stopping:
            self._rolling_restart()

    def _rolling_restart(self) -> None:
        if self.reload is not None:
            try:
                fresh = self.reload()
            except SettingsError as exc:
                logger.warning("SIGHUP: the settings do not load (%s); keeping the workers", exc)
                return
            self.settings = keeping_fixed(fresh, self.settings)
        self.to_replace = sorted(c.pid for c in self.children.values() if c.slot >= 0)
        logger.warning("SIGHUP: replacing %d workers one at a time", len(self.to_replace))
        self._replace_next()

    def _replace_next(self) -> None:
        while self.to_replace:
            old = self.children.get(self.to_replace.pop(0))
            if old is not None and not old.retiring:
                self._start(old.slot, self.settings, successor_of=old.pid)
                return

    def _receive(self, child: Child) -> None:
        if child.sock.fileno() == -1:  # reaped (and its socket closed) earlier in this batch
            return
        try:
            data = child.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(child.sock)
            return
        lines = (child.buffer + data).split(b"\n")
        child.buffer = lines.pop()
        for line in lines:
            if line == READY.encode():
                self._ready(child)
                continue
            for other in self.children.values():
                if other is not child:
                    with contextlib.suppress(OSError):  # a full or closed pair loses a wake-up
                        other.sock.send(line + b"\n", socket.MSG_DONTWAIT)

    def _ready(self, child: Child) -> None:
        self.unready -= 1
        if self.unready == 0 and self.ready_file is not None:
            write_ready_file(self.ready_file, self.settings)
        predecessor = self.children.get(child.successor_of or -1)
        if predecessor is not None:
            predecessor.retiring = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(predecessor.pid, signal.SIGTERM)
        self._replace_next()

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            child = self.children.pop(pid, None)
            if child is None:
                continue
            multiprocess.mark_process_dead(pid, str(self.metrics_dir))  # type: ignore[no-untyped-call]
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(child.sock)
            child.sock.close()
            if self.stopping or child.retiring:
                continue
            what = "the delivery process" if child.slot < 0 else f"worker {child.slot}"
            logger.warning("%s (pid %d) exited (status %d); starting another", what, pid, status)
            if time.monotonic() - child.started < RESTART_PAUSE_SECONDS:
                time.sleep(RESTART_PAUSE_SECONDS)
            self._start(child.slot, self.settings)
        if self.stopping and all(c.slot < 0 for c in self.children.values()):
            self._signal_all(signal.SIGTERM, workers=False)

    def _start(self, slot: int, settings: Settings, successor_of: int | None = None) -> None:
        parent = os.getpid()

        def main(theirs: socket.socket) -> Coroutine[Any, Any, None]:
            if slot < 0:
                return deliver(settings, theirs, self.metrics_dir)
            return self._work(slot, settings, theirs)

        what = "the webhook delivery process" if slot < 0 else f"worker {slot}"
        # Stop signals wait, blocked, until the child has its own handlers: one arriving in
        # between ran the supervisor's no-op handler in the child and was lost, and a worker
        # that missed its SIGTERM served on while the supervisor waited for it.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid, ours = fork_child(lambda ours: self._become_child(ours, parent, mask), main, what)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if slot < 0:
            ours.send(b"w")  # the index is open and migrated: the delivery process may start
        ours.setblocking(False)
        child = Child(pid, slot, ours, time.monotonic(), successor_of=successor_of)
        self.children[pid] = child
        self.selector.register(ours, selectors.EVENT_READ, child)

    def _become_child(self, ours: socket.socket, parent: int, mask: Iterable[int]) -> None:
        """In a freshly forked child: drop the supervisor's descriptors and signals, then
        take the signals that waited (`mask`: the supervisor's own, restored)."""
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        # A terminal's Ctrl-C reaches every process of the group: the supervisor alone
        # acts on it, stopping the workers with SIGTERM (a second signal would cut short
        # what the first lets finish).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self.selector.close()
        self.signals.close()
        self.wake.close()
        ours.close()
        for other in self.children.values():
            other.sock.close()
        os.close(self.lock_fd)
        die_with(parent)
        share_between_processes(self.metrics_dir)

    async def _work(self, slot: int, settings: Settings, sock: socket.socket) -> None:
        logs.set_level(settings.log_level)
        config = dataclasses.replace(settings.engine_config(), faults=self.faults)
        engine = await Engine.open(config, collect_garbage=False, clock=self.clock)
        try:
            reader, writer = await asyncio.open_connection(sock=sock)

            def publish(channel: str, payload: str) -> None:
                writer.write(f"{channel}\t{payload}\n".encode())

            notify = engine.share_notes(publish)

            async def receive() -> None:
                while line := await reader.readline():
                    channel, _, payload = line.decode().rstrip("\n").partition("\t")
                    notify(channel, payload)

            relaying = asyncio.create_task(receive())
            role = Role(
                jobs=slot == 0,
                deliver=slot == 0 and not settings.delivery_process(),
                limiter=self.limiter,
                metrics_dir=self.metrics_dir,
                revocations=self.revocations,
                faults=self.fault_rules,
            )
            guard = connection_guard(settings, self.count)
            ready = (READY + "\n").encode()
            await serve_engine(
                settings,
                engine,
                self.sockets,
                guard,
                role,
                lambda: writer.write(ready),
                # SIGINT (Ctrl-C) is the supervisor's to act on; a SIGTERM to the whole group
                # reaches a worker twice (directly, then from the supervisor): only the
                # supervisor escalates, by SIGKILL, on a second signal of its own
                stop_signals=(signal.SIGTERM,),
                second_forces=False,
            )
            relaying.cancel()
        finally:
            await engine.close()

    def _signal_all(self, sig: int, workers: bool) -> None:
        for child in list(self.children.values()):
            if (child.slot >= 0) == workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, sig)

    def _stop_all(self) -> None:
        """Stop every child (the workers first), killing what has not ended in time."""
        self.stopping = True
        deadline = time.monotonic() + STOP_SECONDS
        for workers in (True, False):
            self._signal_all(signal.SIGTERM, workers)
            while any((c.slot >= 0) == workers for c in self.children.values()):
                if time.monotonic() > deadline:
                    self._signal_all(signal.SIGKILL, workers)
                self._reap()
                time.sleep(0.02)
