"""Test mode's control surface, on the API listener under `/_bucketd/test/` (see
docs/testing.md): the server's clock, read, moved forward, set and put back; and a
lifecycle pass run now, as of that clock (the worker's own runs every
`lifecycle.interval_seconds`, and a test should not wait for it).

The routes exist only when `test_mode` is on: off, the prefix is any unknown path's 404,
so nothing reveals the surface. On, every route is the operator's (`orgs:manage`, a key
restricted to no bucket), decided by the one decision (`decide_operator`): the clock is the
whole server's, every organization's keys and links expire by it, so no organization's
`keys:manage` may move it. The prefix starts with `_`, which no /v1 path, console path or
bucket name can (`/v1/...`, `/console/...`; S3 is on its own listener).
"""

from __future__ import annotations

import dataclasses

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bucketd_client.shapes import Request as Shape
from gateway.api.access import requester
from gateway.context import context
from gateway.http.auth import principal_of
from gateway.http.envelope import ok
from gateway.http.errors import bad_request
from gateway.http.inputs import read_json
from storage.rules.clock import Clock, ClockLimit

PREFIX = "/_bucketd/test"
MOST_SECONDS = 100 * 366 * 86400.0
"""The farthest the clock moves from the system's, either way: a century."""


class ClockChange(Shape):
    """One of: `advanceSeconds` (forward from where the clock is), `offsetSeconds` (from
    the system's time)."""

    advance_seconds: float | None = None
    offset_seconds: float | None = None


async def require_operator(request: Request) -> None:
    """401 without a valid key, 403 unless the one decision grants the operator's routes.
    The key was looked up by the guard middleware, as a /v1 request's is: a request
    without a valid one is counted at the rate of its client address (so the surface is
    no way around `ratelimit.anonymous_rpm` for guessing keys), the operator's at its
    organization's, and the access log names the key."""
    found = principal_of(request)
    context(request).engine.access.check_operator(requester(request, found.key))


def _shown(clock: Clock) -> dict[str, object]:
    return {"now": clock.iso(), "nowUnix": clock.time(), "offsetSeconds": clock.offset()}


async def read_clock(request: Request) -> Response:
    await require_operator(request)
    return ok(_shown(context(request).engine.clock))


async def change_clock(request: Request) -> Response:
    await require_operator(request)
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, ClockChange)
    if (body.advance_seconds is None) == (body.offset_seconds is None):
        raise bad_request("give one of advanceSeconds and offsetSeconds")
    clock = ctx.engine.clock
    try:
        if body.advance_seconds is not None:
            if body.advance_seconds < 0:
                raise bad_request("advanceSeconds must not be negative (offsetSeconds sets it)")
            clock.advance(body.advance_seconds, MOST_SECONDS)
        else:
            assert body.offset_seconds is not None
            clock.set_offset(body.offset_seconds, MOST_SECONDS)
    except ClockLimit:  # checked under the lock of the move: another worker's counts too
        raise bad_request("the clock moves at most a century from the system's time") from None
    return ok(_shown(clock))


async def reset_clock(request: Request) -> Response:
    await require_operator(request)
    clock = context(request).engine.clock
    clock.set_offset(0.0)
    return ok(_shown(clock))


async def run_lifecycle(request: Request) -> Response:
    """One lifecycle pass, in this request, besides the worker's: a pass applies each
    decision in a transaction guarded against what changed since it was judged, so two
    at once remove nothing twice."""
    await require_operator(request)
    report = await context(request).engine.lifecycle.run_pass()
    return ok({_camel(name): value for name, value in dataclasses.asdict(report).items()})


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)


def control_routes() -> list[BaseRoute]:
    return [
        Route(PREFIX + "/clock", read_clock, methods=["GET"]),
        Route(PREFIX + "/clock", change_clock, methods=["POST"]),
        Route(PREFIX + "/clock", reset_clock, methods=["DELETE"]),
        Route(PREFIX + "/lifecycle", run_lifecycle, methods=["POST"]),
    ]
