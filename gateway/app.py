"""The ASGI application: routes, middleware order and error handlers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from gateway.api.fault_routes import fault_routes
from gateway.api.journal_routes import journal_routes
from gateway.api.openapi import openapi_document
from gateway.api.routes import v1_routes
from gateway.api.testmode import PREFIX as TEST_PREFIX
from gateway.api.testmode import control_routes
from gateway.delivery.process import DeliveryProcess
from gateway.delivery.sender import Deliverer
from gateway.http.anonymous import AnonymousLimit
from gateway.http.auth import Authenticator
from gateway.http.cors import CorsMiddleware, v1_rules
from gateway.http.envelope import JSONResponse, failure, ok
from gateway.http.errors import HANDLERS, ErrorMiddleware
from gateway.http.forwarded import ForwardedMiddleware
from gateway.http.generation import Generation
from gateway.http.journal import journaling, open_journal
from gateway.http.key_watch import KeyWatch
from gateway.http.metrics import Metrics, metrics_endpoint
from gateway.http.middleware import BodyMiddleware, GuardMiddleware
from gateway.http.observe import ObserveMiddleware, v1_upload
from gateway.http.ratelimit import Limiter, RateLimiter
from gateway.http.static import console_routes
from gateway.s3.faults import FaultTable
from storage.engine import Engine
from storage.errors import StorageError

from .context import Context, context
from .settings import Settings


async def healthz(request: Request) -> Response:
    return ok({"status": "ok"})


async def readyz(request: Request) -> Response:
    """200 once the server serves (it starts after migrations and bootstrap) while the
    index and the backend answer; else 503 naming which does not."""
    try:
        await context(request).engine.check_ready()
    except StorageError as exc:
        return failure(503, "not_ready", str(exc))
    return ok({"status": "ready"})


async def openapi(request: Request) -> Response:
    """Generated at the first request for it, not at every start (a process that never
    serves it, a worker or a test's server, skips the work)."""
    state = request.app.state
    if state.openapi is None:
        state.openapi = openapi_document(context(request).settings)
    return JSONResponse(state.openapi)


def routes(test_mode: bool) -> list[BaseRoute]:
    """Test mode's routes only when it is on: off, their paths are unknown ones."""
    return [
        *(control_routes() if test_mode else []),
        *(fault_routes() if test_mode else []),
        *(journal_routes() if test_mode else []),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/v1/openapi.json", openapi, methods=["GET"]),
        *v1_routes(),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        *console_routes(),
    ]


def _refuse(scope: Scope, status: int, code: str, message: str) -> Response:
    return failure(status, "cors_forbidden" if status == 403 else "invalid_request", message)


@dataclass(frozen=True)
class Role:
    """What a serving process does beside answering requests. The default is the single
    process of `bucketd serve --workers 1`: every background job, and webhook delivery
    here or in `delivery`'s process. A worker of several runs the jobs only if it is the
    first, leaves delivery to the delivery process (`deliver` false) unless there is none,
    counts rate limits in `limiter` (shared by the workers), keeps its metrics in
    `metrics_dir` with theirs and counts key revocations in `revocations` with theirs."""

    jobs: bool = True
    deliver: bool = True
    delivery: DeliveryProcess | None = None
    limiter: Limiter | None = None
    metrics_dir: Path | None = None
    revocations: Generation | None = None
    faults: FaultTable | None = None
    """Test mode's fault rules, shared by the workers (`gateway/s3/faults.py`)."""


def _limiter(settings: Settings, role: Role) -> Limiter:
    window = settings.ratelimit.window_seconds
    if settings.ratelimit.redis_url:
        from gateway.http.shared_limit import SharedRateLimiter  # redis loads only where it is used

        return SharedRateLimiter(settings.ratelimit.redis_url, window)
    return role.limiter or RateLimiter(window)


def create_app(settings: Settings, engine: Engine, role: Role = Role()) -> Starlette:
    """The HTTP API over an open engine; the lifespan runs the engine's background work and
    webhook delivery, as `role` says. A single process counts its own revocations: the
    long-lived responses watch that count (`key_watch.py`)."""
    revocations = role.revocations or Generation()
    authenticator = Authenticator(
        engine, settings.id_prefix, settings.key_cache_seconds, revocations
    )
    limiter = _limiter(settings, role)
    anonymous = AnonymousLimit(
        engine, limiter, settings.ratelimit.anonymous_rpm, settings.key_cache_seconds
    )
    metrics = Metrics(role.metrics_dir)
    metrics.attach(engine)
    journal = open_journal(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine.start_background(role.jobs)
        engine.keys.watch_revocations(authenticator.forget)
        deliverer = Deliverer(
            engine, settings.events, metrics.deliveries_settled, engine.events.wait
        ).forever
        delivering = None
        if role.delivery is not None:
            delivering = role.delivery.attach(engine, metrics.deliveries_settled, deliverer)
        elif role.deliver:
            delivering = deliverer()
        task = None if delivering is None else asyncio.create_task(delivering)
        yield
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await limiter.close()

    app = Starlette(
        routes=routes(settings.test_mode),
        middleware=[
            Middleware(ForwardedMiddleware, proxies=settings.proxies()),
            Middleware(
                ObserveMiddleware,
                listener="api",
                metrics=metrics,
                access_log=settings.access_log,
                is_upload=v1_upload,
            ),
            *journaling(journal, engine.clock, "v1"),
            Middleware(ErrorMiddleware),
            Middleware(
                CorsMiddleware,
                rules_for=v1_rules(settings.cors_origins, engine),
                refuse=_refuse,
                options_need_origin=False,
            ),
            Middleware(BodyMiddleware, deadline_seconds=settings.uploads.deadline_seconds),
            Middleware(
                GuardMiddleware,
                authenticator=authenticator,
                limiter=limiter,
                plans=engine.plans,
                anonymous=anonymous,
                clock=engine.clock,
                unthrottled=settings.unthrottled_access_key(),
                guarded=(TEST_PREFIX + "/",) if settings.test_mode else (),
            ),
        ],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False
    app.state.context = Context(settings, engine, authenticator)
    app.state.limiter = limiter
    app.state.anonymous = anonymous
    app.state.revocations = revocations
    app.state.key_watch = KeyWatch(engine, revocations, settings.key_cache_seconds)
    app.state.metrics = metrics
    app.state.openapi = None
    app.state.faults = (role.faults or FaultTable()) if settings.test_mode else None
    app.state.journal = journal
    return app
