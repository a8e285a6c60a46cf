"""Versions of a key: making room for a new current version, delete markers, reading a
version, deleting one for good (listing them is `version_listing.py`).

`files` holds each key's current version (content or delete marker), `versions` the
noncurrent ones. In a bucket whose versioning was never enabled nothing changes: a write
replaces the current file. Enabled, a write moves the current version to `versions`;
suspended, the new version is the "null" one, and replaces any earlier null version.
Every stored version counts in the bucket's and organization's usage; markers hold nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from msgspec import UnsetType

from storage.rules import object_lock
from storage.rules.acl import shares
from storage.rules.clock import iso_to_unix
from storage.rules.ids import NULL_VERSION as NULL
from storage.rules.object_lock import Lock, Retention

from ..errors import AccessDenied, DeleteMarker, FileNotFound, LockNotEnabled, ObjectLocked
from ..models import FileRecord
from .buckets import check_grants, reserve_name
from .counting import Target, count_change, decref
from .rows import FILE_COLUMNS, FILE_FIELDS, file_from_row, put_file_row
from .sql import Fault, Script, one, point, run, value, write

VERSION_COLUMNS = ", ".join(FILE_FIELDS)


@dataclass(frozen=True, kw_only=True)
class Room:
    """What making room for a new current version took away."""

    current: FileRecord | None
    """The version that was current (now noncurrent, or gone)."""
    freed_files: int = 0
    freed_bytes: int = 0


def current(bucket_id: str, key: str) -> Script[FileRecord | None]:
    row = yield one(
        f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = ? AND key = ?", bucket_id, key
    )
    return None if row is None else file_from_row(row)


def _forget(record: FileRecord) -> Script[tuple[int, int]]:
    """Drop a version's content reference; (files, bytes) it counted."""
    if record.delete_marker:
        return 0, 0
    yield from decref(record.blob_id, 1)
    return 1, record.size


def _to_noncurrent(record: FileRecord) -> Any:
    values = {f: getattr(record, f) for f in FILE_FIELDS}
    values["version_id"] = record.version_id or NULL
    values["order_key"] = record.order_key or "0"
    values["delete_marker"] = int(record.delete_marker)
    return run(
        f"INSERT INTO versions ({VERSION_COLUMNS}) VALUES ({', '.join('?' * len(FILE_FIELDS))})",
        *(values[f] for f in FILE_FIELDS),
    )


def make_room(bucket_id: str, key: str, versioning: str | None) -> Script[Room]:
    """Prepare `key` for a new current version (the caller writes it next)."""
    old = yield from current(bucket_id, key)
    if versioning is None:
        if old is None:
            return Room(current=None)
        files, size = yield from _forget(old)
        return Room(current=old, freed_files=files, freed_bytes=size)
    files = size = 0
    if old is not None:
        if old.version_id is None and versioning == "Suspended":
            files, size = yield from _forget(old)
        else:
            yield _to_noncurrent(old)
        yield run("DELETE FROM files WHERE bucket_id = ? AND key = ?", bucket_id, key)
    if versioning == "Suspended":  # the new version is the null one: an older null goes
        row = yield one(
            f"SELECT {VERSION_COLUMNS} FROM versions "
            "WHERE bucket_id = ? AND key = ? AND version_id = ?",
            bucket_id,
            key,
            NULL,
        )
        if row is not None:
            more_files, more_bytes = yield from _forget(_noncurrent(row))
            files, size = files + more_files, size + more_bytes
            yield run(
                "DELETE FROM versions WHERE bucket_id = ? AND key = ? AND version_id = ?",
                bucket_id,
                key,
                NULL,
            )
    return Room(current=old, freed_files=files, freed_bytes=size)


def bytes_a_write_frees(
    bucket_id: str, key: str, versioning: str | None, old: FileRecord | None
) -> Script[int]:
    """The bytes `make_room` would free for a new version of `key`, whose current version is
    `old` (read only: what a reservation may count on)."""
    if versioning is None:
        return 0 if old is None or old.delete_marker else old.size
    if versioning == "Enabled":
        return 0
    freed = 0 if old is None or old.version_id is not None else old.size
    null = yield value(
        "SELECT size FROM versions WHERE bucket_id = ? AND key = ? AND version_id = ? "
        "AND delete_marker = 0",
        bucket_id,
        key,
        NULL,
    )
    return freed + (null or 0)


