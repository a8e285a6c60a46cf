"""The snapshot calls, built once for both clients (`aio_snapshots.py` and its synchronous
twin `snapshots.py` only send them): a bucket's snapshots, and the operator's of the whole
server (`server=True`, a key with the scope orgs:manage)."""

from __future__ import annotations

from urllib.parse import quote

from . import snapshot_shapes as shapes
from .calls import Call, bucket_path, data, nothing, page_params
from .models import Bucket, Page, decode

Snapshot = shapes.Snapshot


def _root(server: bool) -> str:
    return "/v1/server/snapshots" if server else "/v1/snapshots"


def snapshot_path(snapshot_id: str, server: bool = False) -> str:
    return f"{_root(server)}/{quote(snapshot_id, safe='')}"


def create_call(bucket_id: str | None, name: str | None) -> Call[Snapshot]:
    """A snapshot of the bucket, or with `bucket_id` None of the whole server."""
    path = _root(True) if bucket_id is None else f"{bucket_path(bucket_id)}/snapshots"
    return Call(
        "POST",
        path,
        lambda r: decode(data(r), Snapshot),
        body=shapes.CreateSnapshot(name=name),
        idempotent=False,
    )


def list_call(
    bucket_id: str | None, server: bool, limit: int | None, cursor: str | None
) -> Call[Page[Snapshot]]:
    path = f"{bucket_path(bucket_id)}/snapshots" if bucket_id is not None else _root(server)
    return Call(
        "GET", path, lambda r: Page.from_json(r.json(), Snapshot), page_params(limit, cursor)
    )


def get_call(snapshot_id: str, server: bool) -> Call[Snapshot]:
    return Call("GET", snapshot_path(snapshot_id, server), lambda r: decode(data(r), Snapshot))


def delete_call(snapshot_id: str, server: bool) -> Call[None]:
    return Call("DELETE", snapshot_path(snapshot_id, server), nothing)


def restore_call(snapshot_id: str) -> Call[Bucket]:
    """Not retried: a restore that ran but lost its answer would run again over writes
    made since."""
    return Call(
        "POST",
        f"{snapshot_path(snapshot_id)}/restore",
        lambda r: decode(data(r), Bucket),
        idempotent=False,
    )


def restore_server_call(snapshot_id: str, drop_locked: bool) -> Call[Snapshot]:
    return Call(
        "POST",
        f"{snapshot_path(snapshot_id, True)}/restore",
        lambda r: decode(data(r), Snapshot),
        body=shapes.RestoreServerSnapshot(drop_locked=drop_locked),
        idempotent=False,
    )


def fork_call(snapshot_id: str, name: str, region: str | None) -> Call[Bucket]:
    return Call(
        "POST",
        f"{snapshot_path(snapshot_id)}/fork",
        lambda r: decode(data(r), Bucket),
        body=shapes.ForkSnapshot(name=name, region=region),
        idempotent=False,
    )
