"""Running bucketd: the HTTP API and the S3 endpoint, two Uvicorn listeners on uvloop over
one engine, in one process (`--workers 1`) or in each of several (`workers.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import resource
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import uvicorn

from gateway.app import Role, create_app
from gateway.delivery.process import DeliveryProcess
from gateway.http.protocol import (
    FIRST_REQUEST_GRACE_SECONDS,
    ConnectionGuard,
    EnvelopeProtocol,
    ListenerState,
    guarded,
)
from gateway.runtime.bootstrap import apply_bootstrap, ensure_admin_key
from gateway.runtime.reload import Reloader
from gateway.s3.app import create_s3_app
from gateway.settings import Settings
from storage.engine import Engine
from storage.faults import Faults

logger = logging.getLogger("bucketd.server")
TEST_MODE_WARNING = (
    "TEST MODE IS ON (test_mode / BUCKETD_TEST_MODE): the operator's key may move the "
    "server's clock under /_bucketd/test/, and with it key and link expiry and object-lock "
    "retention; for tests only, never for data that must be kept (docs/testing.md)"
)
"""Said at start-up, on stdout with the listening addresses and as a warning in the log,
whenever test mode is on: `bucketd serve` given BUCKETD_TEST_MODE by a stray environment
line or config key must not look like a production server."""
NULL_BACKEND_WARNING = (
    'THE NULL STORAGE BACKEND IS ON (storage.backend = "null"): every content written is '
    "discarded and every read answers zero bytes; for benchmarks only, never for data "
    "(docs/operations.md)"
)
"""Said at start-up as the test-mode warning is: the backend refuses a data dir holding real
data, but a fresh one would accept writes it does not keep."""
FILES_KEPT_FOR_WORK = 256
"""File descriptors left for what is not a connection: the index, blobs in flight, logs."""


class Listener(uvicorn.Server):
    """A Uvicorn server that leaves signals to `run`, which stops every listener at once,
    and wakes once a second rather than ten times when idle."""

    _exiting: asyncio.Event | None = None
    _should_exit = False

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.server_state: ListenerState = ListenerState()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._exiting is not None:
            self._exiting.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Uvicorn's, once the TLS handshakes in progress have ended (at most the first
        request's grace): a connection accepted just before the stop is then answered over
        TLS as over plain HTTP, not dropped for being in no list the stop looked at."""
        for server in self.servers:
            server.close()
        await self.server_state.wait_for_handshakes(FIRST_REQUEST_GRACE_SECONDS)
        await super().shutdown(sockets)

    async def main_loop(self) -> None:
        """Uvicorn's loop looks at its state every 0.1 s, ten wake-ups a second per
        listener for a Date header it renews once a second; this one renews it once a
        second and is woken at once by `should_exit` (set from the loop's own signal
        handlers), so a stop is as quick and an idle server's CPU lower."""
        self._exiting = asyncio.Event()
        if self._should_exit:
            self._exiting.set()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000  # on_tick renews the Date when a multiple of 10
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exiting.wait(), 1.0)
            should_exit = await self.on_tick(counter)


def uvicorn_config(
    app: object,
    host: str,
    port: int,
    guard: ConnectionGuard | None = None,
    **extra: object,
) -> uvicorn.Config:
    """Uvicorn's proxy headers are off: Uvicorn would trust 127.0.0.1 by default (letting any
    local client choose its address), reads no RFC 7239 `Forwarded`, and would rewrite the
    address before the apps' own `ForwardedMiddleware` (`trusted_proxies`), the one place
    that does."""
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        http=EnvelopeProtocol if guard is None else guarded(guard),
        lifespan="on",
        ws="none",  # no WebSocket route: an upgrade is a plain request; websockets not loaded
        access_log=False,
        log_config=None,  # its loggers go through ours (`logs.py`)
        server_header=False,
        timeout_graceful_shutdown=10,
        proxy_headers=False,
        **extra,  # type: ignore[arg-type]
    )


BACKLOG = 2048


