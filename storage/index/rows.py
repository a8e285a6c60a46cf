"""Columns of the index's tables and their mapping to records, once for every database.

The file columns are the `FileRecord` fields (but `location`, the bucket's): adding a column
to `files` is a migration per database and a field of the record; the select list, the
upsert and the row mapping follow from it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import fields
from typing import Any, TypedDict

from storage.rules.object_lock import encode_lock

from ..attributes import Attributes
from ..config import UploadSettings
from ..models import ApiKey, Bucket, FileRecord, MultipartUpload, Organization, Part
from .sql import Query, placeholders, run

ORG_FIELDS = (
    "id",
    "name",
    "plan",
    "created_at",
    "bucket_count",
    "stored_bytes",
    "file_count",
    "part_bytes",
)
ORG_COLUMNS = ", ".join(ORG_FIELDS)
KEY_FIELDS = (
    "id",
    "org_id",
    "name",
    "scopes",
    "bucket_id",
    "created_at",
    "expires_at",
    "revoked_at",
    "last4",
    "access_key_id",
)
KEY_COLUMNS = ", ".join(KEY_FIELDS)
BUCKET_FIELDS = (
    "id",
    "org_id",
    "name",
    "region",
    "status",
    "status_reason",
    "created_at",
    "max_upload_bytes",
    "allowed_content_types",
    "file_count",
    "size_bytes",
    "location",
    "versioning",
    "object_lock",
    "lifecycle",
    "tags",
    "cors",
    "public",
    "cache_control",
    "shared_name",
    "policy",
    "acl",
    "public_access_block",
    "anonymous_rpm",
    "encryption",
    "object_ownership",
)
BUCKET_COLUMNS = ", ".join(BUCKET_FIELDS)
FILE_FIELDS = tuple(f.name for f in fields(FileRecord) if f.name not in ("location", "inline"))
FILE_COLUMNS = ", ".join(FILE_FIELDS)
UPLOAD_FIELDS = tuple(f.name for f in fields(MultipartUpload))
UPLOAD_COLUMNS = ", ".join(UPLOAD_FIELDS)
PART_FIELDS = tuple(f.name for f in fields(Part))
PART_COLUMNS = ", ".join(PART_FIELDS)


def org_from_row(row: tuple[Any, ...]) -> Organization:
    return Organization(**dict(zip(ORG_FIELDS, row, strict=True)))


def key_from_row(row: tuple[Any, ...]) -> ApiKey:
    values = dict(zip(KEY_FIELDS, row, strict=True))
    values["scopes"] = tuple(values["scopes"].split())
    return ApiKey(**values)


def file_from_row(
    row: tuple[Any, ...], location: str | None = None, inline: Any = None
) -> FileRecord:
    """`inline`: the blob row's `inline_data` read beside the file's row, if it was."""
    values = dict(zip(FILE_FIELDS, row, strict=True))
    values["delete_marker"] = bool(values["delete_marker"])
    values["legal_hold"] = bool(values["legal_hold"])
    if inline is not None:
        values["inline"] = (values["blob_id"], bytes(inline))
    return FileRecord(**values, location=location)


def upload_from_row(row: tuple[Any, ...]) -> MultipartUpload:
    return MultipartUpload(**dict(zip(UPLOAD_FIELDS, row, strict=True)))


def part_from_row(row: tuple[Any, ...]) -> Part:
    return Part(**dict(zip(PART_FIELDS, row, strict=True)))


def bucket_from_row(row: tuple[Any, ...], uploads: UploadSettings) -> Bucket:
    """A bucket; a limit or allow-list of its own is stored, None follows the defaults."""
    values = dict(zip(BUCKET_FIELDS, row, strict=True))
    if values["max_upload_bytes"] is None:
        values["max_upload_bytes"] = uploads.default_max_bytes
    types = values["allowed_content_types"]
    values["allowed_content_types"] = tuple(
        uploads.allowed_content_types if types is None else json.loads(types)
    )
    values["public"] = bool(values["public"])
    return Bucket(**values)


@functools.cache
def _insert_sql(table: str, columns: tuple[str, ...], conflict: tuple[str, ...] = ()) -> str:
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders(len(columns))})"
    if conflict:
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in conflict)
        sql += f" ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {updates}"
    return sql


def upsert(
    table: str, conflict: tuple[str, ...], columns: tuple[str, ...], values: dict[str, Any]
) -> Query:
    """Insert a row, or replace every column but the key of the row it collides with."""
    return run(_insert_sql(table, columns, conflict), *(values[c] for c in columns))


def put_file_row(record: FileRecord) -> Query:
    return run(
        _insert_sql("files", FILE_FIELDS, ("bucket_id", "key")),
        *(getattr(record, f) for f in FILE_FIELDS),
    )


class AttributeColumns(TypedDict):
    content_type: str
    metadata: str | None
    headers: str | None
    tags: str | None
    acl: str | None
    checksum: str | None
    encryption: str | None
    parts: str | None


class UploadAttributeColumns(TypedDict):
    content_type: str
    metadata: str | None
    headers: str | None
    tags: str | None
    acl: str | None
    lock: str | None


def attribute_columns(attrs: Attributes) -> AttributeColumns:
    """The file columns (FileRecord fields) a version's attributes fill: the one mapping
    from `Attributes` to the index (its lock becomes lock_mode, lock_until and legal_hold
    when the version is stamped, `versions.stamped`)."""
    return {
        "content_type": attrs.content_type,
        "metadata": attrs.metadata,
        "headers": attrs.headers,
        "tags": attrs.tags,
        "acl": attrs.acl,
        "checksum": attrs.checksum,
        "encryption": attrs.encryption,
        "parts": attrs.parts,
    }


def upload_columns(attrs: Attributes) -> UploadAttributeColumns:
    """The multipart upload columns its object's attributes fill (its checksum is the
    parts', its algorithm a column of its own)."""
    return {
        "content_type": attrs.content_type,
        "metadata": attrs.metadata,
        "headers": attrs.headers,
        "tags": attrs.tags,
        "acl": attrs.acl,
        "lock": encode_lock(attrs.lock),
    }


def insert(
    table: str, columns: tuple[str, ...], values: dict[str, Any], unique: bool = False
) -> Query:
    """Insert a row; with `unique`, a collision is thrown into the script as `Duplicate`."""
    return run(_insert_sql(table, columns), *(values[c] for c in columns), unique=unique)
