"""Test mode's journal of requests, recorded (`storage/services/journal.py` keeps it).

Only when test mode is on, each answered request on either listener is recorded once it
is done (`Recorder`; on /v1 by `JournalMiddleware`, inside `ObserveMiddleware`; on S3 by
the listener's wrapper, `gateway/s3/listener.py`): the protocol, the operation (S3's name as
the access log and the metrics give it; on /v1 the route's template), the bucket and key,
the status, the bytes both ways, the key that authenticated, and a few request headers
named in `_KEPT`. Never recorded: `Authorization`, cookies, signatures (a presigned URL's
query string is not recorded at all), secrets, SSE-C keys.

Not recorded: test mode's own surface, /metrics, /healthz, /readyz and the console's
files: on the API listener only paths under `/v1/` are the application's requests. The
S3 listener serves none of those (its `/metrics` is a bucket named "metrics"): all of its
requests are recorded.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http import zero_copy
from gateway.settings import Settings
from storage.rules.clock import Clock
from storage.services.journal import Entry, Journal

_KEPT = ("content-type", "content-length", "x-amz-tagging", "x-amz-acl", "x-amz-storage-class")
_KEPT_PREFIXES = ("x-amz-meta-", "x-amz-server-side-encryption", "if-")
_SECRET_PARTS = ("customer-key",)
"""SSE-C's key and its digest (`x-amz-server-side-encryption-customer-key[-md5]`)."""


def kept_headers(headers: Headers) -> dict[str, str]:
    """The selected request headers, lower-cased; `Range` too."""
    kept: dict[str, str] = {}
    for name, value in headers.items():
        if (name in _KEPT or name == "range" or name.startswith(_KEPT_PREFIXES)) and not any(
            part in name for part in _SECRET_PARTS
        ):
            kept[name] = value
    return kept


def _s3_target(scope: Scope) -> tuple[str | None, str | None]:
    bucket, key = scope.get("state", {}).get("target", (None, None))
    return bucket, key


def _v1_target(scope: Scope) -> tuple[str | None, str | None]:
    params = scope.get("path_params", {})
    bucket, key = params.get("bucket_id"), params.get("key")
    return bucket, key


def _v1_operation(scope: Scope) -> str:
    route = scope.get("route")
    return route.path if isinstance(route, Route) else "unmatched"


def _s3_operation(scope: Scope) -> str:
    return str(scope.get("state", {}).get("operation") or "unmatched")


class Recorder:
    """One listener's writer of journal entries. Both listeners use it: /v1 through
    `JournalMiddleware`, S3 from its own wrapper (`gateway/s3/listener.py`)."""

    def __init__(self, protocol: str, journal: Journal, clock: Clock) -> None:
        self.protocol = protocol
        self.journal = journal
        self.clock = clock
        self.target: Callable[[Scope], tuple[str | None, str | None]]
        self.operation: Callable[[Scope], str]
        if protocol == "s3":
            self.target, self.operation = _s3_target, _s3_operation
        else:
            self.target, self.operation = _v1_target, _v1_operation

    def record(self, scope: Scope, status: int, received: int, sent: int) -> None:
        principal = scope.get("state", {}).get("principal")
        signed = getattr(principal, "signed", None)
        bucket, key = self.target(scope)
        self.journal.record(
            Entry(
                time=self.clock.time(),
                protocol=self.protocol,
                method=scope["method"],
                operation=self.operation(scope),
                bucket=bucket,
                key=key,
                status=status,
                headers=kept_headers(Headers(scope=scope)),
                bytes_in=received,
                bytes_out=sent,
                key_id=principal.key.id if principal is not None else None,
                access_key_id=signed.credential.access_key_id if signed is not None else None,
            )
        )


class JournalMiddleware:
    def __init__(self, app: ASGIApp, protocol: str, journal: Journal, clock: Clock) -> None:
        self.app = app
        self.protocol = protocol
        self.recorder = Recorder(protocol, journal, clock)

    def _journaled(self, scope: Scope) -> bool:
        path: str = scope["path"]
        return self.protocol == "s3" or path.startswith("/v1/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._journaled(scope):
            await self.app(scope, receive, send)
            return
        status, received, sent, recorded = 500, 0, 0, False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
            return message

        async def counting_send(message: Message) -> None:
            nonlocal status, sent, recorded
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
                if not message.get("more_body", False):
                    # Before the response's end reaches the client: a test that reads the
                    # journal once its request returned finds it there, whichever worker
                    # answered.
                    self.recorder.record(scope, status, received, sent)
                    recorded = True
            elif message["type"] in (zero_copy.EXTENSION, zero_copy.FILLED):
                sent += message["count"]
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            if not recorded:  # a response that failed or a file sent by zero copy
                self.recorder.record(scope, status, received, sent)


def open_journal(settings: Settings) -> Journal | None:
    """This process's handle on the journal when test mode is on (each listener's app
    opens its own, after the workers fork); None when off."""
    if not settings.test_mode:
        return None
    return Journal(settings.data_dir, settings.test_journal_entries)


def journaling(journal: Journal | None, clock: Clock, protocol: str) -> list[Middleware]:
    """The journal's middleware for a listener's list, or none when test mode is off."""
    if journal is None:
        return []
    return [Middleware(JournalMiddleware, protocol=protocol, journal=journal, clock=clock)]
