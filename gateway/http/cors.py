"""CORS in front of both listeners: preflights answered, actual requests given the headers
that let a page read the answer, by the rules in `storage/rules/cors.py`.

Pure ASGI (`CorsMiddleware` on /v1; the S3 listener asks `Cors` itself). A request
without an `Origin` header (every SDK, CLI and server) passes through untouched and costs
nothing; only a browser's request looks up the rules of what it targets.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage.engine import Engine
from storage.errors import StorageError
from storage.rules.cors import METHODS, CorsRule, answer, decode_rules, match, requested_headers

RulesFor = Callable[[Scope], Awaitable[list[CorsRule]]]
"""The CORS rules of what a request targets (an empty list: CORS is not enabled there)."""
Refuse = Callable[[Scope, int, str, str], Response]
"""The protocol's error answer: (scope, status, S3 error code, message)."""

NOT_ENABLED = "CORSResponse: CORS is not enabled for this bucket."
NOT_ALLOWED = (
    "CORSResponse: This CORS request is not allowed. This is usually because the evaluation "
    "of Origin, request method / Access-Control-Request-Method or "
    "Access-Control-Request-Headers are not allowed by the resource's CORS spec."
)


Header = tuple[bytes, bytes]
NO_HEADERS: tuple[Header, ...] = ()


class Cors:
    """One listener's CORS decision, made once per request: both listeners use it, /v1
    through `CorsMiddleware`, S3 from its own wrapper (`gateway/s3/listener.py`)."""

    def __init__(self, rules_for: RulesFor, refuse: Refuse, options_need_origin: bool) -> None:
        self.rules_for = rules_for
        self.refuse = refuse
        self.options_need_origin = options_need_origin
        """Answer every OPTIONS here (S3: 400 without an Origin), not only preflights."""

    async def _rules(self, scope: Scope) -> list[CorsRule]:
        try:
            return await self.rules_for(scope)
        except StorageError:
            return []

    async def decide(self, scope: Scope) -> tuple[Response | None, tuple[Header, ...]]:
        """The answer given in the app's place (a preflight's, or its refusal), else None;
        and the headers the app's answer gets (none unless a rule allows the origin)."""
        origin = None
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value.decode("latin-1")
                break
        preflight = scope["method"] == "OPTIONS"
        if origin is None and not (preflight and self.options_need_origin):
            return None, NO_HEADERS
        if preflight:
            return await self._preflight(scope, Headers(scope=scope), origin), NO_HEADERS
        assert origin is not None
        rule = match(await self._rules(scope), origin, scope["method"])
        if rule is None:
            return None, NO_HEADERS
        # latin-1 both ways: the origin echoed is the bytes the request sent, as a
        # preflight's answer (a Starlette Response) gives them, not their UTF-8 re-encoding.
        return None, tuple(
            (k.lower().encode(), v.encode("latin-1")) for k, v in answer(rule, origin).items()
        )

    async def _preflight(self, scope: Scope, headers: Headers, origin: str | None) -> Response:
        if origin is None:
            return self.refuse(
                scope, 400, "BadRequest", "Insufficient information. Origin request header needed."
            )
        wanted = headers.get("access-control-request-method")
        if wanted is None:
            return self.refuse(
                scope, 400, "BadRequest", "Invalid Access-Control-Request-Method: null"
            )
        rules = await self._rules(scope)
        if not rules:
            return self.refuse(scope, 403, "AccessForbidden", NOT_ENABLED)
        asked = requested_headers(headers.get("access-control-request-headers"))
        rule = match(rules, origin, wanted.strip().upper(), asked)
        if rule is None:
            return self.refuse(scope, 403, "AccessForbidden", NOT_ALLOWED)
        return Response(b"", 200, answer(rule, origin, asked, preflight=True))


class CorsMiddleware:
    def __init__(
        self, app: ASGIApp, rules_for: RulesFor, refuse: Refuse, options_need_origin: bool
    ) -> None:
        self.app = app
        self.cors = Cors(rules_for, refuse, options_need_origin)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered, extra = await self.cors.decide(scope)
        if answered is not None:
            await answered(scope, receive, send)
            return
        if not extra:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_cors)


FILE_PATH = re.compile(r"^/v1/buckets/([^/]+)/files(?:/|$)")
EXPOSED = (
    "ETag",
    "Location",
    "X-Version-Id",
    "Content-Range",
    "Retry-After",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
)


def v1_rules(origins: list[str], engine: Engine) -> Callable[[Scope], Awaitable[list[CorsRule]]]:
    """The CORS rules of a /v1 request: a file path's bucket's rules (the server's when
    the bucket has none); the server's `cors_origins` for everything else."""
    server = (
        [
            CorsRule(
                allowed_origins=list(origins),
                allowed_methods=[*METHODS, "PATCH"],
                allowed_headers=["*"],
                expose_headers=list(EXPOSED),
                max_age_seconds=600,
            )
        ]
        if origins
        else []
    )

    async def rules(scope: Scope) -> list[CorsRule]:
        found = FILE_PATH.match(scope["path"])
        if found is not None:
            own = decode_rules((await engine.buckets.get_any(found.group(1))).cors)
            if own:
                return own
        return server

    return rules
