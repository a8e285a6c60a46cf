"""The response envelope: `{"data", "error", "meta"}` on every JSON response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from starlette.responses import Response

from bucketd_client.shapes import Error, Written


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


def ok(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"data": data, "error": None, "meta": None}, status, headers)


def written(kind: str, id_: str) -> JSONResponse:
    """Write endpoints answer `{object, id}`."""
    return ok(Written(object=kind, id=id_))


def created(record: msgspec.Struct) -> JSONResponse:
    """A create's 201: `{object, id}` and the rest of the full record (its shape carries
    both)."""
    return ok(record, 201)


def page(
    items: list[Any],
    next_cursor: str | None,
    extra_meta: Mapping[str, Any] | None = None,
    top_level_has_more: bool = False,
) -> JSONResponse:
    meta = {"nextCursor": next_cursor, "hasMore": next_cursor is not None, **(extra_meta or {})}
    body: dict[str, Any] = {"data": items, "error": None, "meta": meta}
    if top_level_has_more:
        body["hasMore"] = meta["hasMore"]
    return JSONResponse(body)


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"data": None, "error": Error(message=message, code=code), "meta": None}


def failure(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message), status, headers)
