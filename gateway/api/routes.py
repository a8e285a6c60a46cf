"""Every /v1 operation, declared once: path, method, scope, shapes, errors and handler.

The router is built from this table (`app.py`), and so is `/v1/openapi.json`
(`openapi.py`); the scope is checked here, before the handler runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bucketd_client import shapes
from gateway.api import buckets, files, keys, organization, sharing, touches, versions
from gateway.api.access import authorize, operator
from gateway.api.event_routes import EVENT_OPERATIONS
from gateway.api.operation import CURSOR, LIMIT, Operation, Param
from gateway.api.org_routes import ORG_OPERATIONS
from gateway.api.snapshot_routes import SNAPSHOT_OPERATIONS
from gateway.http.auth import require
from gateway.http.inputs import check_query
from storage.models import ORGS_MANAGE

BUCKET_ID = {"bucket_id": "$response.body#/data/id"}
FILE_AT = {"bucket_id": "$request.path.bucket_id", "key": "$response.body#/data/key"}
BUCKETS = "/buckets"
BUCKET = "/buckets/{bucket_id}"
FILES = "/buckets/{bucket_id}/files"
FILE = "/buckets/{bucket_id}/files/{key}"
TOKEN = Param(name="token")
"""A signed URL's token: the request needs no API key (see signFile)."""
VERSION_ID = Param(name=touches.VERSION_ID)
"""A version of the file (versioned buckets): `null` names the null version."""
DOWNLOAD = {
    "200": "The content as stored, with the Content-Type it was uploaded with; with "
    "metadata=true the File object in the envelope.",
    "206": "Part of the content (Range).",
    "304": "Not modified (If-None-Match or If-Modified-Since matched).",
}

