"""OpenAPI 3.1 description of /v1, served at /v1/openapi.json, generated from the operation
table (`routes.py`) and the shapes (`bucketd_client/shapes.py`)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from bucketd_client import shapes
from gateway.api.operation import Operation
from gateway.api.routes import OPERATIONS
from gateway.settings import Settings

JSON = "application/json"
REF = "#/components/schemas/{name}"
RATE_HEADERS = {
    name: {"description": text, "required": True, "schema": {"type": "integer", "minimum": 0}}
    for name, text in (
        ("X-RateLimit-Limit", "Requests allowed in the current one-minute window."),
        ("X-RateLimit-Remaining", "Requests left in the current window (never below 0)."),
        ("X-RateLimit-Reset", "Unix time in seconds at which the window resets."),
    )
}
ERRORS = {
    400: "Invalid query, body or path parameter.",
    401: "Missing, malformed, expired, revoked or unknown API key.",
    402: "The action exceeds the plan's quota.",
    403: "The key is valid but lacks a required scope.",
    404: "The resource does not exist or the key cannot see it.",
    408: "The upload exceeded its deadline.",
    409: "The resource's state does not allow the action.",
    412: "The conditional write's If-None-Match or If-Match did not hold.",
    413: "The upload or JSON body is too large.",
    415: "The file's MIME type is missing, malformed or not allowed.",
    416: "The Range cannot be satisfied.",
    429: "Rate limit exceeded; see Retry-After.",
    500: "Internal failure; the request may be retried.",
    503: "Storage is unavailable; retry later.",
}
_PATH_PARAM = re.compile(r"\{(\w+)\}")


def _ref(shape: type[msgspec.Struct]) -> dict[str, str]:
    return {"$ref": REF.format(name=shape.__name__)}


def _envelope(data: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["data", "error", "meta"],
        "properties": {"data": data, "error": {"type": "null"}, "meta": meta or {"type": "null"}},
    }


def _list(operation: Operation) -> dict[str, Any]:
    assert operation.shape is not None
    meta: dict[str, Any] = {
        "nextCursor": {"type": ["string", "null"]},
        "hasMore": {"type": "boolean"},
    }
    if operation.prefixes:
        meta["prefixes"] = {"type": "array", "items": {"type": "string"}}
    schema = _envelope(
        {"type": "array", "items": _ref(operation.shape)},
        {"type": "object", "required": list(meta), "properties": meta},
    )
    if operation.prefixes:
        schema["properties"]["hasMore"] = {"type": "boolean"}
    return schema


def _answers(operation: Operation) -> dict[str, Any]:
    def json(schema: dict[str, Any], description: str) -> dict[str, Any]:
        return {
            "description": description,
            "headers": RATE_HEADERS,
            "content": {JSON: {"schema": schema}},
        }

    if operation.answer == "content":
        return {
            status: {"description": text, "headers": RATE_HEADERS}
            for status, text in operation.contents.items()
        }
    if operation.answer == "nothing":
        return {"204": {"description": "Done; no body.", "headers": RATE_HEADERS}}
    if operation.answer == "written":
        return {"200": json(_envelope(_ref(shapes.Written)), "{object, id} of what was written.")}
    if operation.answer == "list":
        return {"200": json(_list(operation), "A page; follow meta.nextCursor.")}
    assert operation.shape is not None
    body = json(_envelope(_ref(operation.shape)), operation.shape.__name__)
    if operation.answer == "one":
        return {"200": body}
    if operation.link_to:
        body["links"] = {
            target[0].upper() + target[1:]: {"operationId": target, "parameters": operation.links}
            for target in operation.link_to
        }
    return {"201": body}


def _errors(operation: Operation) -> dict[str, Any]:
    statuses = {401, 429, 500, 503, *operation.errors}
    if operation.scope is not None:
        statuses |= {400, 403}
    content = {JSON: {"schema": {"$ref": REF.format(name="ErrorEnvelope")}}}
    return {
        str(status): {
            "description": ERRORS[status],
            "headers": RATE_HEADERS,
            **({} if operation.method == "HEAD" else {"content": content}),
        }
        for status in sorted(statuses)
    }


FORM_UPLOAD = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "cacheControl": {
            "type": "string",
            "description": "The file's Cache-Control on downloads; seconds mean max-age.",
        },
        "file": {
            "type": "string",
            "format": "binary",
            "description": "The content; its part's Content-Type is the file's type. Any part "
            "with a file name is taken when none is named file.",
        },
    },
}
"""A form upload (`gateway/api/files.py`): a browser's FormData, `curl -F file=@x`."""


def _operation(operation: Operation) -> dict[str, Any]:
    scope = f" (scope {operation.scope})" if operation.scope else " (any valid key)"
    described: dict[str, Any] = {
        "operationId": operation.operation_id,
        "summary": operation.summary + scope,
        "responses": {**_answers(operation), **_errors(operation)},
    }
    if operation.guests:
        described["security"] = [{"bearerAuth": []}, {}]  # a token or a public bucket
    if operation.params:
        described["parameters"] = [
            {"name": p.name, "in": p.location, "schema": dict(p.schema)} for p in operation.params
        ]
    if operation.body == "content":
        described["requestBody"] = {
            "required": True,
            "content": {
                "multipart/form-data": {"schema": FORM_UPLOAD},
                "*/*": {"schema": {"type": "string", "format": "binary"}},
            },
        }
    elif operation.body is not None:
        described["requestBody"] = {
            "required": not operation.optional_body,
            "content": {JSON: {"schema": _ref(operation.body)}},
        }
    return described


def _path_parameters(path: str) -> list[dict[str, Any]]:
    parameters = []
    for name in _PATH_PARAM.findall(path):
        parameter: dict[str, Any] = {"name": name, "in": "path", "required": True}
        if name == "key":
            parameter["description"] = (
                "The file key: the rest of the path, percent-decoded once; may hold '/'."
            )
            parameter["schema"] = {"type": "string", "minLength": 1}
        else:
            parameter["schema"] = {"type": "string"}
        parameters.append(parameter)
    return parameters


def _schemas(settings: Settings) -> dict[str, Any]:
    used: set[type[msgspec.Struct]] = {shapes.Error, shapes.Written}
    for operation in OPERATIONS:
        used |= {operation.shape} if operation.shape else set()
        used |= {operation.body} if isinstance(operation.body, type) else set()
    _, schemas = msgspec.json.schema_components(
        sorted(used, key=lambda shape: shape.__name__), ref_template=REF
    )
    for schema in schemas.values():
        region = schema.get("properties", {}).get("region")
        if region is not None:
            region["enum"] = list(settings.regions)
    schemas["ErrorEnvelope"] = {
        "type": "object",
        "required": ["data", "error", "meta"],
        "properties": {
            "data": {"type": "null"},
            "error": _ref(shapes.Error),
            "meta": {"type": "null"},
        },
    }
    return schemas


def openapi_document(settings: Settings) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for operation in OPERATIONS:
        if operation.path not in paths:
            parameters = _path_parameters(operation.path)
            paths[operation.path] = {"parameters": parameters} if parameters else {}
        paths[operation.path][operation.method.lower()] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "bucketd",
            "version": "1",
            "description": "Buckets and files over a JSON API. Every response carries the "
            "envelope {data, error, meta} and the X-RateLimit-* headers.",
        },
        "servers": [{"url": "/v1"}],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": _schemas(settings),
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": f"An API key: {settings.id_prefix} followed by 43 or more "
                    "URL-safe characters.",
                }
            },
        },
    }
