"""Test mode's fault rules on the control surface (docs/testing.md, "Faults on demand"):
`POST /_bucketd/test/faults` adds one, `GET` lists them with their counts, `DELETE`
clears them. Routed only in test mode, and the operator's, as the clock is
(`testmode.py`): the rules fail every organization's requests. The rules themselves, and
how the S3 listener applies them, are `gateway/s3/faults.py`.
"""

from __future__ import annotations

from msgspec import structs
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bucketd_client.shapes import Request as Shape
from gateway.api.testmode import PREFIX, require_operator
from gateway.context import context
from gateway.http.envelope import ok
from gateway.http.errors import bad_request
from gateway.http.inputs import read_json
from gateway.s3.faults import FaultRule, FaultTable, RuleError
from gateway.s3.operations import OPERATIONS

NAMES = frozenset(name for operation in OPERATIONS for name in operation.every_name())


class FaultSpec(Shape):
    """A rule as sent: `FaultRule`'s fields that a client gives (the rest are counts)."""

    operation: str
    fault: str
    bucket: str = "*"
    key: str = "*"
    times: int | None = None
    probability: float | None = None
    seed: int = 0
    delay_seconds: float | None = None
    truncate_after: int | None = None
    stale_seconds: float | None = None


def _table(request: Request) -> FaultTable:
    table: FaultTable = request.app.state.faults
    return table


async def list_faults(request: Request) -> Response:
    await require_operator(request)
    return ok({"rules": [rule.shown() for rule in _table(request).rules()]})


async def add_fault(request: Request) -> Response:
    await require_operator(request)
    spec = await read_json(request, context(request).settings.max_json_bytes, FaultSpec)
    rule = FaultRule(**structs.asdict(spec))
    try:
        rule.check(NAMES)
        added = _table(request).add(rule)
    except RuleError as exc:
        raise bad_request(str(exc)) from None
    return ok(added.shown(), 201)


async def clear_faults(request: Request) -> Response:
    await require_operator(request)
    _table(request).clear()
    return ok({"rules": []})


def fault_routes() -> list[BaseRoute]:
    return [
        Route(PREFIX + "/faults", list_faults, methods=["GET"]),
        Route(PREFIX + "/faults", add_fault, methods=["POST"]),
        Route(PREFIX + "/faults", clear_faults, methods=["DELETE"]),
    ]
