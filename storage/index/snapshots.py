"""Transactions on snapshots: take one (of a bucket, or of every bucket of the server), read
them, delete one. Restores and forks are `restores.py`'s.

A snapshot copies index rows, never bytes: each of its rows that holds content holds one
reference on its blob, added and dropped with set-based statements (one per snapshot, never
one per row), so the blob outlives every bucket version that named it as long as the
snapshot does.
"""

from __future__ import annotations

import json
from typing import Any

from storage.rules import ids

from ..errors import BucketNotFound, SnapshotNotFound
from ..models import FileRecord, Page, Snapshot
from .copies import Copy, point_at_copies
from .counting import snapshot_bytes
from .rows import FILE_COLUMNS, file_from_row, insert
from .sql import Release, Script, lock_row, one, placeholders, point, read, rows, run, value, write

CONFIG_FIELDS = (
    "name",
    "region",
    "created_at",
    "location",
    "versioning",
    "object_lock",
    "lifecycle",
    "tags",
    "cors",
    "public",
    "cache_control",
    "policy",
    "acl",
    "public_access_block",
    "max_upload_bytes",
    "allowed_content_types",
    "anonymous_rpm",
    "encryption",
    "object_ownership",
    "file_count",
    "size_bytes",
)
"""The bucket columns a snapshot keeps (`config`), as stored: a None limit or allow-list
still follows the server's defaults once restored (a setting a snapshot made before it
existed lacks is None: `encryption`, say); its counters (versions that hold
content, their bytes) are the restored bucket's."""
CONFIG_COLUMNS = ", ".join(CONFIG_FIELDS)
SNAPSHOT_COLUMNS = (
    "s.id, s.org_id, s.bucket_id, s.bucket_name, s.name, s.created_at, s.file_count, "
    "s.size_bytes, CASE WHEN s.bucket_id IS NULL THEN "
    "(SELECT COUNT(*) FROM snapshots c WHERE c.parent_id = s.id) ELSE 1 END"
)
SNAPSHOT_ROW = ("id", "org_id", "bucket_id", "bucket_name", "parent_id", "name", "created_at")

HELD_BY_BUCKET = (
    "SELECT blob_id FROM files WHERE bucket_id = ? AND delete_marker = 0 UNION ALL "
    "SELECT blob_id FROM versions WHERE bucket_id = ? AND delete_marker = 0"
)
"""The content references of a bucket's versions (arguments: the bucket id, twice)."""
HELD_BY_SNAPSHOT = (
    "SELECT blob_id FROM snapshot_versions WHERE snapshot_id = ? AND delete_marker = 0"
)
HELD_BY_CHILDREN = (
    "SELECT blob_id FROM snapshot_versions WHERE delete_marker = 0 AND snapshot_id IN "
    "(SELECT id FROM snapshots WHERE parent_id = ?)"
)
"""The content references of a server snapshot's bucket snapshots."""


def snapshot_from_row(row: tuple[Any, ...]) -> Snapshot:
    fields = ("id", "org_id", "bucket_id", "bucket_name", "name", "created_at")
    values: dict[str, Any] = dict(zip(fields, row[:6], strict=True))
    return Snapshot(**values, file_count=int(row[6]), size_bytes=int(row[7]), buckets=int(row[8]))


NOTHING = "SELECT blob_id FROM snapshot_versions WHERE 1 = 0"
CHUNK = 4000
"""Blobs per statement when changing reference counts: two parameters each, well under
SQLite's and PostgreSQL's limits."""


def move_references(
    gained: str, gained_args: tuple[object, ...], lost: str, lost_args: tuple[object, ...]
) -> Script[None]:
    """One blob reference more per row of `gained`, one less per row of `lost` (queries of
    blob ids): counted in one grouped query, so only the blobs whose count changes are
    written (a restore that puts back what the bucket still holds writes none), a few
    thousand per statement. A blob left with no reference goes, and is released for
    reaping once the transaction commits."""
    deltas = yield rows(
        f"SELECT blob_id, SUM(n) FROM (SELECT blob_id, 1 AS n FROM ({gained}) AS g "
        f"UNION ALL SELECT blob_id, -1 AS n FROM ({lost}) AS l) AS d "
        "GROUP BY blob_id HAVING SUM(n) <> 0",
        *gained_args,
        *lost_args,
    )
    for start in range(0, len(deltas), CHUNK):
        chunk = deltas[start : start + CHUNK]
        pairs = ", ".join("(CAST(? AS TEXT), CAST(? AS BIGINT))" for _ in chunk)
        yield run(
            f"UPDATE blobs SET refcount = blobs.refcount + d.column2 FROM (VALUES {pairs}) "
            "AS d WHERE blobs.id = d.column1",
            *(item for pair in chunk for item in pair),
        )
    dropped = [blob_id for blob_id, n in deltas if n < 0]
    for start in range(0, len(dropped), CHUNK):
        chunk = dropped[start : start + CHUNK]
        listed = f"refcount <= 0 AND id IN ({placeholders(len(chunk))})"
        gone = yield rows(f"SELECT id, inline_data IS NULL FROM blobs WHERE {listed}", *chunk)
        if gone:
            yield run(f"DELETE FROM blobs WHERE {listed}", *chunk)
            for blob_id, has_file in gone:
                yield Release(blob_id, bool(has_file))


