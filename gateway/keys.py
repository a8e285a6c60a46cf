"""API key endpoints: /v1/keys and /v1/keys/{key_id}."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from storage.models import SCOPES

from .auth import require
from .context import context
from .envelope import ok, page, written
from .errors import ApiError, bad_request
from .inputs import read_json
from .pagination import id_cursor, parse_limit
from .resources import key_json

CREATE_FIELDS = ("name", "scopes", "bucketId", "expiresAt")


def _expiry(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request("expiresAt must be an ISO 8601 UTC timestamp", "invalid_expiry")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise bad_request("expiresAt must be an ISO 8601 UTC timestamp", "invalid_expiry") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


async def create_key(request: Request) -> Response:
    principal = require(request, "keys:manage")
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, CREATE_FIELDS)
    scopes, bucket_id = body.get("scopes"), body.get("bucketId")
    if not isinstance(scopes, list) or not scopes or not all(s in SCOPES for s in scopes):
        raise bad_request(
            f"scopes must be a non-empty list of: {', '.join(SCOPES)}", "invalid_scopes"
        )
    if bucket_id is not None and not isinstance(bucket_id, str):
        raise bad_request("bucketId must be a bucket id", "invalid_request")
    beyond = sorted(set(scopes) - set(principal.key.scopes))
    if beyond:
        raise ApiError(403, "scope_escalation", f"a key cannot grant {beyond[0]}, which it lacks")
    own_bucket = principal.key.bucket_id
    if own_bucket is not None and bucket_id != own_bucket:
        raise ApiError(
            403,
            "restriction_escalation",
            "a bucket-scoped key can only create keys restricted to its own bucket",
        )
    key, secret = await ctx.engine.create_key(
        principal.key.org_id,
        body.get("name"),
        scopes,
        bucket_id,
        _expiry(body.get("expiresAt")),
    )
    return written("key", key.id, {**key_json(key), "secret": secret}, status=201)


async def list_keys(request: Request) -> Response:
    principal = require(request, "keys:manage")
    ctx = context(request)
    limit = parse_limit(request.query_params)
    after = id_cursor(request.query_params, "keys", ctx.settings.id_prefix)
    result = await ctx.engine.list_keys(principal.actor, after, limit)
    return page([key_json(key) for key in result.items], result.last)


async def get_key(request: Request) -> Response:
    principal = require(request, "keys:manage")
    key = await context(request).engine.get_key(principal.actor, request.path_params["key_id"])
    return ok(key_json(key))


async def revoke_key(request: Request) -> Response:
    principal = require(request, "keys:manage")
    ctx = context(request)
    key = await ctx.engine.revoke_key(principal.actor, request.path_params["key_id"])
    ctx.authenticator.forget(key.id)
    return written("key", key.id)
