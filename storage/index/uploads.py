"""Transactions on multipart uploads and their parts."""

from __future__ import annotations

from dataclasses import asdict

from storage.rules.acl import shares

from ..errors import TooLarge, UploadNotFound
from ..models import MultipartUpload, Part
from .buckets import reserve_name
from .counting import bucket_for_file_write, check_quota, drop_upload, upload_bytes
from .rows import (
    PART_COLUMNS,
    PART_FIELDS,
    UPLOAD_COLUMNS,
    UPLOAD_FIELDS,
    insert,
    part_from_row,
    upload_from_row,
    upsert,
)
from .sql import Script, lock_row, one, point, read, rows, run, value, write


@write
def create_upload(upload: MultipartUpload) -> Script[None]:
    """Record a new upload; a public ACL for its object reserves the bucket's name now (as
    its completion does again), so the parts are never sent for a name another holds."""
    yield from bucket_for_file_write(upload.bucket_id)
    if shares(upload.acl):
        yield from reserve_name(upload.bucket_id)
    yield insert("multipart_uploads", UPLOAD_FIELDS, asdict(upload))


@point
def get_upload(upload_id: str) -> Script[MultipartUpload | None]:
    row = yield one(
        f"SELECT {UPLOAD_COLUMNS} FROM multipart_uploads WHERE upload_id = ?", upload_id
    )
    return None if row is None else upload_from_row(row)


@read
def list_uploads(
    bucket_id: str, prefix: str, after: tuple[str, str] | None, limit: int
) -> Script[list[MultipartUpload]]:
    """Uploads of a bucket ordered by (key, upload id), after `after`."""
    after_key, after_id = after or ("", "")
    found = yield rows(
        f"SELECT {UPLOAD_COLUMNS} FROM multipart_uploads WHERE bucket_id = ? "
        "AND (key > ? OR (key = ? AND upload_id > ?)) AND substr(key, 1, ?) = ? "
        "ORDER BY key, upload_id LIMIT ?",
        bucket_id,
        after_key,
        after_key,
        after_id,
        len(prefix),
        prefix,
        limit,
    )
    return [upload_from_row(row) for row in found]


def _owner(upload_id: str) -> Script[str | None]:
    """The organization of an upload's bucket, its row locked; UploadNotFound if none."""
    row = yield one(
        "SELECT u.upload_id, b.org_id FROM multipart_uploads u "
        "LEFT JOIN buckets b ON b.id = u.bucket_id WHERE u.upload_id = ?",
        upload_id,
    )
    if row is None:
        raise UploadNotFound("the multipart upload does not exist")
    if row[1] is not None:
        yield lock_row("organizations", row[1])
    return None if row[1] is None else str(row[1])


@write
def put_part(part: Part, max_storage_bytes: int, max_upload_bytes: int) -> Script[None]:
    """Record a stored part (replacing one of the same number). Parts count against the
    organization's quota (402) and, together, against the bucket's upload limit (413)."""
    org_id = yield from _owner(part.upload_id)
    total = yield from upload_bytes(part.upload_id)  # again under the lock
    replaced = yield value(
        "SELECT size FROM multipart_parts WHERE upload_id = ? AND part_number = ?",
        part.upload_id,
        part.part_number,
    )
    growth = part.size - int(replaced or 0)
    if total + growth > max_upload_bytes:
        raise TooLarge(f"the upload's parts pass the bucket's limit of {max_upload_bytes} bytes")
    if org_id is not None:
        yield from check_quota(org_id, growth, max_storage_bytes)
        yield run(
            "UPDATE organizations SET part_bytes = part_bytes + ? WHERE id = ?", growth, org_id
        )
    yield upsert("multipart_parts", ("upload_id", "part_number"), PART_FIELDS, asdict(part))


@read
def list_parts(upload_id: str, after: int, limit: int) -> Script[list[Part]]:
    found = yield rows(
        f"SELECT {PART_COLUMNS} FROM multipart_parts WHERE upload_id = ? "
        "AND part_number > ? ORDER BY part_number LIMIT ?",
        upload_id,
        after,
        limit,
    )
    return [part_from_row(row) for row in found]


@write
def delete_upload(upload_id: str) -> Script[None]:
    """Abort (or expire) an upload: it and its parts go, and their bytes from the count."""
    org_id = yield from _owner(upload_id)
    freed = yield from upload_bytes(upload_id)  # again under the lock
    yield from drop_upload(upload_id, org_id, freed)


@read
def expired_uploads(created_before: str) -> Script[list[str]]:
    """Uploads begun before `created_before` (an ISO timestamp): abandoned."""
    found = yield rows(
        "SELECT upload_id FROM multipart_uploads WHERE created_at < ? ORDER BY created_at",
        created_before,
    )
    return [row[0] for row in found]


@read
def bucket_uploads(bucket_id: str) -> Script[list[tuple[str, str, str]]]:
    """(upload id, key, created at) of every upload in progress in the bucket."""
    found = yield rows(
        "SELECT upload_id, key, created_at FROM multipart_uploads WHERE bucket_id = ? "
        "ORDER BY created_at",
        bucket_id,
    )
    return [(row[0], row[1], row[2]) for row in found]


@read
def upload_ids() -> Script[set[str]]:
    found = yield rows("SELECT upload_id FROM multipart_uploads")
    return {row[0] for row in found}
