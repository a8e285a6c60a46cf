"""Running the app under Uvicorn, on uvloop, with the engine opened around it."""

from __future__ import annotations

import asyncio
import dataclasses
import sys

import uvicorn
import uvloop

from storage.datadir import lock_data_dir, unlock_data_dir
from storage.engine import Engine

from .app import create_app
from .bootstrap import ensure_admin_key
from .protocol import EnvelopeProtocol
from .settings import Settings


def uvicorn_config(app: object, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        http=EnvelopeProtocol,
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=10,
    )


async def run(settings: Settings, faults: str = "") -> None:
    engine = await Engine.open(dataclasses.replace(settings.engine_config(), faults=faults))
    try:
        await ensure_admin_key(engine, settings.data_dir, sys.stdout)
        server = uvicorn.Server(
            uvicorn_config(create_app(settings, engine), settings.host, settings.port)
        )
        print(
            f"bucketd: serving http://{settings.host}:{settings.port} "
            f"(data dir {settings.data_dir})",
            flush=True,
        )
        await server.serve()
    finally:
        await engine.close()


def serve(settings: Settings, faults: str = "") -> None:
    """Serve until SIGINT/SIGTERM. `faults` is the test-only injection spec."""
    lock = lock_data_dir(settings.data_dir)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(settings, faults))
    finally:
        unlock_data_dir(lock)
