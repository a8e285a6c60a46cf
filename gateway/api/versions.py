"""File versions on /v1: the `versionId` parameter, listing versions, restoring one."""

from __future__ import annotations

from msgspec import UnsetType
from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api.access import also, visible
from gateway.api.pagination import decode_cursor, encode_cursor, parse_limit
from gateway.api.resources import file_shape, version_shape
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.envelope import created, ok, page
from gateway.http.errors import bad_request
from gateway.http.inputs import read_json, text_param
from storage.rules.ids import NULL_VERSION, is_version_id
from storage.rules.object_lock import WIRE_MODES, BucketLock, Retention, check_default, parse_date


async def list_versions(request: Request, principal: Principal) -> Response:
    bucket_id = request.path_params["bucket_id"]
    limit = parse_limit(request.query_params)
    exact = "key" in request.query_params
    if exact and "prefix" in request.query_params:
        raise bad_request("list the versions of one file (key) or under a prefix, not both")
    prefix = text_param(request, "key" if exact else "prefix")
    key_marker = version_marker = ""
    cursor = request.query_params.get("cursor")
    if cursor:
        fields = decode_cursor(cursor, "versions")
        if (
            fields.get("bucket") != bucket_id
            or fields.get("prefix") != prefix
            or fields.get("exact") != exact
            or not isinstance(fields.get("version"), str)
        ):
            raise bad_request("the cursor is not a cursor of this list", "invalid_cursor")
        key_marker, version_marker = fields["after"], fields["version"]
    result = await context(request).engine.files.list_versions(
        principal.actor, bucket_id, prefix, "", key_marker, version_marker, limit, exact
    )
    next_cursor = None
    if result.truncated and result.next_key is not None:
        next_cursor = encode_cursor(
            {
                "list": "versions",
                "bucket": bucket_id,
                "prefix": prefix,
                "exact": exact,
                "after": result.next_key,
                "version": result.next_version or "",
            }
        )
    listed = [
        version_shape(visible(request, record, True), latest) for record, latest in result.versions
    ]
    return page(listed, next_cursor)


def _path_version(request: Request) -> str | None:
    version_id: str = request.path_params["version_id"]
    if not is_version_id(version_id):
        raise bad_request("the path does not name a version id", "invalid_version_id")
    return None if version_id == NULL_VERSION else version_id


async def restore_version(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.RestoreVersion)
    version_id = _path_version(request)
    await also(request, "s3:GetObjectVersion", body.key, True, version_id)
    actor = await also(request, "s3:PutObject", body.key)
    record = await ctx.engine.files.restore(
        actor, request.path_params["bucket_id"], body.key, version_id
    )
    return created(file_shape(record))


def _mode(wire: str) -> str:
    if wire not in WIRE_MODES:
        raise bad_request("the retention mode is governance or compliance")
    return WIRE_MODES[wire]


def bucket_lock(rule: shapes.ObjectLockRule) -> BucketLock:
    """The engine's object lock configuration for /v1's `objectLock`."""
    default = rule.default_retention
    if default is None:
        return BucketLock()
    return BucketLock(default=check_default(_mode(default.mode), default.days, default.years))


async def bypasses_governance(
    request: Request, asked: bool, key: str, version_id: str | None
) -> bool:
    """Whether the request bypasses GOVERNANCE retention of the version: it asks, and may
    (s3:BypassGovernanceRetention: a key holding files:bypass-governance)."""
    if asked:
        await also(request, "s3:BypassGovernanceRetention", key, True, version_id)
    return asked


async def protect_version(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.ProtectVersion)
    version_id = _path_version(request)
    asked = body.retention
    retention = (
        Retention(mode=_mode(asked.mode), until=parse_date(asked.retain_until))
        if isinstance(asked, shapes.RetentionRule)
        else asked
    )
    if not isinstance(asked, UnsetType):
        await also(request, "s3:PutObjectRetention", body.key, True, version_id)
    if not isinstance(body.legal_hold, UnsetType):
        await also(request, "s3:PutObjectLegalHold", body.key, True, version_id)
    record, latest = await ctx.engine.files.protect(
        principal.actor,
        request.path_params["bucket_id"],
        body.key,
        version_id,
        retention=retention,
        legal_hold=body.legal_hold,
        bypass_governance=await bypasses_governance(
            request, body.bypass_governance, body.key, version_id
        ),
    )
    return ok(version_shape(record, latest))
