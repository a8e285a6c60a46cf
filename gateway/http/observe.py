"""Every request observed once, on both listeners: an `X-Request-Id`, the metrics, and one
JSON access-log line.

The log line names the route template (or the S3 operation), never the path, the query or
a header, so no key, secret, signature or file name reaches the log.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http import zero_copy
from gateway.http.metrics import Metrics
from gateway.runtime.logs import ACCESS, stamp

ACCESS_LOG = logging.getLogger(ACCESS)
REQUEST_ID = re.compile(r"[A-Za-z0-9._:+=/-]{1,128}")
"""A client's X-Request-Id is kept when it looks like an id; anything else is replaced."""

_V1_UPLOAD = re.compile(r"/v1/buckets/[^/]+/files/.+")


def v1_upload(scope: Scope) -> bool:
    return scope["method"] == "PUT" and _V1_UPLOAD.fullmatch(scope["path"]) is not None


def s3_upload(scope: Scope) -> bool:
    """PutObject and UploadPart, as the S3 endpoint named the operation."""
    operation: str = scope.get("state", {}).get("operation", "")
    return operation in ("PutObject", "UploadPart")


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's `X-Request-Id` when it looks like an id, else a new one."""
    for name, value in headers:
        if name == b"x-request-id":
            given = value.decode("latin-1")
            return given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    return uuid.uuid4().hex


class Observer:
    """One listener's record of each answered request: its metrics and its access line.
    Both listeners use it: /v1 through `ObserveMiddleware`, S3 from its own wrapper
    (`gateway/s3/listener.py`)."""

    def __init__(self, listener: str, metrics: Metrics, access_log: bool) -> None:
        self.listener = listener
        self.metrics = metrics
        self.access_log = access_log

    def record(
        self,
        scope: Scope,
        route: str,
        status: int,
        received: int,
        sent: int,
        sent_by_sendfile: int,
        upload: bool,
        seconds: float,
    ) -> None:
        method: str = scope["method"]
        self.metrics.record(
            self.listener, route, method, status, seconds, received, sent, sent_by_sendfile, upload
        )
        if self.access_log and ACCESS_LOG.isEnabledFor(logging.INFO):
            fields = _fields(self.listener, scope, route, status, received, sent, seconds)
            # The record made and handed over directly: `info()` would first walk the stack
            # for the caller's file and line, which no line shows (about 4 µs a request).
            line = ACCESS_LOG.makeRecord(
                ACCESS,
                logging.INFO,
                __file__,
                0,
                "%s %s",
                (method, route),
                None,
                extra={"access": fields},
            )
            ACCESS_LOG.handle(line)


class ObserveMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        listener: str,
        metrics: Metrics,
        access_log: bool,
        is_upload: Callable[[Scope], bool],
    ) -> None:
        self.app = app
        self.observer = Observer(listener, metrics, access_log)
        self.is_upload = is_upload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        state["request_id"] = given = request_id(scope["headers"])
        status, received, sent, sent_by_sendfile = 500, 0, 0, 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
            return message

        async def observing_send(message: Message) -> None:
            nonlocal status, sent, sent_by_sendfile
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", given.encode()),
                ]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            elif message["type"] == zero_copy.EXTENSION:
                sent += message["count"]
                sent_by_sendfile += message["count"]
            elif message["type"] == zero_copy.FILLED:
                sent += message["count"]
            await send(message)

        try:
            await self.app(scope, counting_receive, observing_send)
        finally:
            self.observer.record(
                scope,
                _route(scope),
                status,
                received,
                sent,
                sent_by_sendfile,
                self.is_upload(scope),
                time.perf_counter() - started,
            )


def _route(scope: Scope) -> str:
    """The matched route's template or the S3 operation; "unmatched" keeps label values
    bounded whatever paths clients invent."""
    operation = scope.get("state", {}).get("operation")
    if operation:
        return str(operation)
    route = scope.get("route")
    if isinstance(route, Mount):
        return f"{route.path}/{{path}}"
    return route.path if isinstance(route, Route) else "unmatched"


def _fields(
    listener: str, scope: Scope, route: str, status: int, received: int, sent: int, seconds: float
) -> dict[str, object]:
    """The access line (`logs.py` writes it as JSON or text)."""
    state = scope.get("state", {})
    principal = state.get("principal")
    client = scope.get("client")
    return {
        "time": stamp(time.time()),
        "listener": listener,
        "method": scope["method"],
        "route": route,
        "status": status,
        "bytes_in": received,
        "bytes_out": sent,
        "duration_ms": round(seconds * 1000, 3),
        "org_id": principal.org.id if principal is not None else None,
        "key_id": principal.key.id if principal is not None else None,
        "request_id": state.get("request_id"),
        "client": client[0] if client else None,
    }
