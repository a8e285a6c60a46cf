"""Transactions on files: commit, copy, rename, delete and listings (the counters they
keep are `counting.py`'s; reservations of S3 writes are `reservations.py`'s)."""

from __future__ import annotations

from dataclasses import replace

from storage.backends.s3.names import version_of
from storage.rules import events
from storage.rules.acl import shares

from ..attributes import Attributes
from ..errors import Conflict, FileExists, FileNotFound, PreconditionFailed, WriteSettled
from ..models import Condition, DeleteCondition, FileRecord, Page, StoredBlob
from . import versions
from .buckets import reserve_name
from .counting import (
    Target,
    bucket_for_file_write,
    check_condition,
    check_quota,
    count_change,
    decref,
    drop_upload,
    upload_bytes,
)
from .events import emit
from .leases import release_object
from .listing import paginate
from .rows import FILE_COLUMNS, attribute_columns, file_from_row, put_file_row
from .sql import Fault, Release, Script, one, point, read, rows, run, value, write


@point
def get_file(bucket_id: str, key: str) -> Script[FileRecord | None]:
    """The key's current record, with its bucket's location and, when the content is kept
    in the index, that content (`FileRecord.inline`): what a GET needs, in one read."""
    row = yield one(
        f"SELECT {FILE_COLUMNS}, (SELECT location FROM buckets WHERE id = bucket_id), "
        "(SELECT inline_data FROM blobs WHERE id = files.blob_id) "
        "FROM files WHERE bucket_id = ? AND key = ?",
        bucket_id,
        key,
    )
    return None if row is None else file_from_row(row[:-2], row[-2], row[-1])


@point
def file_size(bucket_id: str, key: str) -> Script[int | None]:
    size = yield value("SELECT size FROM files WHERE bucket_id = ? AND key = ?", bucket_id, key)
    return None if size is None else int(size)


@point
def read_inline(blob_id: str) -> Script[bytes | None]:
    data = yield value("SELECT inline_data FROM blobs WHERE id = ?", blob_id)
    return None if data is None else bytes(data)


@write
def commit_file(
    bucket_id: str,
    key: str,
    blob: StoredBlob,
    attrs: Attributes,
    uploaded_at: str,
    max_storage_bytes: int,
    reservation: str | None = None,
    condition: Condition | None = None,
    upload_id: str | None = None,
    version: str = "",
    event: str = events.PUT,
) -> Script[FileRecord]:
    """Point the key at the blob, as its new current version carrying `attrs` (`version`,
    a ULID, orders it, and names it where versioning is enabled). With a reservation, its
    quota was checked already and the reservation is dropped in the same transaction. A
    `condition` that does not hold raises PreconditionFailed and changes nothing. With
    `upload_id`, the multipart upload this completes goes in the same transaction
    (UploadNotFound, and nothing changes, when it was aborted meanwhile); its parts' bytes
    become the file's."""
    record = FileRecord(
        bucket_id=bucket_id,
        key=key,
        size=blob.file_size,
        uploaded_at=uploaded_at,
        sha256=blob.sha256,
        blob_id=blob.blob_id,
        backend_etag=blob.backend_etag,
        md5=blob.md5,
        object_key=blob.object_key,
        **attribute_columns(attrs),
    )
    bucket = yield from bucket_for_file_write(record.bucket_id)
    if version_of(blob.object_key) and bucket.versioning != "Enabled":
        raise Conflict("the bucket's versioning changed while the file was written; retry")
    now = yield from versions.current(record.bucket_id, record.key)
    check_condition(now, condition)
    freed = 0 if upload_id is None else (yield from upload_bytes(upload_id))
    room = yield from versions.make_room(record.bucket_id, record.key, bucket.versioning)
    growth = record.size - room.freed_bytes
    if reservation is None:
        yield from check_quota(bucket.org_id, growth - freed, max_storage_bytes)
    else:
        settled = yield run("DELETE FROM reservations WHERE token = ?", reservation)
        if not settled:  # another gateway settled it once its lease lapsed
            raise WriteSettled("the write was settled by another gateway; look the key up")
        yield from release_object(record.bucket_id, record.key, reservation)
    if upload_id is not None:
        yield from drop_upload(upload_id, bucket.org_id, freed)
    if blob.inline is None and blob.blob_id == blob.sha256:
        # A content-addressed blob file (local disk; an S3 object's id is its own) whose
        # content may be kept inline already, written under a higher limit than today's:
        # it stays there, and the file just written for it is reaped.
        kept_inline = yield value(
            "SELECT inline_data IS NOT NULL FROM blobs WHERE id = ?", record.blob_id
        )
        if kept_inline:
            yield Release(record.blob_id, True)
    yield run(
        "INSERT INTO blobs (id, size, refcount, inline_data) VALUES (?, ?, 1, ?) "
        "ON CONFLICT (id) DO UPDATE SET refcount = blobs.refcount + 1",
        record.blob_id,
        blob.size,
        blob.inline,
    )
    record = versions.stamped(record, version, bucket, attrs.lock)
    yield put_file_row(record)
    if shares(attrs.acl):  # the file's rows, then the bucket's (as every writer): no deadlock
        yield from reserve_name(bucket_id)  # SharedNameTaken: nothing is committed
    yield from count_change(record.bucket_id, bucket.org_id, 1 - room.freed_files, growth)
    yield from emit(bucket, record, event)
    yield Fault("put.in_commit")
    return record


