"""Transactions on buckets: create, read, change, provisioning leases, delete."""

from __future__ import annotations

import json
from typing import TypedDict

from storage.rules.ownership import check_bucket_acl
from storage.rules.policy import parse_policy

from ..config import UploadSettings
from ..errors import (
    AccessDenied,
    BucketNameTaken,
    BucketNotEmpty,
    BucketNotFound,
    BucketProvisioning,
    InvalidBucketState,
    ObjectLocked,
    QuotaExceeded,
    SharedNameTaken,
)
from ..models import VERSIONING, Bucket
from .accounts import page_query
from .counting import decref
from .rows import BUCKET_COLUMNS, bucket_from_row, insert
from .sql import Duplicate, Script, lock_row, one, point, read, rows, run, value, write

INSERTED = (
    "id",
    "org_id",
    "name",
    "region",
    "status",
    "created_at",
    "max_upload_bytes",
    "allowed_content_types",
    "location",
    "versioning",
    "object_lock",
    "lifecycle",
    "encryption",
    "cors",
    "public",
    "cache_control",
    "shared_name",
    "acl",
    "anonymous_rpm",
    "object_ownership",
)


class BucketChanges(TypedDict, total=False):
    """Columns a PATCH may change; a None limit or allow-list means "back to the default"."""

    name: str
    max_upload_bytes: int | None
    allowed_content_types: tuple[str, ...] | None
    versioning: str
    object_lock: str
    """The object lock configuration, as JSON: enables object lock (for good)."""
    lifecycle: str | None
    """The lifecycle rules, as JSON; None removes them."""
    tags: str | None
    """The bucket's tags, as JSON; None removes them."""
    cors: str | None
    """The CORS rules, as JSON; None removes them."""
    public: bool
    cache_control: str | None
    policy: str | None
    acl: str | None
    public_access_block: str | None
    anonymous_rpm: int | None
    """None: the server's rate."""
    encryption: str | None
    """The default encryption (AES256); None removes it."""
    object_ownership: str | None
    """S3's object ownership; None removes it."""


def _types_column(types: tuple[str, ...] | None) -> str | None:
    return None if types is None else json.dumps(list(types))


@write
def insert_bucket(
    bucket: Bucket,
    max_buckets: int,
    own_max_upload_bytes: int | None,
    own_allowed_content_types: tuple[str, ...] | None,
) -> Script[None]:
    """Insert unless the organization holds `max_buckets` already; None limits follow the
    configured defaults."""
    count = yield value(
        "SELECT bucket_count FROM organizations WHERE id = ?", bucket.org_id, lock="update"
    )
    if count >= max_buckets:
        raise QuotaExceeded(f"the plan allows at most {max_buckets} buckets")
    values = {c: getattr(bucket, c) for c in INSERTED}
    values.update(
        max_upload_bytes=own_max_upload_bytes,
        allowed_content_types=_types_column(own_allowed_content_types),
        public=int(bucket.public),
    )
    if bucket.shared_name is not None:
        holder = yield value("SELECT org_id FROM buckets WHERE shared_name = ?", bucket.shared_name)
        if holder is not None and holder != bucket.org_id:
            raise SharedNameTaken(
                f"a bucket named {bucket.name!r} already exists (here, or public on this server)"
            )
    try:
        yield insert("buckets", INSERTED, values, unique=True)
    except Duplicate:
        shared = " (here, or public on this server)" if bucket.shared_name else ""
        raise BucketNameTaken(f"a bucket named {bucket.name!r} already exists{shared}") from None
    yield run(
        "UPDATE organizations SET bucket_count = bucket_count + 1 WHERE id = ?", bucket.org_id
    )


