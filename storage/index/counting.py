"""What several transactions share: the bucket check of a file write, the quota check, and
the counters (blob references, bucket and organization usage, parts in flight).

Counters change in the same transaction as the rows they count. Every write that counts
locks the organization's row first (a no-op where the database has one writer), so quotas
stay exact across gateways, and always in the same order (organization, bucket, blobs) to
keep deadlocks rare.
"""

from __future__ import annotations

from typing import NamedTuple

from storage.rules.etags import etag_matches

from ..errors import (
    BucketNotActive,
    BucketNotFound,
    PreconditionFailed,
    PreconditionMissing,
    QuotaExceeded,
    UploadNotFound,
)
from ..models import Condition, FileRecord
from .sql import Release, Script, lock_row, one, run, value


class Target(NamedTuple):
    """The bucket a file write goes to."""

    org_id: str
    versioning: str | None
    object_lock: str | None
    """The bucket's object lock configuration (JSON), or None."""
    name: str
    region: str


def bucket_for_file_write(bucket_id: str) -> Script[Target]:
    """The organization and versioning of an active bucket, with the organization's row
    locked; raises otherwise. Where another writer may have changed the bucket while this
    waited for the lock, it is read again under the lock."""
    query = "SELECT org_id, status, versioning, object_lock, name, region FROM buckets WHERE id = ?"
    row = yield one(query, bucket_id)
    if row is None:
        raise BucketNotFound("bucket not found")
    if (yield lock_row("organizations", row[0])):
        row = yield one(query, bucket_id)
        if row is None:
            raise BucketNotFound("bucket not found")
    org_id, status, versioning, object_lock, name, region = row
    if status != "active":
        raise BucketNotActive(f"the bucket is {status}; files can be written once it is active")
    return Target(str(org_id), versioning, object_lock, name, region)


def check_quota(org_id: str, delta: int, max_storage_bytes: int) -> Script[None]:
    """Refuse growth past the quota, counting uploads reserved but not yet committed, the
    parts of multipart uploads in flight and the contents only snapshots hold."""
    if delta <= 0:
        return
    if (yield from over_quota(org_id, delta, max_storage_bytes)):
        raise QuotaExceeded(
            f"the upload would bring the organization past its {max_storage_bytes}-byte "
            "storage quota"
        )


def over_quota(org_id: str, extra: int, max_storage_bytes: int) -> Script[bool]:
    """Whether the organization's usage (`used_storage`) and `extra` bytes pass its quota.
    What only its snapshots hold is counted exactly only when the sum of its snapshots'
    sizes (a bound, read from their rows alone) could pass it."""
    used = yield from _stored(org_id)
    if used + extra > max_storage_bytes:
        return True
    bound = yield value(
        "SELECT SUM(size_bytes) FROM snapshots WHERE org_id = ? AND parent_id IS NULL", org_id
    )
    if bound is None or used + extra + int(bound) <= max_storage_bytes:
        return False
    held = yield from snapshot_bytes(org_id)
    return used + extra + held > max_storage_bytes


def _stored(org_id: str) -> Script[int]:
    used = yield value(
        "SELECT o.stored_bytes + o.part_bytes + (SELECT COALESCE(SUM(size), 0) "
        "FROM reservations r WHERE r.org_id = o.id) FROM organizations o WHERE o.id = ?",
        org_id,
    )
    return int(used or 0)


def used_storage(org_id: str) -> Script[int]:
    """The bytes the organization's quota counts: its stored versions, the parts of its
    multipart uploads in flight, its uploads reserved but not yet committed, and the
    contents only its snapshots still hold (`snapshot_bytes`)."""
    used = yield from _stored(org_id)
    held = yield from snapshot_bytes(org_id)
    return used + held


