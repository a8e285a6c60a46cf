"""Bucket endpoints: /v1/buckets and /v1/buckets/{bucket_id}."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api.access import also, also_every_object
from gateway.api.pagination import id_cursor, parse_limit
from gateway.api.resources import bucket_shape
from gateway.api.touches import ACTIONS, FORCE, read
from gateway.api.versions import bucket_lock
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.envelope import created, ok, page, written
from gateway.http.errors import ApiError, bad_request
from gateway.http.inputs import given, parse_flag, read_json
from storage.models import VERSIONING
from storage.rules.sharing import Sharing


def _versioning(wire: object) -> str:
    """The engine's versioning state for /v1's `enabled` or `suspended`."""
    if not isinstance(wire, str) or wire not in VERSIONING:
        raise bad_request("versioning is enabled or suspended")
    return VERSIONING[wire]


async def list_buckets(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    limit = parse_limit(request.query_params)
    after = id_cursor(request.query_params, "buckets", ctx.settings.id_prefix)
    result = await ctx.engine.buckets.list(principal.actor, after, limit)
    return page([bucket_shape(b) for b in result.items], result.last)


async def create_bucket(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    if principal.key.bucket_id is not None:
        raise ApiError(403, "forbidden", "a bucket-scoped key cannot create buckets")
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.CreateBucket)
    bucket = await ctx.engine.buckets.create(
        principal.actor,
        body.name,
        body.region,
        body.max_upload_bytes,
        body.allowed_content_types,
        None if body.versioning is None else _versioning(body.versioning),
        None if body.object_lock is None else bucket_lock(body.object_lock),
        body.lifecycle,
        Sharing(
            body.cors,
            body.public,
            body.cache_control,
            anonymous_rpm=body.anonymous_requests_per_minute,
        ),
        encryption=body.encryption,
    )
    return created(bucket_shape(bucket))


async def get_bucket(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    return ok(
        bucket_shape(await engine.buckets.get(principal.actor, request.path_params["bucket_id"]))
    )


SETTING_ACTIONS = {
    "versioning": "s3:PutBucketVersioning",
    "object_lock": "s3:PutBucketObjectLockConfiguration",
    "lifecycle": "s3:PutLifecycleConfiguration",
    "cors": "s3:PutBucketCORS",
    "public": "s3:PutBucketAcl",
    "policy": "s3:PutBucketPolicy",
    "encryption": "s3:PutEncryptionConfiguration",
}
"""The S3 action each setting of a bucket is, so that a policy's Deny of it binds /v1 too
(the policy itself is never taken from its organization)."""


async def update_bucket(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.UpdateBucket)
    changes = given(body)
    for field, action in SETTING_ACTIONS.items():
        if field in changes:
            await also(request, action, None)
    if "anonymous_requests_per_minute" in changes:
        changes["anonymous_rpm"] = changes.pop("anonymous_requests_per_minute")
    if "versioning" in changes:
        changes["versioning"] = _versioning(changes["versioning"])
    if changes.get("policy") is not None:
        changes["policy"] = json.dumps(changes["policy"])
    if isinstance(body.object_lock, shapes.ObjectLockRule):
        changes["object_lock"] = bucket_lock(body.object_lock)
    bucket = await ctx.engine.buckets.update(
        principal.actor, request.path_params["bucket_id"], changes
    )
    return written("bucket", bucket.id)


async def delete_bucket(request: Request, principal: Principal) -> Response:
    bucket_id = request.path_params["bucket_id"]
    force = parse_flag(read(request, "force"), FORCE)
    if force:  # deletes every file and version: decided for every key at once
        also_every_object(request, ACTIONS["force"])
    await context(request).engine.buckets.delete(principal.actor, bucket_id, force)
    return written("bucket", bucket_id)
