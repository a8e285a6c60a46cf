"""OpenAPI 3.1 description of /v1, served at /v1/openapi.json."""

from __future__ import annotations

from typing import Any

from storage.models import BUCKET_STATUSES, SCOPES

from .pagination import MAX_LIMIT
from .settings import Settings

JSON = "application/json"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
MIME_TYPE_PATTERN = rf"^{_TOKEN}/{_TOKEN}(\s*;.*)?$"
MIME_PATTERN = rf"^(\*/\*|{_TOKEN}/\*|{_TOKEN}/{_TOKEN})$"
KEY_PATTERN = r"^[^\x00]+$"
RATE_HEADERS = {
    name: {"description": text, "required": True, "schema": {"type": "integer", "minimum": 0}}
    for name, text in (
        ("X-RateLimit-Limit", "Requests allowed in the current one-minute window."),
        ("X-RateLimit-Remaining", "Requests left in the current window (never below 0)."),
        ("X-RateLimit-Reset", "Unix time in seconds at which the window resets."),
    )
}
ERRORS = {
    "400": "Invalid query, body or path parameter.",
    "401": "Missing, malformed, expired, revoked or unknown API key.",
    "402": "The action exceeds the plan's quota.",
    "403": "The key is valid but lacks a required scope.",
    "404": "The resource does not exist or the key cannot see it.",
    "405": "The method is not allowed on this path.",
    "408": "The upload exceeded its deadline.",
    "409": "The resource's state does not allow the action.",
    "413": "The upload or JSON body is too large.",
    "415": "The file's MIME type is missing, malformed or not allowed.",
    "416": "The Range cannot be satisfied.",
    "429": "Rate limit exceeded; see Retry-After.",
    "500": "Internal failure; the request may be retried.",
    "503": "Storage is unavailable; retry later.",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _envelope(data: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["data", "error", "meta"],
        "properties": {
            "data": data,
            "error": {"type": "null"},
            "meta": meta or {"type": "null"},
        },
    }


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": RATE_HEADERS,
        "content": {JSON: {"schema": schema}},
    }


def _errors(*statuses: str) -> dict[str, Any]:
    return {
        status: {
            "description": ERRORS[status],
            "headers": RATE_HEADERS,
            "content": {JSON: {"schema": _ref("ErrorEnvelope")}},
        }
        for status in statuses
    }


def _list_meta(with_prefixes: bool = False) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "nextCursor": {"type": ["string", "null"]},
        "hasMore": {"type": "boolean"},
    }
    if with_prefixes:
        properties["prefixes"] = {"type": "array", "items": {"type": "string"}}
    return {"type": "object", "required": list(properties), "properties": properties}


WRITTEN = {
    "type": "object",
    "required": ["object", "id"],
    "properties": {"object": {"type": "string"}, "id": {"type": "string"}},
}
COMMON_ERRORS = ("400", "401", "403", "429", "500")
BUCKET_ID = {"name": "bucket_id", "in": "path", "required": True, "schema": {"type": "string"}}
FILE_KEY = {
    "name": "key",
    "in": "path",
    "required": True,
    "description": "The file key: the rest of the path, percent-decoded once; may hold '/'.",
    "schema": {"type": "string", "minLength": 1},
}
KEY_ID = {"name": "key_id", "in": "path", "required": True, "schema": {"type": "string"}}
LIMIT = {
    "name": "limit",
    "in": "query",
    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20},
}
CURSOR = {"name": "cursor", "in": "query", "schema": {"type": "string"}}