@point
def get_bucket(bucket_id: str, uploads: UploadSettings) -> Script[Bucket | None]:
    row = yield one(f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE id = ?", bucket_id)
    return None if row is None else bucket_from_row(row, uploads)


@point
def get_bucket_by_name(org_id: str, name: str, uploads: UploadSettings) -> Script[Bucket | None]:
    row = yield one(
        f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE org_id = ? AND name = ?", org_id, name
    )
    return None if row is None else bucket_from_row(row, uploads)


@point
def list_buckets(
    org_id: str, only_id: str | None, after: str | None, limit: int, uploads: UploadSettings
) -> Script[list[Bucket]]:
    sql, args = page_query("buckets", BUCKET_COLUMNS, org_id, after, limit, id=only_id)
    found = yield rows(sql, *args)
    return [bucket_from_row(row, uploads) for row in found]


GRANT_COLUMNS = ("acl", "policy", "public_access_block", "object_ownership")
"""What grants outsiders anything on a bucket and its objects (and the owner's keys, under a
policy's Deny): a change decided on them lands only while they stand (`judged_grants`)."""


def judged_grants(bucket: Bucket | None, bucket_id: str) -> tuple[str | None, ...] | None:
    """The grants of `bucket_id` as the access decision read them (`Actor.decided`), or None
    when no decision read that bucket."""
    if bucket is None or bucket.id != bucket_id:
        return None
    return tuple(getattr(bucket, column) for column in GRANT_COLUMNS)


@point
def check_grants(bucket_id: str, judged: tuple[str | None, ...] | None) -> Script[None]:
    """AccessDenied when the bucket's grants are no longer those `judged` (a grant revoked
    while the request held its body back no longer lets it through)."""
    if judged is None:
        return
    found = yield one(f"SELECT {', '.join(GRANT_COLUMNS)} FROM buckets WHERE id = ?", bucket_id)
    if found is not None and tuple(found) != judged:
        raise AccessDenied("Access Denied")


@write
def update_bucket(
    bucket_id: str, changes: BucketChanges, judged: tuple[str | None, ...] | None = None
) -> Script[None]:
    """Apply checked changes. `judged`: the bucket's grants as the access decision of an
    ACL change read them (`judged_grants`); AccessDenied when they changed since."""
    columns: dict[str, object] = dict(changes)
    if "allowed_content_types" in changes:
        columns["allowed_content_types"] = _types_column(changes["allowed_content_types"])
    if "public" in changes:
        columns["public"] = int(changes["public"])
    if not columns:
        return
    if "name" in changes or "policy" in changes:  # in the transaction: a race cannot pass
        found = yield one("SELECT name, policy FROM buckets WHERE id = ?", bucket_id)
        if found is not None:
            renamed = "name" in changes and changes["name"] != found[0]
            if renamed and changes.get("policy", found[1]) is not None:
                raise InvalidBucketState(
                    "a bucket with a policy keeps its name: its policy names it"
                )
            if changes.get("policy") is not None:  # checked against the name it has now
                parse_policy(str(changes["policy"]), found[0])
    if "acl" in changes or "object_ownership" in changes:  # locked: the other cannot race
        grants = ", ".join(GRANT_COLUMNS)
        sql = f"SELECT acl, object_ownership, {grants} FROM buckets WHERE id = ?"
        found = yield one(sql, bucket_id, lock="update")
        if found is not None and judged is not None and tuple(found[2:]) != judged:
            raise AccessDenied("Access Denied")
        if found is not None:
            check_bucket_acl(
                changes.get("object_ownership", found[1]), changes.get("acl", found[0])
            )
    if "versioning" in changes or "object_lock" in changes:
        found = yield one("SELECT versioning, object_lock FROM buckets WHERE id = ?", bucket_id)
        if found is None:
            raise BucketNotFound("bucket not found")
        versioning = changes.get("versioning", found[0])
        if versioning != "Enabled" and changes.get("object_lock", found[1]) is not None:
            raise InvalidBucketState(
                "object lock needs versioning enabled, and keeps it enabled for good"
            )
    assignments = ", ".join(f"{column} = ?" for column in columns)
    try:
        changed = yield run(
            f"UPDATE buckets SET {assignments} WHERE id = ?",
            *columns.values(),
            bucket_id,
            unique=True,
        )
    except Duplicate:
        raise BucketNameTaken(f"a bucket named {changes['name']!r} already exists") from None
    if changed == 0:
        raise BucketNotFound("bucket not found")
    if SHARING.intersection(columns):
        yield from share(bucket_id)


SHARING = frozenset({"name", "cors", "public", "policy", "acl"})
"""The columns that decide whether a bucket answers requests from outside its organization."""


def share(bucket_id: str) -> Script[None]:
    """Reserve the bucket's name across the server the first time it answers requests from
    outside its organization, and keep it reserved: a bucket that stops sharing keeps its
    name (the URLs that reached it must never reach another organization's bucket); a
    renamed one moves its reservation to the new name, freeing the old."""
    name, shared_name, *sharing = yield one(
        "SELECT name, shared_name, cors, public, policy, acl FROM buckets WHERE id = ?", bucket_id
    )
    if shared_name != name and (shared_name is not None or any(sharing)):
        yield from _hold(bucket_id, name)


@write
def reserve_name(bucket_id: str) -> Script[None]:
    """Reserve the bucket's name across the server (as `share` does) for good: what an
    object's public ACL does, in the transaction that sets it (a request from outside the
    organization names the object's bucket by its name alone). SharedNameTaken when another
    organization's bucket holds the name; nothing to do when this one does."""
    row = yield one("SELECT name, shared_name FROM buckets WHERE id = ?", bucket_id)
    if row is not None and row[1] is None:
        yield from _hold(bucket_id, row[0])


def _hold(bucket_id: str, name: str) -> Script[None]:
    try:
        yield run("UPDATE buckets SET shared_name = name WHERE id = ?", bucket_id, unique=True)
    except Duplicate:
        raise SharedNameTaken(
            f"another organization's bucket holds the name {name!r} on this server (it "
            "shares, or once shared, something beyond its organization): a bucket reached "
            "from outside its organization needs a name of its own here"
        ) from None


@point
def get_shared_bucket(name: str, uploads: UploadSettings) -> Script[Bucket | None]:
    """The bucket a request from outside its organization means by `name`: the one holding
    the name across the server, if any (never a bucket that merely bears the name)."""
    row = yield one(f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE shared_name = ?", name)
    return None if row is None else bucket_from_row(row, uploads)


@read
def lifecycle_buckets() -> Script[list[tuple[str, str]]]:
    """(id, lifecycle rules as JSON) of every active bucket with rules."""
    found = yield rows(
        "SELECT id, lifecycle FROM buckets WHERE lifecycle IS NOT NULL AND status = 'active' "
        "ORDER BY id"
    )
    return [(row[0], row[1]) for row in found]


@write
def claim_provisioning(
    owner: str, now: float, until: float, bucket_id: str | None, uploads: UploadSettings
) -> Script[Bucket | None]:
    """Take a lease until `until` on a provisioning bucket (that one, or any) whose lease is
    free or ran out before `now`. SKIP LOCKED lets gateways claim side by side without
    waiting for each other or claiming the same one."""
    only = "" if bucket_id is None else " AND id = ?"
    args = (now,) if bucket_id is None else (now, bucket_id)
    row = yield one(
        f"SELECT {BUCKET_COLUMNS} FROM buckets WHERE status = 'provisioning' "
        f"AND (claimed_until IS NULL OR claimed_until < ?){only} ORDER BY id LIMIT 1",
        *args,
        lock="skip",
    )
    if row is None:
        return None
    yield run(
        "UPDATE buckets SET claimed_by = ?, claimed_until = ?, "
        "provision_claims = provision_claims + 1 WHERE id = ?",
        owner,
        until,
        row[0],
    )
    return bucket_from_row(row, uploads)


VERSIONING_STATES = tuple(VERSIONING.values())


@write
def set_versioning(bucket_id: str, state: str) -> Script[None]:
    """Enable or suspend versioning (a bucket once versioned is never unversioned again)."""
    assert state in VERSIONING_STATES
    changed = yield run("UPDATE buckets SET versioning = ? WHERE id = ?", state, bucket_id)
    if not changed:
        raise BucketNotFound("bucket not found")


@write
def release_claims() -> Script[None]:
    """Drop every lease: at start-up, when this process is the only one."""
    yield run(
        "UPDATE buckets SET claimed_by = NULL, claimed_until = NULL WHERE status = 'provisioning'"
    )


@write
def set_bucket_status(bucket_id: str, status: str, reason: str | None) -> Script[None]:
    yield run(
        "UPDATE buckets SET status = ?, status_reason = ? WHERE id = ?", status, reason, bucket_id
    )


@write
def delete_bucket(bucket_id: str, force: bool, at: str) -> Script[None]:
    """Delete a bucket (with its files when forced), its multipart uploads (their part
    files, left without an upload, go with the next sweep) and its webhooks; its events
    stay for their retention, for the stream. A version under retention
    (after `at`) or a legal hold keeps the bucket, forced or not."""
    org_id = yield value("SELECT org_id FROM buckets WHERE id = ?", bucket_id)
    if org_id is None:
        raise BucketNotFound("bucket not found")
    yield lock_row("organizations", org_id)
    row = yield one(
        "SELECT status, file_count, size_bytes FROM buckets WHERE id = ?", bucket_id, lock="update"
    )
    if row is None:
        raise BucketNotFound("bucket not found")
    status, file_count, size_bytes = row
    if status == "provisioning":
        raise BucketProvisioning("the bucket is still provisioning; try again later")
    if not force:
        if file_count:
            raise BucketNotEmpty(
                f"the bucket holds {file_count} files; delete them or pass force=true"
            )
        markers = yield value(
            "SELECT 1 FROM files WHERE bucket_id = ? UNION ALL "
            "SELECT 1 FROM versions WHERE bucket_id = ? LIMIT 1",
            bucket_id,
            bucket_id,
        )
        if markers:
            raise BucketNotEmpty("the bucket holds delete markers; delete them or force=true")
    protected = yield value(
        "SELECT 1 FROM files WHERE bucket_id = ? AND (legal_hold = 1 OR lock_until > ?) "
        "UNION ALL SELECT 1 FROM versions WHERE bucket_id = ? "
        "AND (legal_hold = 1 OR lock_until > ?) LIMIT 1",
        bucket_id,
        at,
        bucket_id,
        at,
    )
    if protected:
        raise ObjectLocked("the bucket holds versions under retention or a legal hold")
    counts = yield rows(
        "SELECT blob_id, COUNT(*) FROM (SELECT blob_id FROM files WHERE bucket_id = ? "
        "AND delete_marker = 0 UNION ALL SELECT blob_id FROM versions WHERE bucket_id = ? "
        "AND delete_marker = 0) AS held GROUP BY blob_id ORDER BY blob_id",
        bucket_id,
        bucket_id,
    )
    for blob_id, count in counts:
        yield from decref(blob_id, count)
    yield run("DELETE FROM files WHERE bucket_id = ?", bucket_id)
    yield run("DELETE FROM versions WHERE bucket_id = ?", bucket_id)
    in_bucket = "SELECT upload_id FROM multipart_uploads WHERE bucket_id = ?"
    parts = yield value(
        f"SELECT COALESCE(SUM(size), 0) FROM multipart_parts WHERE upload_id IN ({in_bucket})",
        bucket_id,
    )
    yield run(f"DELETE FROM multipart_parts WHERE upload_id IN ({in_bucket})", bucket_id)
    yield run("DELETE FROM multipart_uploads WHERE bucket_id = ?", bucket_id)
    hooks = "SELECT id FROM webhooks WHERE bucket_id = ?"
    yield run(f"DELETE FROM deliveries WHERE webhook_id IN ({hooks})", bucket_id)
    yield run("DELETE FROM webhooks WHERE bucket_id = ?", bucket_id)
    yield run("DELETE FROM buckets WHERE id = ?", bucket_id)
    yield run(
        "UPDATE organizations SET bucket_count = bucket_count - 1, file_count = file_count - ?, "
        "stored_bytes = stored_bytes - ?, part_bytes = part_bytes - ? WHERE id = ?",
        file_count,
        size_bytes,
        int(parts),
        org_id,
    )