def bind(host: str, port: int) -> socket.socket:
    """A listening socket: it listens at once, so a second bind of the same port (the
    other listener's, or another server's started at the same moment) is refused, which
    SO_REUSEADDR allows between sockets that only bound it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _s3_socket(settings: Settings) -> socket.socket | None:
    """The S3 listener's socket, unless S3 is off. Its port being taken stops the start,
    default port or not: a server that started without it would leave a client (a CI job
    reading the ready file) talking to whatever holds the port."""
    if not settings.s3_enabled:
        return None
    try:
        return bind(settings.host, settings.s3_port)
    except OSError as exc:
        _cannot_listen(
            settings.host,
            settings.s3_port,
            exc,
            "--s3-port, BUCKETD_S3_PORT or make run S3_PORT=N (0: any free port; --no-s3: none)",
        )


def _cannot_listen(host: str, port: int, exc: OSError, flag: str) -> NoReturn:
    """One line naming the address (no traceback), and the exit status of a failure."""
    logger.error(
        "cannot listen on %s:%d: %s; is another server there? Choose another port with %s",
        host,
        port,
        exc.strerror or exc,
        flag,
    )
    raise SystemExit(1) from None


@dataclass(frozen=True)
class Sockets:
    """The listeners' sockets, bound once (and shared by every worker)."""

    api: socket.socket
    s3: socket.socket | None

    @classmethod
    def bind(cls, settings: Settings) -> Sockets:
        try:
            api = bind(settings.host, settings.port)
        except OSError as exc:
            _cannot_listen(
                settings.host,
                settings.port,
                exc,
                "--port, BUCKETD_PORT or make run PORT=N (0: any free port)",
            )
        try:
            return cls(api, _s3_socket(settings))
        except BaseException:
            api.close()
            raise

    def bound(self, settings: Settings) -> Settings:
        """`settings` with the ports these sockets really hold (port 0: the one the kernel
        chose), for the banner, the ready file and the workers."""
        ports = {"port": self.api.getsockname()[1]}
        if self.s3 is not None:
            ports["s3_port"] = self.s3.getsockname()[1]
        return dataclasses.replace(settings, **ports)

    def fds(self) -> list[int]:
        return [sock.fileno() for sock in (self.api, self.s3) if sock is not None]

    def close(self) -> None:
        self.api.close()
        if self.s3 is not None:
            self.s3.close()


