"""The ASGI application: routes, middleware order and error handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from storage.engine import Engine

from . import buckets, files, keys, organization
from .auth import Authenticator
from .context import Context
from .envelope import JSONResponse, ok
from .errors import HANDLERS, ErrorMiddleware
from .metrics import Metrics, metrics_endpoint
from .middleware import CloseUnreadContinueMiddleware, GuardMiddleware
from .observe import ObserveMiddleware, v1_upload
from .openapi import openapi_document
from .ratelimit import Limiter, RateLimiter
from .settings import Settings
from .shared_limit import SharedRateLimiter
from .static import console_routes

FILE_PATH = "/v1/buckets/{bucket_id}/files/{key:path}"


async def healthz(request: Request) -> Response:
    return ok({"status": "ok"})


async def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


Endpoint = Callable[[Request], Awaitable[Response]]


def by_method(handlers: dict[str, Endpoint]) -> Endpoint:
    """One endpoint per path that dispatches on the method, so 405s list every method."""

    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" and "HEAD" not in handlers else request.method
        return await handlers[method](request)

    return dispatch


def route(path: str, **handlers: Endpoint) -> Route:
    return Route(path, by_method(handlers), methods=list(handlers))


def routes() -> list[BaseRoute]:
    return [
        route("/healthz", GET=healthz),
        route("/v1/openapi.json", GET=openapi),
        route("/v1/buckets", GET=buckets.list_buckets, POST=buckets.create_bucket),
        route(
            "/v1/buckets/{bucket_id}",
            GET=buckets.get_bucket,
            PATCH=buckets.update_bucket,
            DELETE=buckets.delete_bucket,
        ),
        route("/v1/buckets/{bucket_id}/files", GET=files.list_files),
        route(
            FILE_PATH,
            GET=files.get_file,
            HEAD=files.get_file,
            PUT=files.put_file,
            PATCH=files.update_file,
            DELETE=files.delete_file,
        ),
        route("/v1/keys", GET=keys.list_keys, POST=keys.create_key),
        route("/v1/keys/{key_id}", GET=keys.get_key, DELETE=keys.revoke_key),
        route("/v1/organization", GET=organization.get_organization),
        route("/metrics", GET=metrics_endpoint),
        *console_routes(),
    ]


def create_app(settings: Settings, engine: Engine) -> Starlette:
    """The HTTP API over an open engine; the lifespan runs the engine's background work."""
    authenticator = Authenticator(engine, settings.id_prefix)
    limiter: Limiter = (
        SharedRateLimiter(settings.ratelimit.redis_url)
        if settings.ratelimit.redis_url
        else RateLimiter()
    )
    metrics = Metrics()
    metrics.attach(engine)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine.start_background()
        engine.watch_revocations(authenticator.forget)
        yield
        await limiter.close()

    app = Starlette(
        routes=routes(),
        middleware=[
            Middleware(
                ObserveMiddleware,
                listener="api",
                metrics=metrics,
                access_log=settings.access_log,
                is_upload=v1_upload,
            ),
            Middleware(ErrorMiddleware),
            Middleware(CloseUnreadContinueMiddleware),
            Middleware(
                GuardMiddleware,
                authenticator=authenticator,
                limiter=limiter,
                plans=settings.plans,
            ),
        ],
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False
    app.state.context = Context(settings, engine, authenticator)
    app.state.limiter = limiter
    app.state.metrics = metrics
    app.state.openapi = openapi_document(settings)
    return app
