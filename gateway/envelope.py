"""The response envelope: `{"data", "error", "meta"}` on every JSON response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def ok(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"data": data, "error": None, "meta": None}, status, headers)


def written(
    kind: str, id_: str, record: Mapping[str, Any] | None = None, status: int = 200
) -> JSONResponse:
    """Write endpoints answer `{object, id}`, plus the full record on a 201."""
    data = {"object": kind, "id": id_}
    if record:
        data.update(record)
    return ok(data, status)


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
    return {"data": None, "error": {"message": message, "code": code}, "meta": None}


def failure(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message), status, headers)