def copy_bucket_rows(snapshot_id: str, bucket_id: str) -> Script[None]:
    """Copy every version and marker of the bucket into the snapshot, as it is."""
    for table, is_current in (("files", 1), ("versions", 0)):
        yield run(
            f"INSERT INTO snapshot_versions (snapshot_id, is_current, {FILE_COLUMNS}) "
            f"SELECT ?, {is_current}, {FILE_COLUMNS} FROM {table} WHERE bucket_id = ?",
            snapshot_id,
            bucket_id,
        )


def config_json(row: tuple[Any, ...]) -> str:
    return json.dumps(dict(zip(CONFIG_FIELDS, row, strict=True)))


def _insert_snapshot(values: dict[str, Any]) -> Script[None]:
    yield insert("snapshots", (*SNAPSHOT_ROW, "config"), values)


def _count(snapshot_id: str) -> Script[None]:
    yield run(
        "UPDATE snapshots SET file_count = (SELECT COUNT(*) FROM snapshot_versions v "
        "WHERE v.snapshot_id = snapshots.id), size_bytes = (SELECT COALESCE(SUM(v.size), 0) "
        "FROM snapshot_versions v WHERE v.snapshot_id = snapshots.id) WHERE id = ?",
        snapshot_id,
    )


@write
def create_snapshot(
    snapshot_id: str, bucket_id: str, name: str | None, at: str, copies: list[Copy] | None = None
) -> Script[Snapshot]:
    """Every version and marker of the bucket, current or not, and its settings; with
    `copies` (the S3 backend), the snapshot's rows name the copies of their contents."""
    org_id = yield value("SELECT org_id FROM buckets WHERE id = ?", bucket_id)
    if org_id is None:
        raise BucketNotFound("bucket not found")
    yield lock_row("organizations", org_id)  # no file write of the organization meanwhile
    config = yield one(f"SELECT {CONFIG_COLUMNS} FROM buckets WHERE id = ?", bucket_id)
    if config is None:
        raise BucketNotFound("bucket not found")
    yield from _insert_snapshot(
        {
            "id": snapshot_id,
            "org_id": org_id,
            "bucket_id": bucket_id,
            "bucket_name": config[0],
            "parent_id": None,
            "name": name,
            "created_at": at,
            "config": config_json(config),
        }
    )
    yield from copy_bucket_rows(snapshot_id, bucket_id)
    if copies is not None:
        yield from point_at_copies("snapshot_versions", "snapshot_id = ?", (snapshot_id,), copies)
    yield from _count(snapshot_id)
    yield from move_references(HELD_BY_SNAPSHOT, (snapshot_id,), NOTHING, ())
    found = yield from _get(snapshot_id)
    assert found is not None
    return found[0]


def _get(snapshot_id: str) -> Script[tuple[Snapshot, str | None] | None]:
    row = yield one(
        f"SELECT {SNAPSHOT_COLUMNS}, s.parent_id FROM snapshots s WHERE s.id = ?", snapshot_id
    )
    return None if row is None else (snapshot_from_row(row[:-1]), row[-1])


@point
def get_snapshot(snapshot_id: str) -> Script[tuple[Snapshot, str | None] | None]:
    """The snapshot and the server snapshot it is part of (None: none)."""
    return (yield from _get(snapshot_id))


@point
def snapshot_config(snapshot_id: str) -> Script[dict[str, Any] | None]:
    """The bucket settings a bucket snapshot kept (`CONFIG_FIELDS`)."""
    config = yield value("SELECT config FROM snapshots WHERE id = ?", snapshot_id)
    return None if config is None else dict(json.loads(config))


@read
def list_snapshots(
    org_id: str | None, bucket_id: str | None, after: str | None, limit: int
) -> Script[list[Snapshot]]:
    """One page by id of an organization's bucket snapshots (of one bucket, or all of them,
    those of deleted buckets too), or (`org_id` None) of the server snapshots."""
    if org_id is None:
        where, args = "s.org_id IS NULL AND s.bucket_id IS NULL", []
    else:
        where, args = "s.org_id = ? AND s.parent_id IS NULL", [org_id]
        if bucket_id is not None:
            where += " AND s.bucket_id = ?"
            args.append(bucket_id)
    found = yield rows(
        f"SELECT {SNAPSHOT_COLUMNS} FROM snapshots s WHERE {where} AND s.id > ? "
        "ORDER BY s.id LIMIT ?",
        *args,
        after or "",
        limit,
    )
    return [snapshot_from_row(row) for row in found]


@point
def count_snapshots(org_id: str) -> Script[int]:
    """How many bucket snapshots the organization keeps (those of a server snapshot are
    the operator's)."""
    found = yield value(
        "SELECT COUNT(*) FROM snapshots WHERE org_id = ? AND parent_id IS NULL", org_id
    )
    return int(found or 0)


