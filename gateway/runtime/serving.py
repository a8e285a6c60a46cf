"""`bucketd serve`: one process serving (`server.py`), or a supervisor forking several
(`workers.py`, which builds on `server.py`: this module sits above both, so neither
imports the other back)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import uvloop

from gateway.delivery.process import DeliveryProcess
from gateway.runtime import logs
from gateway.runtime.server import Sockets, run
from gateway.runtime.workers import Supervisor
from gateway.settings import Settings
from storage.datadir import lock_data_dir, unlock_data_dir

logger = logging.getLogger("bucketd.server")


def serve(
    settings: Settings,
    faults: str = "",
    reload: Callable[[], Settings] | None = None,
    ready_file: Path | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM. `faults` is the test-only injection spec; `reload`
    builds the settings again (for the workers' SIGHUP); `ready_file` is written when the
    server is ready and removed when it stops."""
    if ready_file is not None:
        ready_file.unlink(missing_ok=True)  # a previous run's must not say ready
    try:
        _serve(settings, faults, reload, ready_file)
    finally:
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)


def _serve(
    settings: Settings,
    faults: str,
    reload: Callable[[], Settings] | None,
    ready_file: Path | None,
) -> None:
    logs.configure(settings.log_format, settings.log_level, settings.access_log)
    stop = _stop_requests()
    sockets = Sockets.bind(settings)  # a taken port: nothing made yet
    if settings.s3_enabled and settings.s3_port == 0:
        logger.info(
            "s3_port 0: the S3 endpoint takes a free port (the ready file names it); "
            "--no-s3 or s3_enabled = false turns it off (s3_port 0 did, before)"
        )
    settings = sockets.bound(settings)  # port 0: the one the kernel chose, from here on
    if reload is not None:
        reload = _keeping_ports(reload, sockets)
    try:
        lock = lock_data_dir(settings.data_dir)
    except BaseException:
        sockets.close()
        raise
    delivery = None
    try:
        workers = settings.worker_count()
        if workers > 1:
            Supervisor(settings, faults, workers, reload, lock, ready_file, stop).run(sockets)
            return
        if settings.delivery_process():
            delivery = DeliveryProcess.fork(settings, [lock, *sockets.fds()])
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(settings, sockets, faults, delivery, ready_file, reload, stop))
    finally:
        if delivery is not None:
            delivery.stop()
        sockets.close()
        unlock_data_dir(lock)


def _keeping_ports(reload: Callable[[], Settings], sockets: Sockets) -> Callable[[], Settings]:
    """SIGHUP's settings with the ports bound at start (a file saying port 0 is no change)."""
    return lambda: sockets.bound(reload())


def _stop_requests() -> threading.Event:
    """SIGINT and SIGTERM from the first instant, before the listeners' handlers exist: a
    Ctrl-C during start-up (opening the index, the bootstrap) ends the start once it is
    safe to, instead of being lost (asyncio's own SIGINT handling cancelled a start-up step
    that went on regardless, and the server then served)."""
    requested = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: requested.set())
    return requested
