"""Test mode's journal of requests, read and cleared (docs/testing.md, "A journal of
requests"): `GET /_bucketd/test/journal` and `DELETE /_bucketd/test/journal`, the
operator's only, as the rest of the surface (`testmode.py`), and routed only when test mode
is on. Filters are query parameters; an unknown one or a `since` that is not a number is
a 400, so a misspelt filter never silently matches everything."""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api.testmode import PREFIX, require_operator
from gateway.http.envelope import ok
from gateway.http.errors import bad_request
from storage.services.journal import Entry, Filter, Journal

FILTERS = frozenset({"protocol", "operation", "bucket", "prefix", "since"})


def _shown(entry: Entry) -> dict[str, object]:
    return {
        "time": entry.time,
        "protocol": entry.protocol,
        "method": entry.method,
        "operation": entry.operation,
        "bucket": entry.bucket,
        "key": entry.key,
        "status": entry.status,
        "headers": entry.headers,
        "bytesIn": entry.bytes_in,
        "bytesOut": entry.bytes_out,
        "keyId": entry.key_id,
        "accessKeyId": entry.access_key_id,
    }


def _filter(request: Request) -> Filter:
    query = request.query_params
    unknown = sorted(set(query) - FILTERS)
    if unknown:
        raise bad_request("unknown filter: " + ", ".join(unknown))
    since = None
    if "since" in query:
        try:
            since = float(query["since"])
        except ValueError:
            raise bad_request("since is seconds since the epoch, e.g. 1795000000.5") from None
        if not math.isfinite(since):
            raise bad_request("since is seconds since the epoch, e.g. 1795000000.5")
    return Filter(
        protocol=query.get("protocol"),
        operation=query.get("operation"),
        bucket=query.get("bucket"),
        prefix=query.get("prefix"),
        since=since,
    )


def _journal(request: Request) -> Journal:
    journal: Journal = request.app.state.journal
    return journal


async def read_journal(request: Request) -> Response:
    await require_operator(request)
    where = _filter(request)
    return ok({"entries": [_shown(entry) for entry in _journal(request).read(where)]})


async def clear_journal(request: Request) -> Response:
    await require_operator(request)
    _journal(request).clear()
    return ok({"cleared": True})


def journal_routes() -> list[BaseRoute]:
    return [
        Route(PREFIX + "/journal", read_journal, methods=["GET"]),
        Route(PREFIX + "/journal", clear_journal, methods=["DELETE"]),
    ]