def _noncurrent(row: tuple[Any, ...]) -> FileRecord:
    record = file_from_row(row)
    return replace(record, version_id=None if record.version_id == NULL else record.version_id)


def stamped(
    record: FileRecord,
    version: str,
    bucket: Target,
    lock: Lock | None = None,
    at: str | None = None,
) -> FileRecord:
    """A new current version: ordered by `version` (a ULID), named by it when versioning is
    enabled, the null version otherwise; with the retention and legal hold the write asked
    for (`lock`), else the bucket's default retention counted from `at` (its upload)."""
    version_id = version if bucket.versioning == "Enabled" and version else None
    given = object_lock.for_new_version(
        lock, bucket.object_lock, iso_to_unix(at or record.uploaded_at)
    )
    retention = given.retention
    return replace(
        record,
        version_id=version_id,
        order_key=version or None,
        lock_mode=None if retention is None else retention.mode,
        lock_until=None if retention is None else retention.until,
        legal_hold=given.legal_hold,
    )


def put_marker(
    bucket_id: str, key: str, version_id: str | None, order_key: str, at: str
) -> Script[FileRecord]:
    marker = FileRecord(
        bucket_id=bucket_id,
        key=key,
        size=0,
        content_type="",
        uploaded_at=at,
        sha256="",
        blob_id="",
        version_id=version_id,
        order_key=order_key,
        delete_marker=True,
    )
    yield put_file_row(marker)
    return marker


def _older(bucket_id: str, key: str, version_id: str | None) -> Script[FileRecord | None]:
    """A noncurrent version of `key` (None: the null one)."""
    row = yield one(
        f"SELECT {VERSION_COLUMNS} FROM versions "
        "WHERE bucket_id = ? AND key = ? AND version_id = ?",
        bucket_id,
        key,
        version_id or NULL,
    )
    return None if row is None else _noncurrent(row)


@point
def get_version(bucket_id: str, key: str, version_id: str | None) -> Script[FileRecord | None]:
    """A version of `key` (None: the null version), current or not, with its bucket's
    location (where a backend keeps it)."""
    found = yield from current(bucket_id, key)
    if found is None or found.version_id != version_id:
        found = yield from _older(bucket_id, key, version_id)
    if found is None:
        return None
    location = yield value("SELECT location FROM buckets WHERE id = ?", bucket_id)
    return replace(found, location=location)


def _check_removable(record: FileRecord, at: float, bypass: bool) -> None:
    reason = object_lock.why_protected(
        record.lock_mode, record.lock_until, record.legal_hold, at, bypass
    )
    if reason is not None:
        raise ObjectLocked(reason)


def remove_version(
    bucket_id: str, key: str, version_id: str | None, org_id: str, at: float, bypass: bool
) -> Script[FileRecord]:
    """Delete a version for good (ObjectLocked while its retention or legal hold protects it
    at `at`); when it was current, the newest noncurrent one (content or marker) becomes
    current."""
    now = yield from current(bucket_id, key)
    if now is not None and now.version_id == version_id:
        _check_removable(now, at, bypass)
        yield run("DELETE FROM files WHERE bucket_id = ? AND key = ?", bucket_id, key)
        files, size = yield from _forget(now)
        yield from count_change(bucket_id, org_id, -files, -size)
        newest = yield one(
            f"SELECT {VERSION_COLUMNS} FROM versions WHERE bucket_id = ? AND key = ? "
            "ORDER BY order_key DESC LIMIT 1",
            bucket_id,
            key,
        )
        if newest is not None:
            promoted = _noncurrent(newest)
            yield run(
                "DELETE FROM versions WHERE bucket_id = ? AND key = ? AND version_id = ?",
                bucket_id,
                key,
                promoted.version_id or NULL,
            )
            yield put_file_row(promoted)
        yield Fault("version.in_commit")
        return now
    gone = yield from _older(bucket_id, key, version_id)
    if gone is None:
        raise FileNotFound("no such version of the file")
    _check_removable(gone, at, bypass)
    yield run(
        "DELETE FROM versions WHERE bucket_id = ? AND key = ? AND version_id = ?",
        bucket_id,
        key,
        version_id or NULL,
    )
    files, size = yield from _forget(gone)
    yield from count_change(bucket_id, org_id, -files, -size)
    yield Fault("version.in_commit")
    return gone


