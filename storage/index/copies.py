"""Rows pointed at copies of their contents (the S3 backend's snapshots): where a version's
object is deleted with the version, a snapshot keeps server-side copies of its own, and a
restore or a fork copies them back into the bucket (`backends/s3/snapshots.py`). The copies
are made before the transaction; here their rows take the copies' blobs, in set-based
statements."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import Conflict
from ..models import FileRecord
from .rows import FILE_COLUMNS, file_from_row
from .sql import Script, read, rows, run

CHUNK = 2000
"""Copies per statement: four or five parameters each, under both databases' limits."""


class Copy(NamedTuple):
    """A content copied in the cluster: the blob copied, and its copy's blob, ETag, object
    name and size."""

    source: str
    blob_id: str
    backend_etag: str | None
    object_key: str
    size: int


def point_at_copies(
    table: str, scope: str, scope_args: tuple[object, ...], copies: list[Copy]
) -> Script[None]:
    """The content rows of `table` matching `scope` (SQL over its columns) name the copies
    of their blobs instead; the copies' blob rows are inserted with no reference (the
    caller adds them, as for any row). Conflict when a row's blob was not copied: the rows
    changed while their contents were copied."""
    held = yield rows(
        f"SELECT DISTINCT blob_id FROM {table} WHERE {scope} AND delete_marker = 0", *scope_args
    )
    wanted = {row[0] for row in held}
    used = [copy for copy in copies if copy.source in wanted]
    if len({copy.source for copy in used}) != len(wanted):
        raise Conflict("the versions changed while their contents were copied; try again")
    for start in range(0, len(used), CHUNK):
        chunk = used[start : start + CHUNK]
        yield run(
            "INSERT INTO blobs (id, size, refcount) VALUES "
            + ", ".join("(?, ?, 0)" for _ in chunk),
            *(value for copy in chunk for value in (copy.blob_id, copy.size)),
        )
        four = "(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT))"
        yield run(
            f"UPDATE {table} SET blob_id = d.column2, backend_etag = d.column3, "
            f"object_key = d.column4 FROM (VALUES {', '.join(four for _ in chunk)}) AS d "
            f"WHERE {scope} AND {table}.blob_id = d.column1",
            *(v for c in chunk for v in (c.source, c.blob_id, c.backend_etag, c.object_key)),
            *scope_args,
        )


@read
def contents(bucket_id: str | None, snapshot_id: str | None) -> Script[list[FileRecord]]:
    """The versions that hold content of a bucket (`bucket_id`), or of a snapshot, one per
    blob: what a copy copies. A snapshot's rows have no location (the caller's)."""
    if bucket_id is not None:
        found = yield rows(
            f"SELECT {FILE_COLUMNS}, (SELECT location FROM buckets WHERE id = ?) FROM ("
            f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = ? AND delete_marker = 0 "
            f"UNION ALL SELECT {FILE_COLUMNS} FROM versions WHERE bucket_id = ? "
            "AND delete_marker = 0) AS f",
            bucket_id,
            bucket_id,
            bucket_id,
        )
    else:
        found = yield rows(
            f"SELECT {FILE_COLUMNS}, NULL FROM snapshot_versions WHERE snapshot_id = ? "
            "AND delete_marker = 0",
            snapshot_id,
        )
    unique: dict[str, FileRecord] = {}
    for row in found:
        record = file_from_row(row[:-1], row[-1])
        unique.setdefault(record.blob_id, record)
    return list(unique.values())


@read
def server_contents() -> Script[list[FileRecord]]:
    """The versions that hold content of every bucket, one per blob, each with its bucket's
    location: what a server snapshot copies."""
    found = yield rows(
        f"SELECT {FILE_COLUMNS}, (SELECT location FROM buckets b WHERE b.id = f.bucket_id) "
        f"FROM (SELECT {FILE_COLUMNS} FROM files WHERE delete_marker = 0 UNION ALL "
        f"SELECT {FILE_COLUMNS} FROM versions WHERE delete_marker = 0) AS f"
    )
    unique: dict[str, FileRecord] = {}
    for row in found:
        record = file_from_row(row[:-1], row[-1])
        unique.setdefault(record.blob_id, record)
    return list(unique.values())


@read
def snapshot_blobs(snapshot_id: str) -> Script[set[str]]:
    """The blobs a snapshot names (a server snapshot: its bucket snapshots)."""
    found = yield rows(
        "SELECT DISTINCT blob_id FROM snapshot_versions WHERE delete_marker = 0 AND "
        "(snapshot_id = ? OR snapshot_id IN (SELECT id FROM snapshots WHERE parent_id = ?))",
        snapshot_id,
        snapshot_id,
    )
    return {row[0] for row in found}
