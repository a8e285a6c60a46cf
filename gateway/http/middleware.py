"""The guard in front of `/v1` and `/metrics`: start time, authentication, rate limit and
limit headers.

Pure ASGI (no BaseHTTPMiddleware), so streaming bodies pass through untouched. It resolves
the key without failing the request (routing decides 404/405 first, the endpoint decides
401/403), counts the request against the organization or, without a valid key, against the
client address (`anonymous.py`: the server's rate, or that of the bucket the path names),
and answers 429 itself past the limit.
"""

from __future__ import annotations

import asyncio
import re

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.anonymous import AnonymousLimit
from gateway.http.auth import MISSING, Authenticator, AuthFailure, Principal
from gateway.http.envelope import failure
from gateway.http.errors import storage_failure
from gateway.http.ratelimit import Decision, Limiter, unlimited
from storage.config import PlanTable
from storage.errors import StorageError
from storage.rules.clock import Clock
from storage.rules.validation import whole_number

API_PREFIX = "/v1"
METRICS_PATH = "/metrics"
BUCKET_PATH = re.compile(r"/v1/buckets/([^/]+)")
"""A path under one bucket: its id (public downloads and signed URLs are such paths)."""


class GuardMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        limiter: Limiter,
        plans: PlanTable,
        anonymous: AnonymousLimit,
        clock: Clock,
        unthrottled: str | None = None,
        guarded: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.clock = clock
        self.guarded = guarded
        """Prefixes beyond /v1 whose requests are authenticated and counted here too
        (test mode's surface, when it is served)."""
        self.authenticator = authenticator
        self.limiter = limiter
        self.plans = plans
        self.anonymous = anonymous
        self.unthrottled = unthrottled
        """The access key id no limit counts (`Settings.unthrottled_access_key`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["started"] = asyncio.get_running_loop().time()
        path: str = scope["path"]
        if not (
            path in (API_PREFIX, METRICS_PATH)
            or path.startswith(API_PREFIX + "/")
            or path.startswith(self.guarded)
        ):
            await self.app(scope, receive, send)
            return
        try:
            result = await self.authenticator.authenticate(
                Headers(scope=scope).get("authorization")
            )
        except StorageError as exc:
            await storage_failure(exc)(scope, receive, send)
            return
        decision: Decision | None
        if isinstance(result, Principal):
            state["principal"] = result
            decision, counted = None, ""
            if not (self.unthrottled and result.key.access_key_id == self.unthrottled):
                limit = self.plans.get(result.org.plan).requests_per_minute
                decision = await self.limiter.hit("org:" + result.org.id, limit, self.clock.time())
        else:
            assert isinstance(result, AuthFailure)
            state["auth_failure"] = result
            client = scope.get("client")
            bucket = BUCKET_PATH.match(path) if result is MISSING else None  # no bad key
            decision = await self.anonymous.hit(
                client[0] if client else None, self.clock.time(), bucket and bucket.group(1)
            )
            counted = " without a key, per client address,"
        if decision is None:
            decision = unlimited(self.limiter.window_seconds, self.clock.time())
        extra = [(k.lower().encode(), v.encode()) for k, v in decision.headers().items()]
        state["ratelimit_headers"] = decision.headers()
        if not decision.allowed:
            response = failure(
                429,
                "rate_limited",
                f"rate limit of {decision.limit} requests per minute{counted} exceeded; "
                f"retry in {decision.retry_after} seconds",
                decision.headers(),
            )
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


CLOSE = (b"connection", b"close")


class TimedBody:
    """A request body received within the upload deadline (plus a second, so that an
    upload's own deadline answers first, with its 408): past it, `receive` answers as if
    the client went away, so a JSON, XML or form body trickled a byte at a time holds no
    connection for longer than an upload may take. It counts the bytes received, and says
    whether the body was read to its end (`complete`): an answer given before then says
    Connection: close (`CLOSE`). Both listeners use it: /v1 through `BodyMiddleware`, S3
    from its own wrapper (`gateway/s3/listener.py`)."""

    def __init__(self, receive: Receive, deadline_seconds: float) -> None:
        self._receive = receive
        self._deadline = asyncio.get_running_loop().time() + deadline_seconds + 1.0
        self.complete = False
        self.received = 0

    async def receive(self) -> Message:
        if self.complete:  # the body is in: what is left is waiting for a disconnect
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            return {"type": "http.disconnect"}
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if not message.get("more_body", False):
                self.complete = True
        else:
            self.complete = True
        return message


class BodyMiddleware:
    """Every request body within the upload deadline (`TimedBody`), and a connection whose
    body was not read to its end closed once answered.

    When the app answers before the body's end (a 401, a 403, a 413, a NoSuchUpload; an
    `Expect: 100-continue` client then never sends it), the answer says Connection: close:
    the connection is closed instead of drained, and the next request on it is never read
    from this body's bytes.
    """

    def __init__(self, app: ASGIApp, deadline_seconds: float) -> None:
        self.app = app
        self.deadline_seconds = deadline_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not has_body(scope):
            await self.app(scope, receive, send)
            return
        body = TimedBody(receive, self.deadline_seconds)

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not body.complete:
                message["headers"] = [*message.get("headers", []), CLOSE]
            await send(message)

        await self.app(scope, body.receive, closing_send)


def has_body(scope: Scope) -> bool:
    """Whether the request declares a body: chunked, or a Content-Length above 0 (the last
    one, when there are several)."""
    declared = b"0"
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            declared = value
    return (whole_number(declared) or 0) > 0
