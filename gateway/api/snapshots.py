"""Snapshot endpoints: a bucket's (/v1/buckets/{bucket_id}/snapshots, /v1/snapshots/...)
and the operator's of the whole server (/v1/server/snapshots/...).

A bucket's snapshot belongs to the bucket's organization: the engine finds it only for an
actor of that organization (and, for a key restricted to one bucket, of that bucket), so
another organization's snapshot id is the same 404 as a missing one. The server's are
decided by `access.operator` before these handlers run.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import snapshot_shapes
from gateway.api.access import every_object_and_setting
from gateway.api.buckets import SETTING_ACTIONS
from gateway.api.pagination import decode_cursor, encode_cursor, parse_limit
from gateway.api.resources import bucket_shape
from gateway.context import context
from gateway.http.auth import Principal, require
from gateway.http.envelope import created, ok, page
from gateway.http.errors import ApiError, bad_request
from gateway.http.inputs import read_json, read_optional_json
from storage.errors import BucketNotFound
from storage.models import Page, Snapshot

LIST = "snapshots"


def snapshot_shape(snapshot: Snapshot) -> snapshot_shapes.Snapshot:
    return snapshot_shapes.Snapshot(
        id=snapshot.id,
        bucket_id=snapshot.bucket_id,
        bucket_name=snapshot.bucket_name,
        name=snapshot.name,
        created_at=snapshot.created_at,
        file_count=snapshot.file_count,
        size_bytes=snapshot.size_bytes,
        buckets=snapshot.buckets,
    )


def _after(request: Request) -> str | None:
    """The id a snapshot list resumes after (the cursor of the previous page)."""
    cursor = request.query_params.get("cursor")
    if not cursor:
        return None
    after: str = decode_cursor(cursor, LIST)["after"]
    return after


def _page(result: Page[Snapshot]) -> Response:
    cursor = None
    if result.has_more and result.last is not None:
        cursor = encode_cursor({"list": LIST, "after": result.last})
    return page([snapshot_shape(found) for found in result.items], cursor)


async def create_snapshot(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_optional_json(
        request, ctx.settings.max_json_bytes, snapshot_shapes.CreateSnapshot
    )
    snapshot = await ctx.engine.snapshots.create(
        principal.actor, request.path_params["bucket_id"], body.name
    )
    return created(snapshot_shape(snapshot))


async def list_bucket_snapshots(request: Request, principal: Principal) -> Response:
    limit = parse_limit(request.query_params)
    engine = context(request).engine
    bucket_id = request.path_params["bucket_id"]
    return _page(await engine.snapshots.list(principal.actor, bucket_id, _after(request), limit))


async def list_snapshots(request: Request, principal: Principal) -> Response:
    """The organization's bucket snapshots (the engine narrows a bucket-scoped key's to its
    bucket's, those taken before the bucket was deleted too)."""
    limit = parse_limit(request.query_params)
    engine = context(request).engine
    return _page(await engine.snapshots.list(principal.actor, None, _after(request), limit))


async def get_snapshot(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    return ok(
        snapshot_shape(
            await engine.snapshots.get(principal.actor, request.path_params["snapshot_id"])
        )
    )


async def delete_snapshot(request: Request, principal: Principal) -> Response:
    snapshot_id = request.path_params["snapshot_id"]
    await context(request).engine.snapshots.delete(principal.actor, snapshot_id)
    return Response(status_code=204)


RESTORE_OBJECT_ACTIONS = (
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:PutObject",
    "s3:PutObjectAcl",
    "s3:PutObjectTagging",
    "s3:AbortMultipartUpload",
)
"""What a restore does to every object of its bucket: drops the versions written since,
puts the snapshot's back with their ACLs and tags, aborts the uploads in flight."""
RESTORE_BUCKET_ACTIONS = (
    *SETTING_ACTIONS.values(),
    "s3:PutBucketTagging",
    "s3:PutBucketPublicAccessBlock",
)
"""The settings a restore rewrites that a policy can deny."""


async def restore_snapshot(request: Request, principal: Principal) -> Response:
    """The bucket as the snapshot holds it; it rewrites the bucket's files, so the key
    needs files:write besides the route's buckets:write, and the bucket's policy may
    refuse it (a Deny of any object or setting action it takes)."""
    require(request, "files:write")
    engine = context(request).engine
    snapshot_id = request.path_params["snapshot_id"]
    snapshot = await engine.snapshots.get(principal.actor, snapshot_id)
    assert snapshot.bucket_id is not None
    try:
        bucket = await engine.buckets.get_any(snapshot.bucket_id)
    except BucketNotFound:
        pass  # deleted since: the restore refuses it (fork instead)
    else:
        await every_object_and_setting(
            request,
            principal,
            bucket,
            RESTORE_OBJECT_ACTIONS,
            RESTORE_BUCKET_ACTIONS,
        )
    return ok(bucket_shape(await engine.snapshots.restore(principal.actor, snapshot_id)))


async def fork_snapshot(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    if principal.key.bucket_id is not None:
        raise ApiError(403, "forbidden", "a bucket-scoped key cannot fork: a fork makes a bucket")
    body = await read_json(request, ctx.settings.max_json_bytes, snapshot_shapes.ForkSnapshot)
    bucket = await ctx.engine.snapshots.fork(
        principal.actor, request.path_params["snapshot_id"], body.name, body.region
    )
    return created(bucket_shape(bucket))


async def create_server_snapshot(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_optional_json(
        request, ctx.settings.max_json_bytes, snapshot_shapes.CreateSnapshot
    )
    return created(snapshot_shape(await ctx.engine.snapshots.create_server(body.name)))


async def list_server_snapshots(request: Request, principal: Principal) -> Response:
    limit = parse_limit(request.query_params)
    engine = context(request).engine
    return _page(await engine.snapshots.list_server(_after(request), limit))


async def get_server_snapshot(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    return ok(snapshot_shape(await engine.snapshots.get_server(request.path_params["snapshot_id"])))


async def delete_server_snapshot(request: Request, principal: Principal) -> Response:
    await context(request).engine.snapshots.delete_server(request.path_params["snapshot_id"])
    return Response(status_code=204)


async def restore_server_snapshot(request: Request, principal: Principal) -> Response:
    """Every bucket of the server as the snapshot holds it; the snapshot in the answer.
    `dropLocked` (the test fixture's reset between tests) exists only in test mode: on
    a server that keeps real data, what retention protects is never dropped."""
    ctx = context(request)
    body = await read_optional_json(
        request, ctx.settings.max_json_bytes, snapshot_shapes.RestoreServerSnapshot
    )
    if body.drop_locked and not ctx.settings.test_mode:
        raise bad_request(
            "dropLocked is only for a server in test mode (docs/testing.md): versions under "
            "retention or legal hold are never dropped otherwise",
            "test_mode_off",
        )
    snapshot_id = request.path_params["snapshot_id"]
    snapshot = await ctx.engine.snapshots.get_server(snapshot_id)
    await ctx.engine.snapshots.restore_server(snapshot_id, drop_locked=body.drop_locked)
    return ok(snapshot_shape(snapshot))
