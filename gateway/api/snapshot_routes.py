"""The /v1 operations of snapshots (part of the table in `routes.py`): a bucket's, taken,
listed, restored and forked by its organization; and the whole server's, the operator's
(scope orgs:manage, decided by `access.operator`)."""

from __future__ import annotations

from bucketd_client import shapes, snapshot_shapes
from gateway.api import snapshots
from gateway.api.operation import CURSOR, LIMIT, Operation
from storage.models import ORGS_MANAGE

BUCKET_SNAPSHOTS = "/buckets/{bucket_id}/snapshots"
SNAPSHOTS = "/snapshots"
SNAPSHOT = SNAPSHOTS + "/{snapshot_id}"
SERVER_SNAPSHOTS = "/server/snapshots"
SERVER_SNAPSHOT = SERVER_SNAPSHOTS + "/{snapshot_id}"
SNAPSHOT_ID = {"snapshot_id": "$response.body#/data/id"}

SNAPSHOT_OPERATIONS = (
    Operation(
        method="POST",
        path=BUCKET_SNAPSHOTS,
        operation_id="createSnapshot",
        summary="Snapshot the bucket: every version, delete marker and setting, as of now "
        "(no content is copied).",
        handler=snapshots.create_snapshot,
        scope="buckets:write",
        answer="created",
        shape=snapshot_shapes.Snapshot,
        body=snapshot_shapes.CreateSnapshot,
        optional_body=True,
        errors=(400, 404, 409, 413),
        links=SNAPSHOT_ID,
        link_to=("getSnapshot", "restoreSnapshot", "forkSnapshot", "deleteSnapshot"),
    ),
    Operation(
        method="GET",
        path=BUCKET_SNAPSHOTS,
        operation_id="listBucketSnapshots",
        summary="List the bucket's snapshots, ordered by id (oldest first).",
        handler=snapshots.list_bucket_snapshots,
        scope="buckets:read",
        answer="list",
        shape=snapshot_shapes.Snapshot,
        errors=(400, 404),
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="GET",
        path=SNAPSHOTS,
        operation_id="listSnapshots",
        summary="List the organization's bucket snapshots, those of deleted buckets too, "
        "ordered by id.",
        handler=snapshots.list_snapshots,
        scope="buckets:read",
        answer="list",
        shape=snapshot_shapes.Snapshot,
        errors=(400,),
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="GET",
        path=SNAPSHOT,
        operation_id="getSnapshot",
        summary="Get a snapshot.",
        handler=snapshots.get_snapshot,
        scope="buckets:read",
        answer="one",
        shape=snapshot_shapes.Snapshot,
        errors=(404,),
    ),
    Operation(
        method="DELETE",
        path=SNAPSHOT,
        operation_id="deleteSnapshot",
        summary="Delete a snapshot; content no bucket or other snapshot names goes with it.",
        handler=snapshots.delete_snapshot,
        scope="buckets:write",
        answer="nothing",
        errors=(404,),
    ),
    Operation(
        method="POST",
        path=SNAPSHOT + "/restore",
        operation_id="restoreSnapshot",
        summary="Put the bucket back as the snapshot holds it: versions since are dropped, "
        "multipart uploads in flight aborted (scopes buckets:write and files:write).",
        handler=snapshots.restore_snapshot,
        scope="buckets:write",
        answer="one",
        shape=shapes.Bucket,
        errors=(402, 404, 409),
    ),
    Operation(
        method="POST",
        path=SNAPSHOT + "/fork",
        operation_id="forkSnapshot",
        summary="A new bucket holding the snapshot's versions and settings, sharing their content.",
        handler=snapshots.fork_snapshot,
        scope="buckets:write",
        answer="created",
        shape=shapes.Bucket,
        body=snapshot_shapes.ForkSnapshot,
        errors=(400, 402, 404, 409, 413),
        links={"bucket_id": "$response.body#/data/id"},
        link_to=("getBucket", "listFiles"),
    ),
    Operation(
        method="POST",
        path=SERVER_SNAPSHOTS,
        operation_id="createServerSnapshot",
        summary="Snapshot every bucket of every organization (the operator's).",
        handler=snapshots.create_server_snapshot,
        scope=ORGS_MANAGE,
        answer="created",
        shape=snapshot_shapes.Snapshot,
        body=snapshot_shapes.CreateSnapshot,
        optional_body=True,
        errors=(400, 409, 413),
        links=SNAPSHOT_ID,
        link_to=("getServerSnapshot", "restoreServerSnapshot", "deleteServerSnapshot"),
    ),
    Operation(
        method="GET",
        path=SERVER_SNAPSHOTS,
        operation_id="listServerSnapshots",
        summary="List the server's snapshots, ordered by id (the operator's).",
        handler=snapshots.list_server_snapshots,
        scope=ORGS_MANAGE,
        answer="list",
        shape=snapshot_shapes.Snapshot,
        errors=(400,),
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="GET",
        path=SERVER_SNAPSHOT,
        operation_id="getServerSnapshot",
        summary="Get a server snapshot (the operator's).",
        handler=snapshots.get_server_snapshot,
        scope=ORGS_MANAGE,
        answer="one",
        shape=snapshot_shapes.Snapshot,
        errors=(404,),
    ),
    Operation(
        method="DELETE",
        path=SERVER_SNAPSHOT,
        operation_id="deleteServerSnapshot",
        summary="Delete a server snapshot (the operator's).",
        handler=snapshots.delete_server_snapshot,
        scope=ORGS_MANAGE,
        answer="nothing",
        errors=(404,),
    ),
    Operation(
        method="POST",
        path=SERVER_SNAPSHOT + "/restore",
        operation_id="restoreServerSnapshot",
        summary="Put every bucket back as the snapshot holds it: buckets made since are "
        "deleted, deleted ones made again (the operator's).",
        handler=snapshots.restore_server_snapshot,
        scope=ORGS_MANAGE,
        answer="one",
        shape=snapshot_shapes.Snapshot,
        body=snapshot_shapes.RestoreServerSnapshot,
        optional_body=True,
        errors=(400, 404, 409, 413),
    ),
)