@write
def set_protection(
    bucket_id: str,
    key: str,
    version_id: str | None,
    retention: Retention | UnsetType | None,
    legal_hold: bool | UnsetType,
    at: float,
    bypass: bool,
) -> Script[tuple[FileRecord, bool]]:
    """Change a version's retention (None removes it) and/or legal hold, as S3's
    PutObjectRetention and PutObjectLegalHold do: only under object lock, never weakening a
    retention still running (GOVERNANCE: unless `bypass`). The version, and whether it is
    the current one."""
    configured = yield value("SELECT object_lock FROM buckets WHERE id = ?", bucket_id)
    if configured is None:
        raise LockNotEnabled("the bucket does not have object lock enabled")
    record = yield from get_version(bucket_id, key, version_id)
    if record is None:
        raise FileNotFound("no such version of the file")
    if record.delete_marker:
        raise DeleteMarker("a delete marker has no retention", version_id, specific=True)
    changed = record
    if not isinstance(retention, UnsetType):
        object_lock.check_retention_change(
            record.lock_mode, record.lock_until, retention, at, bypass
        )
        changed = replace(
            changed,
            lock_mode=None if retention is None else retention.mode,
            lock_until=None if retention is None else retention.until,
        )
    if not isinstance(legal_hold, UnsetType):
        changed = replace(changed, legal_hold=legal_hold)
    latest = yield from current(bucket_id, key)
    table = "files" if latest is not None and latest.version_id == version_id else "versions"
    where = "bucket_id = ? AND key = ?" + ("" if table == "files" else " AND version_id = ?")
    ids = (bucket_id, key) if table == "files" else (bucket_id, key, version_id or NULL)
    yield run(
        f"UPDATE {table} SET lock_mode = ?, lock_until = ?, legal_hold = ? WHERE {where}",
        changed.lock_mode,
        changed.lock_until,
        int(changed.legal_hold),
        *ids,
    )
    return changed, table == "files"


Attribute = Literal["tags", "acl"]
"""The columns of a version that change in place (neither is part of its content)."""


@write
def set_attribute(
    bucket_id: str,
    key: str,
    version_id: str | None,
    column: Attribute,
    value: str | None,
    judged: FileRecord | None = None,
    grants: tuple[str | None, ...] | None = None,
) -> Script[tuple[FileRecord, bool]]:
    """Replace a version's tags or ACL (None: none, private); the version and whether it
    is current. `judged`: the version the access decision allowed this on (`Actor.judged`);
    AccessDenied when the version found is another (a write replaced it since), or when
    the bucket's grants are no longer `grants`, those the decision read (`check_grants`)."""
    yield from check_grants(bucket_id, grants)
    record = yield from get_version(bucket_id, key, version_id)
    if record is None:
        raise FileNotFound("no such version of the file")
    if judged is not None and not judged.same_version(record):
        raise AccessDenied("Access Denied")
    if record.delete_marker:
        raise DeleteMarker(f"a delete marker has no {column}", version_id, specific=True)
    latest = yield from current(bucket_id, key)
    is_current = latest is not None and latest.version_id == version_id
    if is_current:
        yield run(
            f"UPDATE files SET {column} = ? WHERE bucket_id = ? AND key = ?", value, bucket_id, key
        )
    else:
        yield run(
            f"UPDATE versions SET {column} = ? WHERE bucket_id = ? AND key = ? AND version_id = ?",
            value,
            bucket_id,
            key,
            version_id or NULL,
        )
    if column == "acl" and shares(value):  # the version's row, then the bucket's
        yield from reserve_name(bucket_id)  # a public object names its bucket for good
    changed = replace(record, tags=value) if column == "tags" else replace(record, acl=value)
    return changed, is_current
