"""Transactions on multipart uploads and their parts."""

from __future__ import annotations

from dataclasses import asdict

from ..errors import UploadNotFound
from ..models import MultipartUpload, Part
from .files import bucket_for_file_write
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
from .sql import Script, one, point, read, rows, run, value, write


@write
def create_upload(upload: MultipartUpload) -> Script[None]:
    yield from bucket_for_file_write(upload.bucket_id)
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


@write
def put_part(part: Part) -> Script[None]:
    exists = yield value("SELECT 1 FROM multipart_uploads WHERE upload_id = ?", part.upload_id)
    if exists is None:
        raise UploadNotFound("the multipart upload does not exist")
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
    deleted = yield run("DELETE FROM multipart_uploads WHERE upload_id = ?", upload_id)
    if not deleted:
        raise UploadNotFound("the multipart upload does not exist")
    yield run("DELETE FROM multipart_parts WHERE upload_id = ?", upload_id)


@read
def upload_ids() -> Script[set[str]]:
    found = yield rows("SELECT upload_id FROM multipart_uploads")
    return {row[0] for row in found}