def _schemas(settings: Settings) -> dict[str, Any]:
    timestamp = {"type": "string", "format": "date-time", "example": "2026-01-01T00:00:00Z"}
    nullable_timestamp = {"type": ["string", "null"], "format": "date-time"}
    return {
        "Error": {
            "type": "object",
            "required": ["message", "code"],
            "properties": {"message": {"type": "string"}, "code": {"type": "string"}},
        },
        "ErrorEnvelope": {
            "type": "object",
            "required": ["data", "error", "meta"],
            "properties": {
                "data": {"type": "null"},
                "error": _ref("Error"),
                "meta": {"type": "null"},
            },
        },
        "Bucket": {
            "type": "object",
            "required": ["object", "id", "name", "region", "status", "createdAt"],
            "properties": {
                "object": {"const": "bucket"},
                "id": {"type": "string"},
                "name": {"type": "string"},
                "region": {"type": "string", "enum": settings.regions},
                "status": {"type": "string", "enum": list(BUCKET_STATUSES)},
                "statusReason": {"type": ["string", "null"]},
                "createdAt": timestamp,
                "maxUploadBytes": {"type": "integer", "minimum": 0},
                "allowedContentTypes": {"type": "array", "items": {"type": "string"}},
                "fileCount": {"type": "integer", "minimum": 0},
                "sizeBytes": {"type": "integer", "minimum": 0},
            },
        },
        "File": {
            "type": "object",
            "required": ["key", "size", "contentType", "uploadedAt"],
            "properties": {
                "object": {"const": "file"},
                "id": {"type": "string"},
                "key": {"type": "string"},
                "bucketId": {"type": "string"},
                "size": {"type": "integer", "minimum": 0},
                "contentType": {"type": "string"},
                "uploadedAt": timestamp,
                "etag": {"type": "string"},
            },
        },
        "Key": {
            "type": "object",
            "required": ["object", "id", "name", "scopes"],
            "properties": {
                "object": {"const": "key"},
                "id": {"type": "string"},
                "organizationId": {"type": "string"},
                "name": {"type": "string"},
                "scopes": {"type": "array", "items": {"type": "string", "enum": list(SCOPES)}},
                "bucketId": {"type": ["string", "null"]},
                "createdAt": timestamp,
                "expiresAt": nullable_timestamp,
                "revokedAt": nullable_timestamp,
                "last4": {"type": "string"},
                "secret": {"type": "string", "description": "Only in the 201 of a create."},
            },
        },
        "Organization": {
            "type": "object",
            "required": ["object", "id", "name", "plan", "limits", "usage"],
            "properties": {
                "object": {"const": "organization"},
                "id": {"type": "string"},
                "name": {"type": "string"},
                "plan": {"type": "string", "enum": ["free", "pro"]},
                "createdAt": timestamp,
                "limits": {
                    "type": "object",
                    "properties": {
                        "requestsPerMinute": {"type": "integer"},
                        "maxBuckets": {"type": "integer"},
                        "maxStorageBytes": {"type": "integer"},
                    },
                },
                "usage": {
                    "type": "object",
                    "properties": {
                        "buckets": {"type": "integer"},
                        "storedBytes": {"type": "integer"},
                        "files": {"type": "integer"},
                    },
                },
            },
        },
        "CreateBucket": {
            "type": "object",
            "required": ["name", "region"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"},
                "region": {"type": "string", "enum": settings.regions},
                "maxUploadBytes": {"type": ["integer", "null"], "minimum": 0},
                "allowedContentTypes": {
                    "type": ["array", "null"],
                    "items": {"type": "string", "pattern": MIME_PATTERN},
                    "minItems": 1,
                    "maxItems": 100,
                },
            },
        },
        "UpdateBucket": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"},
                "maxUploadBytes": {"type": ["integer", "null"], "minimum": 0},
                "allowedContentTypes": {
                    "type": ["array", "null"],
                    "items": {"type": "string", "pattern": MIME_PATTERN},
                    "minItems": 1,
                    "maxItems": 100,
                },
            },
        },
        "UpdateFile": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "key": {
                    "type": ["string", "null"],
                    "minLength": 1,
                    "maxLength": 256,
                    "pattern": KEY_PATTERN,
                },
                "contentType": {"type": ["string", "null"], "pattern": MIME_TYPE_PATTERN},
            },
        },
        "CreateKey": {
            "type": "object",
            "required": ["name", "scopes"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S"},
                "scopes": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(SCOPES)},
                    "minItems": 1,
                },
                "bucketId": {"type": ["string", "null"]},
                "expiresAt": nullable_timestamp,
            },
        },
    }