OPERATIONS = (
    Operation(
        method="GET",
        path=BUCKETS,
        operation_id="listBuckets",
        summary="List buckets, ordered by id.",
        handler=buckets.list_buckets,
        scope="buckets:read",
        answer="list",
        shape=shapes.Bucket,
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="POST",
        path=BUCKETS,
        operation_id="createBucket",
        summary="Create a bucket; it starts provisioning.",
        handler=buckets.create_bucket,
        scope="buckets:write",
        answer="created",
        shape=shapes.Bucket,
        body=shapes.CreateBucket,
        errors=(400, 402, 409, 413),
        links=BUCKET_ID,
        link_to=("getBucket", "updateBucket", "deleteBucket", "listFiles", "uploadFile"),
    ),
    Operation(
        method="GET",
        path=BUCKET,
        operation_id="getBucket",
        summary="Get a bucket.",
        handler=buckets.get_bucket,
        scope="buckets:read",
        answer="one",
        shape=shapes.Bucket,
        errors=(404,),
    ),
    Operation(
        method="PATCH",
        path=BUCKET,
        operation_id="updateBucket",
        summary="Rename a bucket or change its limits.",
        handler=buckets.update_bucket,
        scope="buckets:write",
        answer="written",
        body=shapes.UpdateBucket,
        errors=(400, 404, 409, 413),
    ),
    Operation(
        method="DELETE",
        path=BUCKET,
        operation_id="deleteBucket",
        action="s3:DeleteBucket",
        touches=frozenset({"force"}),
        summary="Delete a bucket; force=true also deletes its files.",
        handler=buckets.delete_bucket,
        scope="buckets:write",
        answer="written",
        errors=(400, 404, 409),
        params=(Param(name=touches.FORCE, schema={"type": "boolean"}),),
    ),
    Operation(
        method="GET",
        path=FILES,
        operation_id="listFiles",
        action="s3:ListBucket",
        summary="List files, ordered by key; with a delimiter, common prefixes in meta.prefixes.",
        handler=files.list_files,
        scope="files:read",
        answer="list",
        shape=shapes.File,
        errors=(400, 404),
        params=(LIMIT, CURSOR, Param(name="prefix"), Param(name="delimiter")),
        prefixes=True,
    ),
    Operation(
        method="PUT",
        path=FILE,
        operation_id="uploadFile",
        action="s3:PutObject",
        touches=frozenset({"tagging"}),
        summary="Upload a file: the body is the raw content and Content-Type its MIME type "
        "(415 when missing or not allowed), or multipart/form-data holding it in the field "
        "file.",
        handler=files.put_file,
        scope="files:write",
        answer="created",
        shape=shapes.File,
        body="content",
        errors=(400, 402, 404, 408, 409, 412, 413, 415),
        params=(
            Param(
                name="If-None-Match", location="header", schema={"type": "string", "enum": ["*"]}
            ),
            Param(name="If-Match", location="header"),
            Param(name="Tagging", location="header"),
            TOKEN,
        ),
        links=FILE_AT,
        link_to=("downloadFile", "headFile", "updateFile", "deleteFile"),
        guests=True,
    ),
    Operation(
        method="GET",
        path=FILE,
        operation_id="downloadFile",
        action="s3:GetObject",
        touches=frozenset({"version"}),
        summary="Download a file; Range gives 206. With metadata=true, the File object in "
        "the envelope instead.",
        handler=files.get_file,
        scope="files:read",
        answer="content",
        shape=shapes.File,
        errors=(400, 404, 416),
        params=(
            Param(name="metadata", schema={"type": "boolean"}),
            VERSION_ID,
            Param(name="Range", location="header"),
            Param(name="If-None-Match", location="header"),
            TOKEN,
        ),
        contents=DOWNLOAD,
        guests=True,
    ),
    Operation(
        method="HEAD",
        path=FILE,
        operation_id="headFile",
        action="s3:GetObject",
        touches=frozenset({"version"}),
        summary="The headers a GET would send.",
        handler=files.get_file,
        scope="files:read",
        answer="content",
        errors=(400, 404, 416),
        params=(VERSION_ID, TOKEN),
        contents={status: text.split(";")[0] for status, text in DOWNLOAD.items()},
        guests=True,
    ),
    Operation(
        method="POST",
        path="/buckets/{bucket_id}/sign/{key}",
        operation_id="signFile",
        summary="A URL of the file that works without a key until it expires: a download, "
        "or with upload=true one upload of the key (files:write).",
        handler=sharing.sign_file,
        scope="files:read",
        answer="one",
        shape=shapes.SignedUrl,
        body=shapes.SignFile,
        errors=(400, 404, 413, 415),
    ),
    Operation(
        method="PATCH",
        path=FILE,
        operation_id="updateFile",
        action="s3:PutObject",
        touches=frozenset({"rename", "tagging"}),
        summary="Rename a file or change its type; the answer's id is the (new) key.",
        handler=files.update_file,
        scope="files:write",
        answer="written",
        body=shapes.UpdateFile,
        errors=(400, 404, 409, 413, 415),
    ),
    Operation(
        method="DELETE",
        path=FILE,
        operation_id="deleteFile",
        action="s3:DeleteObject",
        touches=frozenset({"version", "bypass"}),
        summary="Delete a file (in a versioned bucket, a delete marker becomes current and "
        "every version stays); with versionId, delete that version for good.",
        handler=files.delete_file,
        scope="files:write",
        answer="written",
        errors=(400, 404, 409, 412),
        params=(
            VERSION_ID,
            Param(name=touches.BYPASS, schema={"type": "boolean"}),
            Param(name="If-Match", location="header"),
        ),
    ),
    Operation(
        method="GET",
        path="/buckets/{bucket_id}/versions",
        operation_id="listVersions",
        action="s3:ListBucketVersions",
        prefix_params=("key", "prefix"),
        summary="List file versions and delete markers by key, newest first within a key: "
        "under a prefix, or of one file (key).",
        handler=versions.list_versions,
        scope="files:read",
        answer="list",
        shape=shapes.FileVersion,
        errors=(400, 404),
        params=(LIMIT, CURSOR, Param(name="prefix"), Param(name="key")),
    ),
    Operation(
        method="POST",
        path="/buckets/{bucket_id}/versions/{version_id}/restore",
        operation_id="restoreVersion",
        touches=frozenset({"restore"}),
        summary="Make an old version of a file the current one (a new version sharing its "
        "content; nothing is copied).",
        handler=versions.restore_version,
        scope="files:write",
        answer="created",
        shape=shapes.File,
        body=shapes.RestoreVersion,
        errors=(400, 402, 404, 409, 413, 415),
    ),
    Operation(
        method="PATCH",
        path="/buckets/{bucket_id}/versions/{version_id}",
        operation_id="protectVersion",
        touches=frozenset({"lock", "bypass"}),
        summary="Set a version's retention and/or legal hold (buckets with object lock).",
        handler=versions.protect_version,
        scope="files:write",
        answer="one",
        shape=shapes.FileVersion,
        body=shapes.ProtectVersion,
        errors=(400, 404, 409, 413, 415),
    ),
    Operation(
        method="GET",
        path="/keys",
        operation_id="listKeys",
        summary="List API keys; secrets are never listed.",
        handler=keys.list_keys,
        scope="keys:manage",
        answer="list",
        shape=shapes.Key,
        errors=(400,),
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="POST",
        path="/keys",
        operation_id="createKey",
        summary="Create an API key; the secret is shown once.",
        handler=keys.create_key,
        scope="keys:manage",
        answer="created",
        shape=shapes.Key,
        body=shapes.CreateKey,
        errors=(400, 404, 413),
        links={"key_id": "$response.body#/data/id"},
        link_to=("getKey", "revokeKey"),
    ),
    Operation(
        method="GET",
        path="/keys/{key_id}",
        operation_id="getKey",
        summary="Get an API key.",
        handler=keys.get_key,
        scope="keys:manage",
        answer="one",
        shape=shapes.Key,
        errors=(404,),
    ),
    Operation(
        method="DELETE",
        path="/keys/{key_id}",
        operation_id="revokeKey",
        summary="Revoke an API key.",
        handler=keys.revoke_key,
        scope="keys:manage",
        answer="written",
        errors=(404,),
    ),
    Operation(
        method="GET",
        path="/organization",
        operation_id="getOrganization",
        summary="The key's organization: plan, limits and usage.",
        handler=organization.get_organization,
        scope=None,
        answer="one",
        shape=shapes.Organization,
    ),
    *EVENT_OPERATIONS,
    *SNAPSHOT_OPERATIONS,
    *ORG_OPERATIONS,
)


