"""The S3 REST endpoint over the same engine, limiter and keys as /v1, served by its own
listener (`listener.py`: a pure ASGI application, not Starlette).

Path-style (`/bucket/key`) and virtual-host-style (`bucket.<domain>/key`) addressing; the
operation is looked up in `operations.py`, and its scope checked, before its handler runs.
Every answer carries `x-amz-request-id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from urllib.parse import unquote_to_bytes

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Scope

from gateway.http.anonymous import AnonymousLimit
from gateway.http.cors import Cors
from gateway.http.generation import Generation
from gateway.http.journal import Recorder, open_journal
from gateway.http.metrics import Metrics
from gateway.http.observe import Observer
from gateway.http.ratelimit import Limiter
from storage.engine import Engine
from storage.errors import StorageError
from storage.rules.cors import CorsRule, decode_rules

from ..settings import Settings
from .access import authorize
from .auth import S3Authenticator, S3Principal, query_params
from .call import S3Call
from .errors import S3Error, error_response, from_storage
from .faults import FaultTable, TruncatedResponse, before
from .listener import S3Listener
from .operations import operation_for
from .payload import PayloadError
from .refusals import inputs_of
from .sigv4 import SignatureError
from .touches import COPY_SOURCE

logger = logging.getLogger("bucketd.s3")


def _target(request: Request, domain: str) -> tuple[str | None, str | None]:
    """(bucket, key) from the Host header and the raw path, percent-decoded once."""
    host = request.headers.get("host", "").rsplit(":", 1)[0].lower()
    raw: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
    path = raw.split(b"?", 1)[0]
    try:
        decoded = unquote_to_bytes(path.lstrip(b"/")).decode("utf-8")
    except UnicodeDecodeError:
        raise S3Error("InvalidURI", "Couldn't parse the specified URI.") from None
    if domain and host.endswith("." + domain):
        bucket = host[: -len(domain) - 1]
        return bucket, decoded or None
    if not decoded:
        return None, None
    bucket, _, key = decoded.partition("/")
    return bucket, key or None


class S3Endpoint:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        limiter: Limiter,
        anonymous: AnonymousLimit,
        revocations: Generation | None = None,
        faults: FaultTable | None = None,
    ) -> None:
        self.settings = settings
        self.faults = faults
        """Test mode's fault rules (`faults.py`); None when test mode is off."""
        self.engine = engine
        self.limiter = limiter
        self.anonymous = anonymous
        self.authenticator = S3Authenticator(
            engine, settings.key_cache_seconds, revocations, settings.s3_domain
        )
        self.unthrottled = settings.unthrottled_access_key()
        """The access key id no rate limit counts (`Settings.unthrottled_access_key`)."""

    async def handle(self, request: Request) -> Response:
        state = request.scope.setdefault("state", {})
        request_id = state.get("request_id") or secrets.token_hex(8).upper()
        started = asyncio.get_running_loop().time()
        resource = request.url.path
        head = request.method == "HEAD"
        cut = stale = None
        try:
            principal = await self._authenticate(request)
            state["principal"] = principal
            params = query_params(request.scope.get("query_string", b"").decode("latin-1"))
            request = _hoisted(request, params)
            bucket, key = _target(request, self.settings.s3_domain)
            state["target"] = (bucket, key)  # for test mode's journal
            operation = operation_for(
                request.method, bucket, key, params, COPY_SOURCE in request.headers
            )
            name = state["operation"] = operation.called(params)
            if self.faults is not None and (fault := self.faults.pick(name, bucket, key)):
                cut, stale = fault.truncate_after, fault.stale_seconds
                if (answer := await before(fault, request.scope, self.faults)) is not None:
                    return answer
            inputs = inputs_of(operation.names)
            inputs.refuse(request.headers, params)
            call = S3Call(
                request,
                principal,
                self.engine,
                self.settings,
                bucket,
                key,
                params,
                request_id,
                started + self.settings.uploads.deadline_seconds,
                inputs=inputs,
                stale_seconds=stale,
            )
            if operation.prepare is not None:
                await operation.prepare(call)
            await authorize(call, operation)
            response = await operation.handler(call)
        except S3Error as exc:
            response = error_response(exc, resource, request_id, head)
        except SignatureError as exc:
            response = error_response(
                S3Error(exc.code, exc.message, exc.status), resource, request_id, head
            )
        except PayloadError as exc:
            response = error_response(
                S3Error(exc.code, exc.message, exc.status), resource, request_id, head
            )
        except StorageError as exc:
            response = error_response(from_storage(exc), resource, request_id, head)
        except ClientDisconnect:
            response = error_response(
                S3Error("IncompleteBody", "the client went away"), resource, request_id
            )
        except Exception:
            logger.exception(  # the operation, not the path: file names never reach a log
                "unexpected error in %s (request %s)", state.get("operation"), request_id
            )
            error = S3Error(
                "InternalError", "We encountered an internal error. Please try again.", 500
            )
            response = error_response(error, resource, request_id, head)
        response.headers["x-amz-request-id"] = request_id
        if cut is not None and response.status_code in (200, 206):
            return TruncatedResponse(response, cut)
        return response

    async def _authenticate(self, request: Request) -> S3Principal | None:
        """Verify the signature, then count the request against its organization's rate
        (or the client address's, `anonymous.py`, when the signature fails or there is
        none)."""
        now = self.engine.clock.time()
        try:
            principal = await self.authenticator.authenticate(request)
        except SignatureError:
            await self._count_address(request, now, signed=True)
            raise
        if principal is None:
            await self._count_address(request, now, signed=False)
            return None
        if self.unthrottled is not None and principal.key.access_key_id == self.unthrottled:
            return principal
        limit = self.engine.plans.get(principal.org.plan).requests_per_minute
        decision = await self.limiter.hit("org:" + principal.org.id, limit, now)
        if not decision.allowed:
            raise _slow_down(decision.retry_after)
        return principal

    async def count_failed_signature(self, request: Request) -> None:
        """Count, at the server's rate, a request whose signature failed once it had been
        counted as one without any (a POST form's, checked as its body is read)."""
        await self._count_address(request, self.engine.clock.time(), signed=True)

    async def _count_address(self, request: Request, now: float, signed: bool) -> None:
        """A request that failed its signature is counted at the server's rate whatever
        bucket it names (a bucket's own rate does not lift the limit on guessing)."""
        bucket = None
        if not signed:
            with contextlib.suppress(S3Error):  # answered as such once counted
                bucket, _ = _target(request, self.settings.s3_domain)
        client = request.client.host if request.client else None
        decision = await self.anonymous.hit(client, now, bucket_name=bucket)
        if decision is not None and not decision.allowed:
            raise _slow_down(decision.retry_after)