def connection_guard(settings: Settings, workers: int = 1) -> ConnectionGuard:
    """Both listeners' connection counts; the total is kept below the file limit (raised to
    its hard maximum first), leaving room for the index, blobs and the engine's threads.
    Workers share `connections.max_total` and `max_per_client` out between them (the
    kernel hands each connection to one of them)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    limits = settings.connections
    if workers > 1:
        limits = dataclasses.replace(
            limits,
            max_total=-(-limits.max_total // workers),
            max_per_client=-(-limits.max_per_client // workers),
        )
    room = max(64, soft - FILES_KEPT_FOR_WORK)
    if limits.max_total > room:
        logger.warning(
            "connections.max_total lowered from %d to %d: the process may open %d files",
            limits.max_total,
            room,
            soft,
        )
        limits = dataclasses.replace(limits, max_total=room)
    return ConnectionGuard(limits)


async def run(
    settings: Settings,
    sockets: Sockets,
    faults: str = "",
    delivery: DeliveryProcess | None = None,
    ready_file: Path | None = None,
    reload: Callable[[], Settings] | None = None,
    stop_requested: threading.Event | None = None,
) -> None:
    """The single process: binds, opens the engine, makes the admin key and what the
    environment asks for, serves; writes `ready_file` once both listeners serve; on
    SIGHUP reads the settings again with `reload` (`reload.py`). `stop_requested`: a stop
    signal came during start-up, so nothing is served."""
    guard = connection_guard(settings)
    engine = await Engine.open(dataclasses.replace(settings.engine_config(), faults=faults))
    try:
        await ensure_admin_key(engine, settings.data_dir, sys.stdout)
        if not engine.config.shared:  # alone on the index: a previous run's claims are void
            await engine.provisioning.release_previous_run()
        await apply_bootstrap(engine, settings.bootstrap, sys.stdout)
        await serve_engine(
            settings,
            engine,
            sockets,
            guard,
            Role(delivery=delivery),
            None if ready_file is None else lambda: write_ready_file(ready_file, settings),
            reload,
            stop_requested=stop_requested,
            announce=lambda: announce(settings, sockets),
        )
    finally:
        await engine.close()


def urls(settings: Settings) -> tuple[str, str]:
    """The API's and the S3 endpoint's base URLs, with the scheme their TLS settings give."""
    api = ("https" if settings.api_tls() else "http") + f"://{settings.host}:{settings.port}"
    s3 = ("https" if settings.s3_tls() else "http") + f"://{settings.host}:{settings.s3_port}"
    return api, s3


def write_ready_file(path: Path, settings: Settings) -> None:
    """The URLs served, as one JSON line, written whole (by a rename) once the server is
    ready: a script waits for the file, then reads where to connect."""
    api, s3 = urls(settings)
    served = {"api": api, "s3": s3 if settings.s3_enabled else None, "pid": os.getpid()}
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(json.dumps(served) + "\n")
    os.replace(temp, path)


def announce(settings: Settings, sockets: Sockets, workers: int = 1) -> None:
    processes = f", {workers} workers" if workers > 1 else ""
    api, s3 = urls(settings)
    print(f"bucketd: serving {api} (data dir {settings.data_dir}{processes})", flush=True)
    if sockets.s3 is not None:
        print(f"bucketd: S3 endpoint at {s3}", flush=True)
    if settings.test_mode:
        print(f"bucketd: {TEST_MODE_WARNING}", flush=True)
        logger.warning(TEST_MODE_WARNING)
    if settings.storage.backend == "null":
        print(f"bucketd: {NULL_BACKEND_WARNING}", flush=True)
        logger.warning(NULL_BACKEND_WARNING)


async def serve_engine(
    settings: Settings,
    engine: Engine,
    sockets: Sockets,
    guard: ConnectionGuard,
    role: Role,
    on_started: Callable[[], None] | None = None,
    reload: Callable[[], Settings] | None = None,
    stop_signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
    second_forces: bool = True,
    stop_requested: threading.Event | None = None,
    announce: Callable[[], None] | None = None,
) -> None:
    """Serve both listeners over an open engine until one of `stop_signals` (in-flight
    requests are finished first, for up to ten seconds; a second one cuts them short when
    `second_forces`); `on_started` is called once both listen; with `reload`, SIGHUP
    applies the settings read again (a single process). `stop_requested` is looked at once
    the listeners' own handlers are in place, and before `announce`: a stop signal that came
    while the apps were built (imports, under load, for seconds) set it and nothing else
    would see it."""
    api = create_app(settings, engine, role)
    config = uvicorn_config(api, settings.host, settings.port, guard, **settings.api_tls())
    listeners = [(Listener(config), sockets.api)]
    if sockets.s3 is not None:
        state = api.state
        s3_app = create_s3_app(
            settings,
            engine,
            state.limiter,
            state.anonymous,
            state.metrics,
            state.revocations,
            state.faults,
        )
        s3_app.state.key_watch = api.state.key_watch  # one watch, one count, both listeners
        config = uvicorn_config(s3_app, settings.host, settings.s3_port, guard, **settings.s3_tls())
        listeners.append((Listener(config), sockets.s3))
    Faults(engine.config.faults).hit("serve.built")
    _stop_on_signals([listener for listener, _ in listeners], stop_signals, second_forces)
    if stop_requested is not None and stop_requested.is_set():
        return
    if announce is not None:
        announce()
    if reload is not None:
        reloader = Reloader(
            settings, reload, engine, [listener for listener, _ in listeners], api.state.anonymous
        )
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reloader)

    async def started() -> None:
        while not all(listener.started for listener, _ in listeners):
            await asyncio.sleep(0.01)
        if on_started is not None:
            on_started()

    watching = asyncio.create_task(started())
    await asyncio.gather(*(listener.serve(sockets=[sock]) for listener, sock in listeners))
    watching.cancel()


def _stop_on_signals(
    listeners: list[Listener], signals: tuple[signal.Signals, ...], second_forces: bool
) -> None:
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for listener in listeners:
            if listener.should_exit and second_forces:
                listener.force_exit = True
            listener.should_exit = True

    for sig in signals:
        loop.add_signal_handler(sig, stop)