def _endpoint(operations: dict[str, Operation]) -> Callable[[Request], Awaitable[Response]]:
    """One endpoint per path dispatching on the method (so a 405 lists every method); the
    scope is checked, and the access decision made for the route's bucket or file (or, on
    the operator's routes, for the key and the organization the path names), before the
    handler runs."""

    async def dispatch(request: Request) -> Response:
        operation = operations.get(request.method) or operations["GET"]  # HEAD where only GET is
        state = request.scope.setdefault("state", {})
        state["route"] = operation
        anonymous = False
        if operation.guests and "principal" not in state:
            guest = await sharing.guest(request)
            if guest is None:
                anonymous = True  # what the bucket grants anyone, or the usual 401
            else:
                state["principal"] = guest
        principal = None if anonymous else require(request, operation.scope)
        check_query(request)
        if operation.scope == ORGS_MANAGE:
            assert principal is not None  # no operator route takes guests
            principal = await operator(request, principal)
        if "bucket_id" in request.path_params:
            principal = await authorize(request, operation, principal)
            state.setdefault("principal", principal)
        assert principal is not None
        return await operation.handler(request, principal)

    return dispatch


def v1_routes() -> list[Route]:
    by_path: dict[str, dict[str, Operation]] = {}
    for operation in OPERATIONS:
        by_path.setdefault(operation.path, {})[operation.method] = operation
    return [
        Route(
            "/v1" + path.replace("{key}", "{key:path}"),
            _endpoint(methods),
            methods=list(methods),
        )
        for path, methods in by_path.items()
    ]
