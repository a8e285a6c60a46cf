"""API key endpoints: /v1/keys and /v1/keys/{key_id} for the key's own organization, and
the operator's /v1/orgs/{org_id}/keys for the organization the path names: the handlers
act for `principal.actor`, which the route's decision set (`access.operator`). The rules
of escalation are the same on both: a key grants at most what it holds."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api.pagination import id_cursor, parse_limit
from gateway.api.resources import iso, key_shape
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.envelope import created, ok, page, written
from gateway.http.errors import ApiError, bad_request
from gateway.http.inputs import read_json
from storage.models import BYPASS_GOVERNANCE, SCOPES


def _expiry(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise bad_request("expiresAt must be an ISO 8601 UTC timestamp", "invalid_expiry") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


async def create_key(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.CreateKey)
    scopes, bucket_id = body.scopes, body.bucket_id
    if not scopes or not all(s in SCOPES for s in scopes):
        raise bad_request(
            f"scopes must be a non-empty list of: {', '.join(SCOPES)}", "invalid_scopes"
        )
    beyond = sorted(set(scopes) - set(principal.key.scopes))
    if BYPASS_GOVERNANCE in scopes:
        raise ApiError(
            403,
            "scope_escalation",
            f"no API key can grant {BYPASS_GOVERNANCE}: the operator makes such a key with "
            f"`bucketd keys create --scopes ...,{BYPASS_GOVERNANCE}`",
        )
    if beyond:
        raise ApiError(403, "scope_escalation", f"a key cannot grant {beyond[0]}, which it lacks")
    own_bucket = principal.key.bucket_id
    if own_bucket is not None and bucket_id != own_bucket:
        raise ApiError(
            403,
            "restriction_escalation",
            "a bucket-scoped key can only create keys restricted to its own bucket",
        )
    expires_at = _expiry(body.expires_at)
    own_expiry = principal.key.expires_at
    if own_expiry is not None and (expires_at is None or expires_at > own_expiry):
        raise ApiError(
            403,
            "expiry_escalation",
            "a key that expires can only create keys that expire no later than itself "
            f"(expiresAt at most {iso(own_expiry)})",
        )
    key, secret = await ctx.engine.keys.create(
        principal.actor.org_id, body.name, scopes, bucket_id, expires_at, s3=body.s3
    )
    return created(key_shape(key, secret))


async def list_keys(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    limit = parse_limit(request.query_params)
    after = id_cursor(request.query_params, "keys", ctx.settings.id_prefix)
    result = await ctx.engine.keys.list(principal.actor, after, limit)
    return page([key_shape(key) for key in result.items], result.last)


async def get_key(request: Request, principal: Principal) -> Response:
    key = await context(request).engine.keys.get(principal.actor, request.path_params["key_id"])
    return ok(key_shape(key))


async def revoke_key(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    key = await ctx.engine.keys.revoke(principal.actor, request.path_params["key_id"])
    return written("key", key.id)