AUTH_PARAMS = frozenset(
    {
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "x-amz-expires",
        "x-amz-signedheaders",
        "x-amz-signature",
        "x-amz-security-token",
    }
)


def _hoisted(request: Request, params: dict[str, str]) -> Request:
    """A signed URL's x-amz- query parameters are headers of its request, as AWS reads them
    (the JS SDK's presigner moves `x-amz-acl`, metadata and the like there): added to the
    request's headers, so they are honoured or refused as the same headers would be (on an
    unsigned request too, where a header would be as unsigned). A signature covers the
    query, so a signed request's are the signer's."""
    extra = {
        name.lower(): value
        for name, value in params.items()
        if name.lower().startswith("x-amz-") and name.lower() not in AUTH_PARAMS
    }
    if not extra:
        return request
    added = []
    for name, value in extra.items():
        if not name.isascii():
            raise S3Error("InvalidArgument", "a query parameter named x-amz- is ASCII")
        present = request.headers.get(name)
        if present is not None and present != value:
            raise S3Error("InvalidArgument", f"{name} is both a header and a query parameter")
        if present is None:  # as a client sends a header: UTF-8 bytes, read as Latin-1
            added.append((name.encode("latin-1"), value.encode("utf-8")))
    scope = {**request.scope, "headers": [*request.scope["headers"], *added]}
    return Request(scope, request.receive)


def _slow_down(retry_after: int) -> S3Error:
    return S3Error(
        "SlowDown", "Please reduce your request rate.", 503, {"Retry-After": str(retry_after)}
    )


def _refuse(scope: Scope, status: int, code: str, message: str) -> Response:
    """A preflight refused, under the request's own id: its XML says the id that
    X-Request-Id and x-amz-request-id give (the listener adds those)."""
    rid = scope.get("state", {}).get("request_id") or secrets.token_hex(8)
    return error_response(S3Error(code, message, status), scope["path"], rid)


def create_s3_app(
    settings: Settings,
    engine: Engine,
    limiter: Limiter,
    anonymous: AnonymousLimit,
    metrics: Metrics,
    revocations: Generation | None = None,
    faults: FaultTable | None = None,
) -> S3Listener:
    """The S3 listener's ASGI application (`listener.py`) around one `S3Endpoint`."""
    endpoint = S3Endpoint(settings, engine, limiter, anonymous, revocations, faults)

    async def cors_rules(scope: Scope) -> list[CorsRule]:
        try:
            bucket, _ = _target(Request(scope), settings.s3_domain)
        except S3Error:  # a path that is no UTF-8 names no bucket: the endpoint says so
            return []
        return [] if bucket is None else decode_rules((await engine.buckets.shared(bucket)).cors)

    journal = open_journal(settings)
    app = S3Listener(
        endpoint.handle,
        Cors(cors_rules, _refuse, options_need_origin=True),
        Observer("s3", metrics, settings.access_log),
        None if journal is None else Recorder("s3", journal, engine.clock),
        settings.proxies(),
        settings.uploads.deadline_seconds,
        capture=faults is not None,
    )
    app.state.endpoint = endpoint
    return app