@read
def snapshot_usage(org_id: str) -> Script[int]:
    """The bytes the organization's snapshots alone hold (`counting.snapshot_bytes`)."""
    return (yield from snapshot_bytes(org_id))


@read
def snapshot_files(
    snapshot_id: str, location: str | None, after: str | None, limit: int
) -> Script[list[FileRecord]]:
    """The versions a snapshot held current, delete markers left out, by key after
    `after`; `location`: where the backend keeps the snapshot's contents."""
    found = yield rows(
        f"SELECT {FILE_COLUMNS} FROM snapshot_versions WHERE snapshot_id = ? AND "
        "is_current = 1 AND delete_marker = 0 AND key > ? ORDER BY key LIMIT ?",
        snapshot_id,
        after or "",
        limit,
    )
    return [file_from_row(row, location) for row in found]


def page(found: list[Snapshot], limit: int) -> Page[Snapshot]:
    return Page.of(found, limit, lambda snapshot: snapshot.id)


@write
def delete_snapshot(snapshot_id: str) -> Script[None]:
    """A snapshot goes with its rows and their references (a server snapshot, with its
    bucket snapshots)."""
    exists = yield value("SELECT 1 FROM snapshots WHERE id = ?", snapshot_id)
    if exists is None:
        raise SnapshotNotFound("snapshot not found")
    yield from move_references(NOTHING, (), HELD_BY_SNAPSHOT, (snapshot_id,))
    yield from move_references(NOTHING, (), HELD_BY_CHILDREN, (snapshot_id,))
    children = "SELECT id FROM snapshots WHERE parent_id = ?"
    yield run(f"DELETE FROM snapshot_versions WHERE snapshot_id IN ({children})", snapshot_id)
    yield run("DELETE FROM snapshot_versions WHERE snapshot_id = ?", snapshot_id)
    yield run("DELETE FROM snapshots WHERE parent_id = ? OR id = ?", snapshot_id, snapshot_id)


def lock_organizations() -> Script[None]:
    """Lock every organization's row, in id order: no file write anywhere meanwhile."""
    found = yield rows("SELECT id FROM organizations ORDER BY id")
    for (org_id,) in found:
        yield lock_row("organizations", org_id)


@write
def create_server_snapshot(
    snapshot_id: str, name: str | None, at: str, copies: list[Copy] | None = None
) -> Script[Snapshot]:
    """A bucket snapshot of every bucket of every organization, each naming this one; with
    `copies` (the S3 backend), their rows name the copies of their contents."""
    yield from lock_organizations()
    found = yield rows(f"SELECT id, org_id, {CONFIG_COLUMNS} FROM buckets ORDER BY id")
    yield from _insert_snapshot(
        {
            "id": snapshot_id,
            "org_id": None,
            "bucket_id": None,
            "bucket_name": None,
            "parent_id": None,
            "name": name,
            "created_at": at,
            "config": None,
        }
    )
    for bucket_id, org_id, *config in found:
        yield from _insert_snapshot(
            {
                "id": ids.new_id(ids.SNAPSHOT_PREFIX),
                "org_id": org_id,
                "bucket_id": bucket_id,
                "bucket_name": config[0],
                "parent_id": snapshot_id,
                "name": name,
                "created_at": at,
                "config": config_json(tuple(config)),
            }
        )
    for table, is_current in (("files", 1), ("versions", 0)):
        yield run(
            f"INSERT INTO snapshot_versions (snapshot_id, is_current, {FILE_COLUMNS}) "
            f"SELECT s.id, {is_current}, {', '.join(f't.{c}' for c in FILE_COLUMNS.split(', '))} "
            f"FROM {table} t JOIN snapshots s ON s.bucket_id = t.bucket_id AND s.parent_id = ?",
            snapshot_id,
        )
    if copies is not None:
        children = "snapshot_id IN (SELECT id FROM snapshots WHERE parent_id = ?)"
        yield from point_at_copies("snapshot_versions", children, (snapshot_id,), copies)
    yield run(
        "UPDATE snapshots SET file_count = (SELECT COUNT(*) FROM snapshot_versions v "
        "WHERE v.snapshot_id = snapshots.id), size_bytes = (SELECT COALESCE(SUM(v.size), 0) "
        "FROM snapshot_versions v WHERE v.snapshot_id = snapshots.id) WHERE parent_id = ?",
        snapshot_id,
    )
    yield run(
        "UPDATE snapshots SET file_count = (SELECT COALESCE(SUM(c.file_count), 0) "
        "FROM snapshots c WHERE c.parent_id = ?), size_bytes = (SELECT "
        "COALESCE(SUM(c.size_bytes), 0) FROM snapshots c WHERE c.parent_id = ?) WHERE id = ?",
        snapshot_id,
        snapshot_id,
        snapshot_id,
    )
    yield from move_references(HELD_BY_CHILDREN, (snapshot_id,), NOTHING, ())
    made = yield from _get(snapshot_id)
    assert made is not None
    return made[0]
