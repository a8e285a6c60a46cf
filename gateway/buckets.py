"""Bucket endpoints: /v1/buckets and /v1/buckets/{bucket_id}."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .auth import require
from .context import context
from .envelope import ok, page, written
from .errors import ApiError
from .inputs import flag, read_json
from .pagination import id_cursor, parse_limit
from .resources import bucket_json

CREATE_FIELDS = ("name", "region", "maxUploadBytes", "allowedContentTypes")
PATCH_FIELDS = {
    "name": "name",
    "maxUploadBytes": "max_upload_bytes",
    "allowedContentTypes": "allowed_content_types",
}


async def list_buckets(request: Request) -> Response:
    principal = require(request, "buckets:read")
    ctx = context(request)
    limit = parse_limit(request.query_params)
    after = id_cursor(request.query_params, "buckets", ctx.settings.id_prefix)
    result = await ctx.engine.list_buckets(principal.actor, after, limit)
    return page([bucket_json(b) for b in result.items], result.last)


async def create_bucket(request: Request) -> Response:
    principal = require(request, "buckets:write")
    ctx = context(request)
    if principal.key.bucket_id is not None:
        raise ApiError(403, "forbidden", "a bucket-scoped key cannot create buckets")
    body = await read_json(request, ctx.settings.max_json_bytes, CREATE_FIELDS)
    bucket = await ctx.engine.create_bucket(
        principal.actor,
        body.get("name"),
        body.get("region"),
        body.get("maxUploadBytes"),
        body.get("allowedContentTypes"),
    )
    return written("bucket", bucket.id, bucket_json(bucket), status=201)


async def get_bucket(request: Request) -> Response:
    principal = require(request, "buckets:read")
    bucket = await context(request).engine.get_bucket(
        principal.actor, request.path_params["bucket_id"]
    )
    return ok(bucket_json(bucket))


async def update_bucket(request: Request) -> Response:
    principal = require(request, "buckets:write")
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, PATCH_FIELDS)
    changes = {PATCH_FIELDS[field]: value for field, value in body.items()}
    bucket = await ctx.engine.update_bucket(
        principal.actor, request.path_params["bucket_id"], changes
    )
    return written("bucket", bucket.id)


async def delete_bucket(request: Request) -> Response:
    principal = require(request, "buckets:write")
    bucket_id = request.path_params["bucket_id"]
    await context(request).engine.delete_bucket(principal.actor, bucket_id, flag(request, "force"))
    return written("bucket", bucket_id)
