"""File versions on /v1: the `versionId` parameter, listing versions, restoring one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from storage.ids import NULL_VERSION, is_version_id
from storage.models import BYPASS_GOVERNANCE
from storage.object_lock import WIRE_MODES, BucketLock, Retention, check_default, parse_date

from .auth import Principal, require
from .context import context
from .envelope import created, ok, page
from .errors import bad_request
from .inputs import read_json, text_param
from .pagination import decode_cursor, encode_cursor, parse_limit
from .resources import file_shape, version_shape


def version_param(request: Request) -> tuple[bool, str | None]:
    """(whether `versionId` names a version, which: None for the null version)."""
    raw = request.query_params.get("versionId")
    if raw is None:
        return False, None
    if not is_version_id(raw):
        raise bad_request("versionId is not a version id", "invalid_version_id")
    return True, None if raw == NULL_VERSION else raw


async def list_versions(request: Request, principal: Principal) -> Response:
    bucket_id = request.path_params["bucket_id"]
    limit = parse_limit(request.query_params)
    exact = "key" in request.query_params
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
    return page([version_shape(record, latest) for record, latest in result.versions], next_cursor)


def _path_version(request: Request) -> str | None:
    version_id: str = request.path_params["version_id"]
    if not is_version_id(version_id):
        raise bad_request("the path does not name a version id", "invalid_version_id")
    return None if version_id == NULL_VERSION else version_id


async def restore_version(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.RestoreVersion)
    record = await ctx.engine.files.restore(
        principal.actor, request.path_params["bucket_id"], body.key, _path_version(request)
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


def bypasses_governance(request: Request, asked: bool) -> bool:
    """Whether the request bypasses GOVERNANCE retention: it asks, and its key may."""
    if asked:
        require(request, BYPASS_GOVERNANCE)
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
    record, latest = await ctx.engine.files.protect(
        principal.actor,
        request.path_params["bucket_id"],
        body.key,
        version_id,
        retention=retention,
        legal_hold=body.legal_hold,
        bypass_governance=bypasses_governance(request, body.bypass_governance),
    )
    return ok(version_shape(record, latest))
