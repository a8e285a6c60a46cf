"""The S3 listener: one pure ASGI application around `S3Endpoint.handle`, not Starlette.

The S3 endpoint has one route (every path, five methods) and answers its own errors, so
a Starlette application around it was only layers: a profile of a small PUT (issue 36)
found 62% of its Python time in that stack (ServerErrorMiddleware, six middlewares each
wrapping `send` and `receive`, ExceptionMiddleware, Router, Route, `request_response`).
This wrapper does what those layers did, in their order, by the same rules: each is
written once in `gateway/http/`, where /v1's middlewares call it too.

1. test mode: the connection's transport into the scope (`faults.capture_transport`);
2. the client's address behind trusted proxies (`forwarded.forward`);
3. the request id (`observe.request_id`), answered as `X-Request-Id`;
4. CORS by the bucket's CORS configuration (`cors.Cors`): every OPTIONS is answered here
   (a preflight, or S3's refusal), an allowed origin's headers go on the answer;
5. the body within the upload deadline and its bytes counted (`middleware.TimedBody`);
   an answer given before its end says Connection: close;
6. the endpoint, given the one Starlette `Request` its handlers read; a method S3 has no
   operation for is a 405 MethodNotAllowed, and whatever escapes is logged and answered
   as S3's 500 InternalError, in S3's XML like every other error;
7. the response, sent once: a plain `Response` as its two messages straight to the
   server's `send`; a streamed, ranged (zero-copy) or faulted one through a single
   counting `send` (its bytes for the metrics and the journal);
8. test mode's journal (`journal.Recorder`) before the last byte reaches the client, then
   the metrics and the access line (`observe.Observer`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from starlette.datastructures import State
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gateway.http import zero_copy
from gateway.http.cors import NO_HEADERS, Cors, Header
from gateway.http.forwarded import Proxies, forward
from gateway.http.journal import Recorder
from gateway.http.middleware import CLOSE, TimedBody, has_body
from gateway.http.observe import Observer, request_id, s3_upload

from .errors import S3Error, error_response
from .faults import capture_transport

logger = logging.getLogger("bucketd.s3")
METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE")
ALLOW = ", ".join(METHODS)
ROUTE = "/{path:path}"
"""The metrics' and access log's route for a request that reached the endpoint without
naming an operation (a refused signature): the template of the Starlette route the
listener had, kept so that the label's values do not change."""
UNMATCHED = "unmatched"
"""The route of a request answered before the endpoint (an OPTIONS)."""
PLAIN = Response.__call__

Handle = Callable[[Request], Awaitable[Response]]


class S3Listener:
    def __init__(
        self,
        handle: Handle,
        cors: Cors,
        observer: Observer,
        recorder: Recorder | None,
        proxies: Proxies,
        deadline_seconds: float,
        capture: bool,
    ) -> None:
        self.handle = handle
        self.cors = cors
        self.observer = observer
        self.recorder = recorder
        """Test mode's journal; None when test mode is off."""
        self.proxies = proxies
        self.deadline_seconds = deadline_seconds
        self.capture = capture
        """Test mode: faults may reset or cut the connection, which needs its transport."""
        self.state = State()
        """What handlers reach as `request.app.state` (the endpoint, the key watch)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await _lifespan(receive, send)
            return
        started = time.perf_counter()
        scope["app"] = self
        if self.capture:
            capture_transport(scope, receive)
        forward(scope, self.proxies)
        state = scope.setdefault("state", {})
        state["request_id"] = rid = request_id(scope["headers"])
        body = None
        if has_body(scope):
            body = TimedBody(receive, self.deadline_seconds)
            receive = body.receive
        route, extra = UNMATCHED, NO_HEADERS
        try:
            response, extra = await self.cors.decide(scope)
            if response is not None:  # a preflight's answer carries S3's id, as S3's do
                response.headers["x-amz-request-id"] = rid
            else:
                route = ROUTE
                response = await self._answer(scope, receive, rid)
        except Exception:
            logger.exception(  # the operation, not the path: file names never reach a log
                "unexpected error in %s (request %s)", state.get("operation"), rid
            )
            error = S3Error(
                "InternalError", "We encountered an internal error. Please try again.", 500
            )
            response = _answered(error, scope, rid)
        status, sent, by_sendfile, recorded = 500, 0, 0, False
        try:
            if type(response).__call__ is PLAIN and response.background is None:
                status, content = response.status_code, response.body
                sent = len(content)
                headers = [*response.raw_headers, *_added(body, extra, rid)]
                if self.recorder is not None:  # before the answer reaches the client
                    self.recorder.record(scope, status, _received(body), sent)
                    recorded = True
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": content})
                return

            async def counting(message: Message) -> None:
                nonlocal status, sent, by_sendfile, recorded
                kind = message["type"]
                if kind == "http.response.start":
                    status = message["status"]
                    message["headers"] = [
                        *message.get("headers", []),
                        *_added(body, extra, rid),
                    ]
                elif kind == "http.response.body":
                    sent += len(message.get("body", b""))
                    if self.recorder is not None and not message.get("more_body", False):
                        self.recorder.record(scope, status, _received(body), sent)
                        recorded = True
                elif kind == zero_copy.EXTENSION:
                    sent += message["count"]
                    by_sendfile += message["count"]
                elif kind == zero_copy.FILLED:
                    sent += message["count"]
                await send(message)

            await response(scope, receive, counting)
        finally:
            if self.recorder is not None and not recorded:  # failed, or sent by zero copy
                self.recorder.record(scope, status, _received(body), sent)
            self.observer.record(
                scope,
                state.get("operation") or route,
                status,
                _received(body),
                sent,
                by_sendfile,
                s3_upload(scope),
                time.perf_counter() - started,
            )

    async def _answer(self, scope: Scope, receive: Receive, rid: str) -> Response:
        if scope["method"] not in METHODS:
            error = S3Error(
                "MethodNotAllowed",
                "The specified method is not allowed against this resource.",
                405,
                {"Allow": ALLOW},
            )
            return _answered(error, scope, rid)
        return await self.handle(Request(scope, receive))


def _answered(error: S3Error, scope: Scope, rid: str) -> Response:
    """An error the listener answers itself, as the endpoint answers its own."""
    response = error_response(error, scope["path"], rid, scope["method"] == "HEAD")
    response.headers["x-amz-request-id"] = rid
    return response


def _added(body: TimedBody | None, cors: tuple[Header, ...], rid: str) -> list[Header]:
    """The headers the listener adds to the endpoint's, in the order the middlewares it
    replaces added them."""
    added = [CLOSE] if body is not None and not body.complete else []
    added.extend(cors)
    added.append((b"x-request-id", rid.encode()))
    return added


def _received(body: TimedBody | None) -> int:
    return 0 if body is None else body.received


async def _lifespan(receive: Receive, send: Send) -> None:
    """The S3 listener has nothing to start or stop (the API's app runs the engine's
    background work): each lifespan event is acknowledged, as Starlette's router did."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