CONTENT = "COALESCE(NULLIF({t}.sha256, ''), {t}.blob_id)"
"""What a version's content is, for counting it once: its SHA-256. On the local backend that
is its blob's id; on the S3 backend every snapshot, fork and restore holds copies of its
own (other blob ids) of the same content, which the quota counts once as well."""
SNAPSHOT_ONLY = (
    f"SELECT COALESCE(SUM(h.size), 0) FROM (SELECT {CONTENT.format(t='v')} AS content, "
    "MAX(v.size) AS size FROM snapshot_versions v JOIN snapshots s ON s.id = v.snapshot_id "
    "WHERE s.org_id = ? AND s.parent_id IS NULL AND v.delete_marker = 0 "
    f"GROUP BY {CONTENT.format(t='v')}) AS h WHERE h.content NOT IN "
    f"(SELECT {CONTENT.format(t='f')} FROM files f JOIN buckets b "
    "ON b.id = f.bucket_id WHERE b.org_id = ? AND f.delete_marker = 0 UNION ALL "
    f"SELECT {CONTENT.format(t='f')} FROM versions f JOIN buckets b ON b.id = f.bucket_id "
    "WHERE b.org_id = ? AND f.delete_marker = 0)"
)


def snapshot_bytes(org_id: str) -> Script[int]:
    """The bytes of the contents the organization's snapshots name and none of its buckets'
    versions still name, each distinct content once (server snapshots, the operator's, are
    not the organization's)."""
    holds = yield value(
        "SELECT 1 FROM snapshots WHERE org_id = ? AND parent_id IS NULL LIMIT 1", org_id
    )
    if holds is None:
        return 0
    found = yield value(SNAPSHOT_ONLY, org_id, org_id, org_id)
    return int(found or 0)


def check_condition(current: FileRecord | None, condition: Condition | None) -> None:
    """Raise PreconditionFailed unless the key's current version satisfies `condition` (a
    delete marker is no object); PreconditionMissing when If-Match finds no object."""
    if condition is None:
        return
    if current is not None and current.delete_marker:
        current = None
    if condition.if_none_match_any and current is not None:
        raise PreconditionFailed("an object exists at the key (If-None-Match: *)")
    tags = () if current is None else (current.md5, current.sha256, current.etag)
    if condition.if_none_match is not None and etag_matches(
        condition.if_none_match, tags, weak=True
    ):
        raise PreconditionFailed("the object's ETag matches If-None-Match")
    if condition.if_match is not None:
        if current is None:
            raise PreconditionMissing("there is no object at the key (If-Match)")
        if not etag_matches(condition.if_match, tags, weak=False):
            raise PreconditionFailed("the object's ETag does not match If-Match")


def decref(blob_id: str, count: int) -> Script[None]:
    """Drop references; a blob left with none goes, and is released for reaping."""
    yield run("UPDATE blobs SET refcount = refcount - ? WHERE id = ?", count, blob_id)
    # Not UPDATE ... RETURNING: SQLite 3.40 returns a wrong `inline_data IS NULL` from it on
    # a WITHOUT ROWID table.
    row = yield one("SELECT refcount, inline_data IS NULL FROM blobs WHERE id = ?", blob_id)
    if row is not None and row[0] <= 0:
        yield run("DELETE FROM blobs WHERE id = ?", blob_id)
        yield Release(blob_id, bool(row[1]))


def count_change(bucket_id: str, org_id: str, files: int, size: int) -> Script[None]:
    yield run(
        "UPDATE buckets SET file_count = file_count + ?, size_bytes = size_bytes + ? WHERE id = ?",
        files,
        size,
        bucket_id,
    )
    yield run(
        "UPDATE organizations SET file_count = file_count + ?, stored_bytes = stored_bytes + ? "
        "WHERE id = ?",
        files,
        size,
        org_id,
    )


def upload_bytes(upload_id: str) -> Script[int]:
    """The bytes of an upload's parts; UploadNotFound when it was completed or aborted."""
    exists = yield value("SELECT 1 FROM multipart_uploads WHERE upload_id = ?", upload_id)
    if exists is None:
        raise UploadNotFound("the multipart upload does not exist (completed or aborted)")
    total = yield value(
        "SELECT COALESCE(SUM(size), 0) FROM multipart_parts WHERE upload_id = ?", upload_id
    )
    return int(total)


def drop_upload(upload_id: str, org_id: str | None, freed: int) -> Script[None]:
    """Remove an upload and its parts, and their bytes from the organization's count."""
    yield run("DELETE FROM multipart_parts WHERE upload_id = ?", upload_id)
    yield run("DELETE FROM multipart_uploads WHERE upload_id = ?", upload_id)
    if org_id is not None and freed:
        yield run(
            "UPDATE organizations SET part_bytes = part_bytes - ? WHERE id = ?", freed, org_id
        )
