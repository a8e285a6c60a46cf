"""What the SQLite and PostgreSQL indexes share: the column lists, the mapping of rows to
records, conditional-write checks and the consistency report. No database access here."""

from __future__ import annotations

import json
from typing import Any

from .config import UploadSettings
from .errors import PreconditionFailed
from .index import BucketChanges
from .models import ApiKey, Bucket, Condition, FileRecord, Organization

ORG_COLUMNS = "id, name, plan, created_at, bucket_count, stored_bytes, file_count"
KEY_COLUMNS = (
    "id, org_id, name, scopes, bucket_id, created_at, expires_at, revoked_at, last4, access_key_id"
)
BUCKET_COLUMNS = (
    "id, org_id, name, region, status, status_reason, created_at, max_upload_bytes, "
    "allowed_content_types, file_count, size_bytes, location"
)
FILE_COLUMNS = (
    "bucket_id, key, size, content_type, uploaded_at, sha256, blob_id, backend_etag, md5, "
    "metadata, checksum"
)
FILE_FIELDS = FILE_COLUMNS.replace(" ", "").split(",")
UPLOAD_COLUMNS = "upload_id, bucket_id, key, content_type, metadata, checksum_algorithm, created_at"
PART_COLUMNS = "upload_id, part_number, size, md5, checksum, uploaded_at"


def org_from_row(row: tuple[Any, ...]) -> Organization:
    return Organization(*row)


def key_from_row(row: tuple[Any, ...]) -> ApiKey:
    id_, org_id, name, scopes, bucket_id, created_at, expires_at, revoked_at, last4, access = row
    return ApiKey(
        id_,
        org_id,
        name,
        tuple(scopes.split()),
        bucket_id,
        created_at,
        expires_at,
        revoked_at,
        last4,
        access,
    )


def file_from_row(row: tuple[Any, ...], location: str | None = None) -> FileRecord:
    return FileRecord(**dict(zip(FILE_FIELDS, row, strict=True)), location=location)


def check_condition(current: tuple[Any, ...] | None, condition: Condition | None) -> None:
    """Raise PreconditionFailed unless the key's current (md5, sha256) satisfy `condition`."""
    if condition is None:
        return
    if condition.if_none_match_any and current is not None:
        raise PreconditionFailed("an object exists at the key (If-None-Match: *)")
    if condition.if_match is not None:
        if current is None:
            raise PreconditionFailed("there is no object at the key (If-Match)")
        tags = {f'"{tag}"' for tag in current if tag}
        wanted = condition.if_match.strip()
        if wanted != "*" and wanted not in tags:
            raise PreconditionFailed("the object's ETag does not match If-Match")


def bucket_from_row(row: tuple[Any, ...], uploads: UploadSettings) -> Bucket:
    (
        id_,
        org_id,
        name,
        region,
        status,
        reason,
        created_at,
        max_bytes,
        types,
        count,
        size,
        where,
    ) = row
    return Bucket(
        id_,
        org_id,
        name,
        region,
        status,
        reason,
        created_at,
        uploads.default_max_bytes if max_bytes is None else max_bytes,
        tuple(uploads.allowed_content_types if types is None else json.loads(types)),
        count,
        size,
        where,
    )


CONSISTENCY_QUERIES = (
    "SELECT b.id, b.refcount, (SELECT COUNT(*) FROM files f WHERE f.blob_id = b.id) FROM blobs b",
    "SELECT DISTINCT blob_id FROM files WHERE blob_id NOT IN (SELECT id FROM blobs)",
    "SELECT b.id, b.file_count, b.size_bytes, COUNT(f.key), COALESCE(SUM(f.size), 0) "
    "FROM buckets b LEFT JOIN files f ON f.bucket_id = b.id GROUP BY b.id",
    "SELECT o.id, o.bucket_count, o.file_count, o.stored_bytes, "
    "(SELECT COUNT(*) FROM buckets b WHERE b.org_id = o.id), "
    "(SELECT COALESCE(SUM(file_count), 0) FROM buckets b WHERE b.org_id = o.id), "
    "(SELECT COALESCE(SUM(size_bytes), 0) FROM buckets b WHERE b.org_id = o.id) "
    "FROM organizations o",
    "SELECT COUNT(*) FROM files WHERE bucket_id NOT IN (SELECT id FROM buckets)",
)
"""The queries whose rows `consistency_problems` reads, in its order."""


def consistency_problems(
    blobs: list[Any], dangling: list[Any], buckets: list[Any], orgs: list[Any], orphans: list[Any]
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
    return problems


def bucket_change_columns(changes: BucketChanges) -> dict[str, object]:
    """The columns a bucket PATCH sets, with their values (None resets a limit)."""
    columns: dict[str, object] = {}
    if "name" in changes:
        columns["name"] = changes["name"]
    if "max_upload_bytes" in changes:
        columns["max_upload_bytes"] = changes["max_upload_bytes"]
    if "allowed_content_types" in changes:
        types = changes["allowed_content_types"]
        columns["allowed_content_types"] = None if types is None else json.dumps(list(types))
    return columns


def page_query(
    table: str, columns: str, org_id: str, after: str | None, limit: int, **equal: str | None
) -> tuple[str, list[object]]:
    """One page of an organization's rows by id, with `?` placeholders; `equal` adds
    column = value conditions for the values that are not None."""
    sql = f"SELECT {columns} FROM {table} WHERE org_id = ? AND id > ?"
    args: list[object] = [org_id, after or ""]
    for column, value in equal.items():
        if value is not None:
            sql += f" AND {column} = ?"
            args.append(value)
    return sql + " ORDER BY id LIMIT ?", [*args, limit]