@write
def copy_file(
    source: FileRecord,
    bucket_id: str,
    key: str,
    attrs: Attributes,
    uploaded_at: str,
    max_storage_bytes: int,
    condition: Condition | None = None,
    version: str = "",
) -> Script[FileRecord]:
    """Point `key` at the blob `source` (a version of a file) names, as a new current
    version carrying `attrs` (`attributes.copied`): a copy that shares the content, for
    content-addressed backends; the source's MD5 and checksum come along."""
    target = replace(
        source,
        bucket_id=bucket_id,
        key=key,
        uploaded_at=uploaded_at,
        backend_etag=None,
        location=None,
        delete_marker=False,
        **attribute_columns(attrs),
    )
    bucket = yield from bucket_for_file_write(target.bucket_id)
    found = yield from versions.get_version(source.bucket_id, source.key, source.version_id)
    if found is None or found.blob_id != source.blob_id or found.delete_marker:
        raise FileNotFound("the source file changed or is gone")
    now = yield from versions.current(target.bucket_id, target.key)
    check_condition(now, condition)
    # The new reference first: a copy onto its own key must not free the blob it shares.
    yield run("UPDATE blobs SET refcount = refcount + 1 WHERE id = ?", source.blob_id)
    room = yield from versions.make_room(target.bucket_id, target.key, bucket.versioning)
    growth = source.size - room.freed_bytes
    yield from check_quota(bucket.org_id, growth, max_storage_bytes)
    record = versions.stamped(
        replace(target, md5=found.md5, checksum=found.checksum, parts=found.parts),
        version,
        bucket,
        attrs.lock,
    )
    yield put_file_row(record)
    if shares(attrs.acl):
        yield from reserve_name(bucket_id)
    yield from count_change(target.bucket_id, bucket.org_id, 1 - room.freed_files, growth)
    yield from emit(bucket, record, events.COPY)
    yield Fault("copy.in_commit")
    return record


@write
def set_md5(bucket_id: str, key: str, blob_id: str, md5: str) -> Script[None]:
    """Record a file's MD5, computed after the fact, if the key still names that blob."""
    yield run(
        "UPDATE files SET md5 = ? WHERE bucket_id = ? AND key = ? AND blob_id = ?",
        md5,
        bucket_id,
        key,
        blob_id,
    )


@read
def list_files(
    bucket_id: str, prefix: str, delimiter: str, after: str | None, limit: int
) -> Script[Page[FileRecord]]:
    listing = paginate(prefix, delimiter, after, limit)
    try:
        wanted = next(listing)
        while True:
            condition, args = wanted.where()
            found = yield rows(
                f"SELECT {FILE_COLUMNS} FROM files WHERE bucket_id = ? AND {condition} "
                "AND delete_marker = 0 ORDER BY key LIMIT ?",
                bucket_id,
                *args,
                wanted.need,
            )
            wanted = listing.send([file_from_row(row) for row in found])
    except StopIteration as done:
        page: Page[FileRecord] = done.value
        return page