def _links(parameters: dict[str, str], *operations: str) -> dict[str, Any]:
    """OpenAPI links: where an answer's id can be used next (clients and fuzzers follow)."""
    return {
        operation[0].upper() + operation[1:]: {"operationId": operation, "parameters": parameters}
        for operation in operations
    }


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {JSON: {"schema": _ref(schema)}}}


def _paths() -> dict[str, Any]:
    bucket = _envelope(_ref("Bucket"))
    written = _envelope(WRITTEN)
    return {
        "/buckets": {
            "get": {
                "operationId": "listBuckets",
                "summary": "List buckets (scope buckets:read), ordered by id.",
                "parameters": [LIMIT, CURSOR],
                "responses": {
                    "200": _json(
                        _envelope({"type": "array", "items": _ref("Bucket")}, _list_meta()),
                        "A page of buckets.",
                    ),
                    **_errors(*COMMON_ERRORS),
                },
            },
            "post": {
                "operationId": "createBucket",
                "summary": "Create a bucket (scope buckets:write); it starts provisioning.",
                "requestBody": _body("CreateBucket"),
                "responses": {
                    "201": {
                        **_json(_envelope({"allOf": [WRITTEN, _ref("Bucket")]}), "The new bucket."),
                        "links": _links(
                            {"bucket_id": "$response.body#/data/id"},
                            "getBucket",
                            "updateBucket",
                            "deleteBucket",
                            "listFiles",
                            "uploadFile",
                        ),
                    },
                    **_errors(*COMMON_ERRORS, "402", "409", "413"),
                },
            },
        },
        "/buckets/{bucket_id}": {
            "parameters": [BUCKET_ID],
            "get": {
                "operationId": "getBucket",
                "summary": "Get a bucket (scope buckets:read).",
                "responses": {
                    "200": _json(bucket, "The bucket."),
                    **_errors(*COMMON_ERRORS, "404"),
                },
            },
            "patch": {
                "operationId": "updateBucket",
                "summary": "Rename a bucket or change its limits (scope buckets:write).",
                "requestBody": _body("UpdateBucket"),
                "responses": {
                    "200": _json(written, "Updated."),
                    **_errors(*COMMON_ERRORS, "404", "409", "413"),
                },
            },
            "delete": {
                "operationId": "deleteBucket",
                "summary": "Delete a bucket (scope buckets:write); force=true also deletes files.",
                "parameters": [{"name": "force", "in": "query", "schema": {"type": "boolean"}}],
                "responses": {
                    "200": _json(written, "Deleted."),
                    **_errors(*COMMON_ERRORS, "404", "409"),
                },
            },
        },
        "/buckets/{bucket_id}/files": {
            "parameters": [BUCKET_ID],
            "get": {
                "operationId": "listFiles",
                "summary": "List files (scope files:read), ordered by key.",
                "parameters": [
                    LIMIT,
                    CURSOR,
                    {"name": "prefix", "in": "query", "schema": {"type": "string"}},
                    {"name": "delimiter", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": _json(
                        {
                            **_envelope({"type": "array", "items": _ref("File")}, _list_meta(True)),
                            "properties": {
                                "data": {"type": "array", "items": _ref("File")},
                                "error": {"type": "null"},
                                "meta": _list_meta(True),
                                "hasMore": {"type": "boolean"},
                            },
                        },
                        "A page of files; common prefixes in meta.prefixes.",
                    ),
                    **_errors(*COMMON_ERRORS, "404"),
                },
            },
        },
        "/buckets/{bucket_id}/files/{key}": {
            "parameters": [BUCKET_ID, FILE_KEY],
            "put": {
                "operationId": "uploadFile",
                "summary": "Upload a file (scope files:write); the body is the raw content and "
                "Content-Type its MIME type (415 when missing or not allowed).",
                "requestBody": {
                    "required": True,
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                "responses": {
                    "201": {
                        **_json(_envelope({"allOf": [WRITTEN, _ref("File")]}), "Stored."),
                        "links": _links(
                            {
                                "bucket_id": "$request.path.bucket_id",
                                "key": "$response.body#/data/key",
                            },
                            "downloadFile",
                            "headFile",
                            "updateFile",
                            "deleteFile",
                        ),
                    },
                    **_errors(*COMMON_ERRORS, "402", "404", "408", "409", "413", "415"),
                },
            },
            "get": {
                "operationId": "downloadFile",
                "summary": "Download a file (scope files:read); Range gives 206. "
                "With metadata=true, the file object in the envelope instead "
                "(application/json; see the File schema).",
                "parameters": [
                    {"name": "metadata", "in": "query", "schema": {"type": "boolean"}},
                    {"name": "Range", "in": "header", "schema": {"type": "string"}},
                    {"name": "If-None-Match", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "The content as stored, with the Content-Type it was "
                        "uploaded with; with metadata=true the File object in the envelope.",
                        "headers": RATE_HEADERS,
                    },
                    "206": {"description": "Part of the content.", "headers": RATE_HEADERS},
                    "304": {"description": "Not modified (If-None-Match matched)."},
                    **_errors(*COMMON_ERRORS, "404", "416"),
                },
            },
            "head": {
                "operationId": "headFile",
                "summary": "The headers a GET would send (scope files:read).",
                "responses": {
                    "200": {"description": "Headers only.", "headers": RATE_HEADERS},
                    "206": {"description": "Headers of a part.", "headers": RATE_HEADERS},
                    "304": {"description": "Not modified."},
                    **{
                        status: {"description": ERRORS[status], "headers": RATE_HEADERS}
                        for status in ("400", "401", "403", "404", "416", "429", "500", "503")
                    },
                },
            },
            "patch": {
                "operationId": "updateFile",
                "summary": "Rename a file or change its type (scope files:write).",
                "requestBody": _body("UpdateFile"),
                "responses": {
                    "200": _json(written, "Updated; id is the (new) key."),
                    **_errors(*COMMON_ERRORS, "404", "409", "413", "415"),
                },
            },
            "delete": {
                "operationId": "deleteFile",
                "summary": "Delete a file (scope files:write).",
                "responses": {
                    "200": _json(written, "Deleted."),
                    **_errors(*COMMON_ERRORS, "404", "409"),
                },
            },
        },
        "/keys": {
            "get": {
                "operationId": "listKeys",
                "summary": "List API keys (scope keys:manage); secrets are never listed.",
                "parameters": [LIMIT, CURSOR],
                "responses": {
                    "200": _json(
                        _envelope({"type": "array", "items": _ref("Key")}, _list_meta()),
                        "A page of keys.",
                    ),
                    **_errors(*COMMON_ERRORS),
                },
            },
            "post": {
                "operationId": "createKey",
                "summary": "Create an API key (scope keys:manage); the secret is shown once.",
                "requestBody": _body("CreateKey"),
                "responses": {
                    "201": {
                        **_json(_envelope({"allOf": [WRITTEN, _ref("Key")]}), "The new key."),
                        "links": _links(
                            {"key_id": "$response.body#/data/id"}, "getKey", "revokeKey"
                        ),
                    },
                    **_errors(*COMMON_ERRORS, "404", "413"),
                },
            },
        },
        "/keys/{key_id}": {
            "parameters": [KEY_ID],
            "get": {
                "operationId": "getKey",
                "summary": "Get an API key (scope keys:manage).",
                "responses": {
                    "200": _json(_envelope(_ref("Key")), "The key."),
                    **_errors(*COMMON_ERRORS, "404"),
                },
            },
            "delete": {
                "operationId": "revokeKey",
                "summary": "Revoke an API key (scope keys:manage).",
                "responses": {
                    "200": _json(written, "Revoked."),
                    **_errors(*COMMON_ERRORS, "404"),
                },
            },
        },
        "/organization": {
            "get": {
                "operationId": "getOrganization",
                "summary": "The key's organization: plan, limits and usage (any valid key).",
                "responses": {
                    "200": _json(_envelope(_ref("Organization")), "The organization."),
                    **_errors("401", "429", "500"),
                },
            },
        },
    }


def openapi_document(settings: Settings) -> dict[str, Any]:
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
        "paths": _paths(),
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
