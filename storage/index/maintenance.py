"""Whole-index reads and blob bookkeeping: totals, blobs to reap, the consistency report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..models import FileRecord, StorageStats
from .rows import FILE_COLUMNS, FILE_FIELDS, file_from_row
from .sql import Release, Script, one, read, rows, write

PREFIXED_FILE_COLUMNS = ", ".join(f"f.{field}" for field in FILE_FIELDS)

_STORED = (
    "(SELECT bucket_id, blob_id, size FROM files WHERE delete_marker = 0 UNION ALL "
    "SELECT bucket_id, blob_id, size FROM versions WHERE delete_marker = 0)"
)
"""Every version that holds content, current or not."""
_REFERENCES = (
    "(SELECT blob_id FROM files WHERE delete_marker = 0 UNION ALL "
    "SELECT blob_id FROM versions WHERE delete_marker = 0 UNION ALL "
    "SELECT blob_id FROM snapshot_versions WHERE delete_marker = 0)"
)
"""Every reference on a blob: each version that holds content, and each snapshot row that
does (a snapshot keeps its contents alive)."""
CONSISTENCY_QUERIES = (
    "SELECT b.id, b.refcount, COALESCE(r.n, 0) FROM blobs b LEFT JOIN "
    f"(SELECT blob_id, COUNT(*) AS n FROM {_REFERENCES} AS f GROUP BY blob_id) AS r "
    "ON r.blob_id = b.id",
    f"SELECT DISTINCT blob_id FROM {_REFERENCES} AS f WHERE blob_id NOT IN (SELECT id FROM blobs)",
    "SELECT b.id, b.file_count, b.size_bytes, COUNT(f.blob_id), COALESCE(SUM(f.size), 0) "
    f"FROM buckets b LEFT JOIN {_STORED} AS f ON f.bucket_id = b.id GROUP BY b.id",
    "SELECT o.id, o.bucket_count, o.file_count, o.stored_bytes, "
    "(SELECT COUNT(*) FROM buckets b WHERE b.org_id = o.id), "
    "(SELECT COALESCE(SUM(file_count), 0) FROM buckets b WHERE b.org_id = o.id), "
    "(SELECT COALESCE(SUM(size_bytes), 0) FROM buckets b WHERE b.org_id = o.id) "
    "FROM organizations o",
    "SELECT COUNT(*) FROM files WHERE bucket_id NOT IN (SELECT id FROM buckets)",
    "SELECT o.id, o.part_bytes, (SELECT COALESCE(SUM(p.size), 0) FROM multipart_parts p "
    "JOIN multipart_uploads u ON u.upload_id = p.upload_id "
    "JOIN buckets b ON b.id = u.bucket_id WHERE b.org_id = o.id) FROM organizations o",
    "SELECT COUNT(*) FROM multipart_uploads WHERE bucket_id NOT IN (SELECT id FROM buckets)",
)
BLOB_FILES = "SELECT id FROM blobs WHERE inline_data IS NULL"
"""Blobs kept as files (not inline in the index)."""


@read
def stats() -> Script[StorageStats]:
    orgs, buckets, files, stored = yield one(
        "SELECT COUNT(*), COALESCE(SUM(bucket_count), 0), COALESCE(SUM(file_count), 0), "
        "COALESCE(SUM(stored_bytes), 0) FROM organizations"
    )
    blobs, blob_bytes = yield one("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs")
    return StorageStats(
        organizations=int(orgs),
        buckets=int(buckets),
        files=int(files),
        stored_bytes=int(stored),
        blobs=int(blobs),
        blob_bytes=int(blob_bytes),
    )


@write
def release(blob_ids: list[str]) -> Script[None]:
    """Hand blobs to the reaper after this (empty) transaction commits."""
    for blob_id in blob_ids:
        yield Release(blob_id, True)


def with_files(released: Sequence[Release]) -> list[str]:
    """Of the blobs a committed transaction released, those that had a file."""
    return [blob.blob_id for blob in released if blob.has_file]


def reapable(claimed: Sequence[str]) -> Script[list[str]]:
    """Of the claimed blobs, those whose file can go: gone from the index, or now kept
    inline (a blob referenced again meanwhile keeps its file). Asked in a transaction of its
    own after the claim (`sql.Claim`)."""
    reap = []
    for blob_id in claimed:
        row = yield one("SELECT inline_data IS NULL FROM blobs WHERE id = ?", blob_id)
        if row is None or not row[0]:
            reap.append(blob_id)
    return reap


@read
def locations() -> Script[list[str]]:
    """The backend locations of every bucket that has one."""
    found = yield rows("SELECT location FROM buckets WHERE location IS NOT NULL ORDER BY id")
    return [row[0] for row in found]


@read
def blob_ids() -> Script[set[str]]:
    found = yield rows(BLOB_FILES)
    return {row[0] for row in found}


@read
def inline_after(after: str, limit: int) -> Script[list[tuple[str, int, bytes]]]:
    """(id, size, content) of the blobs kept inline, in id order, after `after`."""
    found = yield rows(
        "SELECT id, size, inline_data FROM blobs WHERE inline_data IS NOT NULL AND id > ? "
        "ORDER BY id LIMIT ?",
        after,
        limit,
    )
    return [(row[0], int(row[1]), bytes(row[2])) for row in found]


@read
def check_consistency() -> Script[list[str]]:
    results = []
    for query in CONSISTENCY_QUERIES:
        results.append((yield rows(query)))
    return consistency_problems(*results)


def consistency_problems(
    blobs: list[Any],
    dangling: list[Any],
    buckets: list[Any],
    orgs: list[Any],
    orphans: list[Any],
    parts: list[Any],
    orphan_uploads: list[Any],
) -> list[str]:
    """Counters and reference counts that do not match what they count."""
    problems = []
    for blob_id, refcount, references in blobs:
        if refcount != references:
            problems.append(f"blob {blob_id}: refcount {refcount} but {references} references")
    for (blob_id,) in dangling:
        problems.append(f"blob {blob_id}: referenced but has no row")
    for bucket_id, count, size, real_count, real_size in buckets:
        if (count, size) != (real_count, real_size):
            problems.append(
                f"bucket {bucket_id}: counters {count}/{size}, real {real_count}/{real_size}"
            )
    for org_id, n_buckets, files, stored, real_buckets, real_files, real_stored in orgs:
        if (n_buckets, files, stored) != (real_buckets, real_files, real_stored):
            problems.append(f"organization {org_id}: counters do not match its buckets")
    if orphans[0][0]:
        problems.append(f"{orphans[0][0]} files belong to no bucket")
    for org_id, counted, real in parts:
        if counted != real:
            problems.append(f"organization {org_id}: {counted} part bytes counted, {real} real")
    if orphan_uploads[0][0]:
        problems.append(f"{orphan_uploads[0][0]} multipart uploads belong to no bucket")
    return problems


@read
def files_after(
    after: tuple[str, str, str] | None, limit: int
) -> Script[list[tuple[str, FileRecord]]]:
    """(bucket name, version) of every stored version (current or not, delete markers
    left out), in (bucket id, key, version id) order, after `after`."""
    found = yield rows(
        f"SELECT b.name, b.location, {PREFIXED_FILE_COLUMNS} FROM ("
        f"SELECT {FILE_COLUMNS}, COALESCE(version_id, 'null') AS vid FROM files "
        "WHERE delete_marker = 0 "
        f"UNION ALL SELECT {FILE_COLUMNS}, version_id AS vid FROM versions "
        "WHERE delete_marker = 0) f "
        "JOIN buckets b ON b.id = f.bucket_id "
        "WHERE (f.bucket_id, f.key, f.vid) > (?, ?, ?) "
        "ORDER BY f.bucket_id, f.key, f.vid LIMIT ?",
        *(after or ("", "", "")),
        limit,
    )
    return [(row[0], file_from_row(row[2:], row[1])) for row in found]


@read
def snapshot_files_after(
    after: tuple[str, str, str] | None, limit: int
) -> Script[list[tuple[str, str, FileRecord]]]:
    """(snapshot id, bucket name, version) of every version a snapshot names (delete
    markers left out), in (snapshot id, key, version id) order, after `after`; the
    versions have no location (the backend keeps a snapshot's contents where it chooses)."""
    found = yield rows(
        f"SELECT f.snapshot_id, s.bucket_name, {PREFIXED_FILE_COLUMNS} FROM ("
        f"SELECT snapshot_id, {FILE_COLUMNS}, COALESCE(version_id, 'null') AS vid "
        "FROM snapshot_versions WHERE delete_marker = 0) f "
        "JOIN snapshots s ON s.id = f.snapshot_id "
        "WHERE (f.snapshot_id, f.key, f.vid) > (?, ?, ?) "
        "ORDER BY f.snapshot_id, f.key, f.vid LIMIT ?",
        *(after or ("", "", "")),
        limit,
    )
    return [(row[0], row[1], file_from_row(row[2:], None)) for row in found]