@write
def update_file(
    bucket_id: str,
    key: str,
    new_key: str | None,
    content_type: str | None,
    moved_blob: StoredBlob | None = None,
    version: str = "",
    at: str = "",
) -> Script[FileRecord]:
    """Rename and/or retype; `moved_blob` replaces the blob (a backend that copied). In a
    versioned bucket a rename is what S3 would make of it: the content becomes a new version
    at `new_key` and a delete marker the current version at `key`, history kept."""
    bucket = yield from bucket_for_file_write(bucket_id)
    record = yield from versions.current(bucket_id, key)
    if record is None or record.delete_marker:
        raise FileNotFound("file not found")
    left = record
    changed = moved_blob is not None or content_type is not None
    if new_key is not None and new_key != key:
        changed = True
        taken = yield from versions.current(bucket_id, new_key)
        if taken is not None and not taken.delete_marker:
            raise FileExists("a file with that key already exists")
        if bucket.versioning is None:
            yield run(
                "UPDATE files SET key = ? WHERE bucket_id = ? AND key = ?", new_key, bucket_id, key
            )
            record = replace(record, key=new_key)
        else:
            record, left = yield from _renamed(record, new_key, bucket, version, at)
        yield from emit(bucket, left, events.removal("ObjectRemoved", left.delete_marker))
    if moved_blob is not None:
        yield run(
            "INSERT INTO blobs (id, size, refcount) VALUES (?, ?, 1)",
            moved_blob.blob_id,
            moved_blob.size,
        )
        yield run(
            "UPDATE files SET blob_id = ?, backend_etag = ?, object_key = ? "
            "WHERE bucket_id = ? AND key = ?",
            moved_blob.blob_id,
            moved_blob.backend_etag,
            moved_blob.object_key,
            bucket_id,
            record.key,
        )
        yield from decref(record.blob_id, 1)
        record = replace(
            record,
            blob_id=moved_blob.blob_id,
            backend_etag=moved_blob.backend_etag,
            object_key=moved_blob.object_key,
        )
    if content_type is not None:
        yield run(
            "UPDATE files SET content_type = ? WHERE bucket_id = ? AND key = ?",
            content_type,
            bucket_id,
            record.key,
        )
        record = replace(record, content_type=content_type)
    if changed:
        yield from emit(bucket, record, events.COPY)
    return record


def _renamed(
    record: FileRecord, new_key: str, bucket: Target, version: str, at: str
) -> Script[tuple[FileRecord, FileRecord]]:
    """(the version at `new_key`, the delete marker left at the old key)."""
    arrived = yield from versions.make_room(record.bucket_id, new_key, bucket.versioning)
    yield run("UPDATE blobs SET refcount = refcount + 1 WHERE id = ?", record.blob_id)
    moved = versions.stamped(replace(record, key=new_key), version, bucket, at=at)
    yield put_file_row(moved)
    left = yield from versions.make_room(record.bucket_id, record.key, bucket.versioning)
    marker_id = version if bucket.versioning == "Enabled" else None
    marker = yield from versions.put_marker(record.bucket_id, record.key, marker_id, version, at)
    files = 1 - arrived.freed_files - left.freed_files
    size = record.size - arrived.freed_bytes - left.freed_bytes
    yield from count_change(record.bucket_id, bucket.org_id, files, size)
    return moved, marker


@write
def delete_file(
    bucket_id: str,
    key: str,
    version: str = "",
    at: str = "",
    must_exist: bool = True,
    condition: DeleteCondition | None = None,
    cause: events.Cause = "ObjectRemoved",
) -> Script[FileRecord]:
    """Delete the current version of `key`: gone for good where versioning was never
    enabled; otherwise a delete marker (`version` names it) becomes current, and every
    version stays. What was deleted, or the marker, is returned; with `must_exist`, a key
    with no current content is FileNotFound (S3 makes a marker anyway). With a
    `condition` (a conditional delete, or the version a lifecycle rule judged), no current
    content is FileNotFound, and a current version that does not satisfy it
    PreconditionFailed: checked here, so that of a delete and a write racing, exactly one
    wins."""
    bucket = yield from bucket_for_file_write(bucket_id)
    now = yield from versions.current(bucket_id, key)
    absent = now is None or now.delete_marker
    if absent and (bucket.versioning is None or must_exist or condition is not None):
        raise FileNotFound("file not found")
    if condition is not None and now is not None and not condition.holds(now):
        raise PreconditionFailed("the object does not satisfy the delete's condition")
    if bucket.versioning is None:
        assert now is not None
        yield run("DELETE FROM files WHERE bucket_id = ? AND key = ?", bucket_id, key)
        yield from decref(now.blob_id, 1)
        yield from count_change(bucket_id, bucket.org_id, -1, -now.size)
        yield from emit(bucket, now, events.removal(cause, False))
        yield Fault("delete.in_commit")
        return now
    room = yield from versions.make_room(bucket_id, key, bucket.versioning)
    marker_id = version if bucket.versioning == "Enabled" else None
    marker = yield from versions.put_marker(bucket_id, key, marker_id, version, at)
    yield from count_change(bucket_id, bucket.org_id, -room.freed_files, -room.freed_bytes)
    yield from emit(bucket, marker, events.removal(cause, True))
    yield Fault("delete.in_commit")
    return marker


@write
def delete_version(
    bucket_id: str,
    key: str,
    version_id: str | None,
    at: float,
    bypass: bool = False,
    cause: events.Cause = "ObjectRemoved",
) -> Script[FileRecord]:
    """Delete one version of `key` for good (None: the null version), unless object lock
    protects it at `at` (`bypass`: bypassing GOVERNANCE retention)."""
    bucket = yield from bucket_for_file_write(bucket_id)
    gone = yield from versions.remove_version(bucket_id, key, version_id, bucket.org_id, at, bypass)
    yield from emit(bucket, gone, events.removal(cause, False))
    return gone
