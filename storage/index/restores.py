"""Transactions that put a snapshot's versions back: into the bucket it was taken of
(`restore_snapshot`), into a new bucket sharing its contents (`fork_snapshot`), or into
every bucket of the server (`restore_server_snapshot`).

Each one is a single transaction of set-based statements: the snapshot's references are
added before the bucket's are dropped, so a blob both name never reaches zero; the
bucket's and organization's counters are counted again from the rows; its multipart uploads
in flight are aborted (the service then removes their part files).
No event is recorded for the versions a restore adds or drops.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from storage.rules.acl import PUBLIC
from storage.rules.policy import renamed_policy

from ..errors import (
    BucketNameTaken,
    BucketProvisioning,
    Conflict,
    InvalidBucketState,
    ObjectLocked,
    QuotaExceeded,
    SnapshotNotFound,
)
from ..models import Bucket, FileRecord
from .buckets import reserve_name, share
from .copies import Copy, contents, point_at_copies
from .counting import CONTENT, over_quota
from .rows import FILE_FIELDS, insert
from .snapshots import (
    CONFIG_FIELDS,
    HELD_BY_BUCKET,
    HELD_BY_SNAPSHOT,
    NOTHING,
    lock_organizations,
    move_references,
)
from .sql import Duplicate, Script, lock_row, one, read, rows, run, value, write

KEPT = ("name", "region", "created_at", "location", "file_count", "size_bytes")
SETTINGS = tuple(c for c in CONFIG_FIELDS if c not in KEPT)
"""What a restore gives the bucket back: its settings (it keeps its name, region and place)."""
BUCKET_ROW = ("id", "org_id", "name", "region", "status", "created_at", "location", *SETTINGS)

_PROTECTED = (
    f"SELECT key, COALESCE(version_id, 'null') AS vid, {CONTENT.format(t='files')} AS content, "
    "lock_mode, lock_until, legal_hold FROM files WHERE bucket_id = ? "
    "AND (legal_hold = 1 OR lock_until > ?) UNION ALL SELECT key, version_id, "
    f"{CONTENT.format(t='versions')}, lock_mode, lock_until, legal_hold FROM versions "
    "WHERE bucket_id = ? AND (legal_hold = 1 OR lock_until > ?)"
)
DROPS_PROTECTED = (
    f"SELECT p.key FROM ({_PROTECTED}) AS p WHERE NOT EXISTS (SELECT 1 FROM snapshot_versions s "
    f"WHERE s.snapshot_id = ? AND {CONTENT.format(t='s')} = p.content AND s.key = p.key "
    "AND COALESCE(s.version_id, 'null') = p.vid AND (p.legal_hold = 0 OR s.legal_hold = 1) "
    "AND (p.lock_until IS NULL OR p.lock_until <= ? OR (s.lock_until >= p.lock_until "
    "AND (p.lock_mode <> 'COMPLIANCE' OR s.lock_mode = 'COMPLIANCE')))) LIMIT 1"
)
"""A version under retention or legal hold (at the time given) that the snapshot does not
keep as it is: the same content (by SHA-256: on the S3 backend the snapshot names copies
of its own), with a retention as long, as strict (a COMPLIANCE retention given back as
GOVERNANCE could be bypassed) and its hold."""


def _refuse_protected(snapshot_id: str, bucket_id: str, at: str) -> Script[None]:
    key = yield value(DROPS_PROTECTED, bucket_id, at, bucket_id, at, snapshot_id, at)
    if key is not None:
        raise ObjectLocked(
            f"the restore would drop or shorten the protection of a version of {key!r}, under "
            "retention or a legal hold"
        )


def _clear(bucket_id: str) -> Script[None]:
    """Drop the bucket's versions and markers and abort its multipart uploads (their
    references are the caller's to move)."""
    yield run("DELETE FROM files WHERE bucket_id = ?", bucket_id)
    yield run("DELETE FROM versions WHERE bucket_id = ?", bucket_id)
    in_bucket = "SELECT upload_id FROM multipart_uploads WHERE bucket_id = ?"
    yield run(f"DELETE FROM multipart_parts WHERE upload_id IN ({in_bucket})", bucket_id)
    yield run("DELETE FROM multipart_uploads WHERE bucket_id = ?", bucket_id)


def _fill(snapshot_id: str, bucket_id: str, config: dict[str, Any]) -> Script[None]:
    """Put the snapshot's versions into the (emptied) bucket, and count them."""
    selected = ", ".join("CAST(? AS TEXT)" if f == "bucket_id" else f for f in FILE_FIELDS)
    columns = ", ".join(FILE_FIELDS)
    for table, is_current in (("files", 1), ("versions", 0)):
        yield run(
            f"INSERT INTO {table} ({columns}) SELECT {selected} FROM snapshot_versions "
            "WHERE snapshot_id = ? AND is_current = ?",
            bucket_id,
            snapshot_id,
            is_current,
        )
    yield run(
        "UPDATE buckets SET file_count = ?, size_bytes = ? WHERE id = ?",
        config["file_count"],
        config["size_bytes"],
        bucket_id,
    )


def recount(org_id: str) -> Script[None]:
    """The organization's counters, counted again from its buckets and uploads."""
    of_org = "WHERE b.org_id = organizations.id"
    yield run(
        f"UPDATE organizations SET bucket_count = (SELECT COUNT(*) FROM buckets b {of_org}), "
        f"file_count = (SELECT COALESCE(SUM(b.file_count), 0) FROM buckets b {of_org}), "
        f"stored_bytes = (SELECT COALESCE(SUM(b.size_bytes), 0) FROM buckets b {of_org}), "
        "part_bytes = (SELECT COALESCE(SUM(p.size), 0) FROM multipart_parts p JOIN "
        "multipart_uploads u ON u.upload_id = p.upload_id JOIN buckets b "
        f"ON b.id = u.bucket_id {of_org}) WHERE id = ?",
        org_id,
    )


def _apply_settings(
    bucket_id: str, config: dict[str, Any], keep_lock: bool, named: bool
) -> Script[None]:
    """The snapshot's settings; `named`: its name too (else the bucket keeps its own)."""
    name, lock = yield one("SELECT name, object_lock FROM buckets WHERE id = ?", bucket_id)
    values = {c: config.get(c) for c in SETTINGS}
    if named:
        name = values["name"] = config["name"]
    if keep_lock and lock is not None and values["object_lock"] is None:
        values.update(object_lock=lock, versioning="Enabled")  # object lock is for good
    if values["policy"] is not None:
        values["policy"] = renamed_policy(values["policy"], config["name"], name)
    assignments = ", ".join(f"{column} = ?" for column in values)
    yield run(f"UPDATE buckets SET {assignments} WHERE id = ?", *values.values(), bucket_id)
    yield from share(bucket_id)


_PUBLIC_OBJECT = (
    "SELECT 1 FROM files WHERE bucket_id = ? AND ({shared}) UNION ALL "
    "SELECT 1 FROM versions WHERE bucket_id = ? AND ({shared}) LIMIT 1"
).format(shared=" OR ".join([*(f"acl = '{acl}'" for acl in PUBLIC), "acl LIKE '[%'"]))
"""A version whose ACL shares it (`acl.shares`): a public canned ACL, or a grant list (one
that names only the owner counts too, which the exact test would not: SQL reads no JSON here)."""


def _share_objects(bucket_id: str) -> Script[None]:
    """A version with an ACL that shares it reserves its bucket's name across the server, as the
    write that gave it the ACL did (SharedNameTaken when another organization's bucket
    holds the name): once the snapshot's versions are in the bucket."""
    if (yield value(_PUBLIC_OBJECT, bucket_id, bucket_id)) is not None:
        yield from reserve_name(bucket_id)


def _check_growth(org_id: str, grew: bool, quota: int | None) -> Script[None]:
    """Refuse (roll back) a restore or fork that grew the organization's stored bytes, once
    its rows are in place, when its usage passes the quota (snapshot bytes included)."""
    if quota is None or not grew:
        return
    if (yield from over_quota(org_id, 0, quota)):
        raise QuotaExceeded(
            f"the snapshot's versions would bring the organization past its {quota}-byte "
            "storage quota"
        )


def _restore_into(
    snapshot_id: str,
    bucket_id: str,
    config: dict[str, Any],
    at: str,
    quota: int | None,
    drop_locked: bool,
    copies: list[Copy] | None = None,
    named: bool = False,
) -> Script[list[FileRecord]]:
    """The bucket's versions and settings (`named`: and name) as the snapshot has them;
    with `copies`, the versions dropped (whose objects the caller deletes once this
    commits)."""
    org_id = yield value("SELECT org_id FROM buckets WHERE id = ?", bucket_id)
    if org_id is None:
        raise InvalidBucketState("the bucket was deleted since: fork the snapshot instead")
    yield lock_row("organizations", org_id)
    status = yield value("SELECT status FROM buckets WHERE id = ?", bucket_id)
    if status == "provisioning":
        raise BucketProvisioning("the bucket is still provisioning; try again later")
    if not drop_locked:
        yield from _refuse_protected(snapshot_id, bucket_id, at)
    size = yield value("SELECT size_bytes FROM buckets WHERE id = ?", bucket_id)
    dropped: list[FileRecord] = []
    if copies is None:
        yield from move_references(
            HELD_BY_SNAPSHOT, (snapshot_id,), HELD_BY_BUCKET, (bucket_id, bucket_id)
        )
    else:
        dropped = yield from contents(bucket_id, None)
        yield from move_references(NOTHING, (), HELD_BY_BUCKET, (bucket_id, bucket_id))
    yield from _clear(bucket_id)
    yield from _fill(snapshot_id, bucket_id, config)
    if copies is not None:
        yield from _take_copies(bucket_id, copies)
    yield from _apply_settings(bucket_id, config, not drop_locked, named)
    yield from _share_objects(bucket_id)
    yield from recount(org_id)
    yield from _check_growth(org_id, config["size_bytes"] > size, quota)
    return dropped


def _take_copies(bucket_id: str, copies: list[Copy]) -> Script[None]:
    """The bucket's new rows name the copies made for them, and hold their references."""
    for table in ("files", "versions"):
        yield from point_at_copies(table, "bucket_id = ?", (bucket_id,), copies)
    yield from move_references(HELD_BY_BUCKET, (bucket_id, bucket_id), NOTHING, ())


class Restored(NamedTuple):
    bucket_id: str
    dropped: list[FileRecord]
    """With copies: the versions the restore dropped, whose objects go once it commits."""


def _snapshot(snapshot_id: str) -> Script[tuple[str | None, str | None, dict[str, Any]]]:
    row = yield one("SELECT org_id, bucket_id, config FROM snapshots WHERE id = ?", snapshot_id)
    if row is None:
        raise SnapshotNotFound("snapshot not found")
    return row[0], row[1], json.loads(row[2] or "{}")


@write
def restore_snapshot(
    snapshot_id: str, at: str, quota: int, copies: list[Copy] | None = None
) -> Script[Restored]:
    """The bucket the snapshot was taken of gets back exactly its versions and settings
    (with `copies`, the S3 backend's: naming the copies made of the snapshot's contents).
    ObjectLocked when that would drop a version protected at `at`."""
    _, bucket_id, config = yield from _snapshot(snapshot_id)
    if bucket_id is None:
        raise InvalidBucketState("a server snapshot is restored as a whole")
    dropped = yield from _restore_into(snapshot_id, bucket_id, config, at, quota, False, copies)
    return Restored(bucket_id, dropped)


def _insert_bucket(values: dict[str, Any]) -> Script[None]:
    try:
        yield insert("buckets", BUCKET_ROW, values, unique=True)
    except Duplicate:
        raise BucketNameTaken(f"a bucket named {values['name']!r} already exists") from None


@write
def fork_snapshot(
    snapshot_id: str,
    bucket: Bucket,
    max_buckets: int,
    quota: int,
    copies: list[Copy] | None = None,
) -> Script[None]:
    """A new active bucket (`bucket`: its id, name, region, place, creation time) holding
    the snapshot's versions and settings, sharing their contents (with `copies`: naming
    the copies made of them)."""
    _, _, config = yield from _snapshot(snapshot_id)
    count = yield value(
        "SELECT bucket_count FROM organizations WHERE id = ?", bucket.org_id, lock="update"
    )
    if count >= max_buckets:
        raise QuotaExceeded(f"the plan allows at most {max_buckets} buckets")
    values = {c: config.get(c) for c in SETTINGS}
    if values["policy"] is not None:
        values["policy"] = renamed_policy(values["policy"], config["name"], bucket.name)
    values.update(
        id=bucket.id,
        org_id=bucket.org_id,
        name=bucket.name,
        region=bucket.region,
        status="active",
        created_at=bucket.created_at,
        location=bucket.location,
    )
    yield from _insert_bucket(values)
    yield from share(bucket.id)
    if copies is None:
        yield from move_references(HELD_BY_SNAPSHOT, (snapshot_id,), NOTHING, ())
    yield from _fill(snapshot_id, bucket.id, config)
    if copies is not None:
        yield from _take_copies(bucket.id, copies)
    yield from _share_objects(bucket.id)
    yield from recount(bucket.org_id)
    yield from _check_growth(bucket.org_id, config["size_bytes"] > 0, quota)


class ServerRestored(NamedTuple):
    """With copies (the S3 backend): what the caller settles once a server restore commits."""

    dropped: list[FileRecord]
    """The versions of the buckets restored, whose objects go."""
    gone: list[tuple[str, str | None, str]]
    """The buckets made since, dropped: (id, location, status), whose cluster buckets go."""
    filled: set[str]
    """The buckets that took their copies (the others' copies go)."""


class ServerPlan(NamedTuple):
    """One bucket of a server snapshot, as a restore would put it back now."""

    snapshot_id: str
    bucket_id: str
    location: str | None
    """Where its contents go: the bucket's place, or the one it had (made again)."""
    exists: bool


@read
def server_plan(snapshot_id: str) -> Script[list[ServerPlan]]:
    """The buckets a server restore would restore or make again (those of organizations
    that still exist), for the S3 backend to copy their contents back first."""
    found = yield rows(
        "SELECT s.id, s.bucket_id, s.config, b.location, b.id FROM snapshots s LEFT JOIN "
        "buckets b ON b.id = s.bucket_id WHERE s.parent_id = ? AND EXISTS (SELECT 1 FROM "
        "organizations o WHERE o.id = s.org_id) ORDER BY s.bucket_id",
        snapshot_id,
    )
    return [
        ServerPlan(child, bucket_id, location if now else json.loads(config)["location"], bool(now))
        for child, bucket_id, config, location, now in found
    ]


@write
def restore_server_snapshot(
    snapshot_id: str,
    drop_locked: bool,
    at: str,
    copies: dict[str, list[Copy]] | None = None,
    provisioned: frozenset[str] = frozenset(),
) -> Script[ServerRestored]:
    """Every bucket as the server snapshot has it: buckets made since go, deleted ones come
    back (same id, name and organization, if it still exists), the rest are restored, their
    names included.
    `drop_locked`: protected versions go too, instead of refusing. With `copies` (the S3
    backend's, by bucket id, made along `server_plan`): each bucket's rows name the copies
    made for it, and a bucket made again must be one whose cluster bucket was made
    (`provisioned`); Conflict when the buckets changed since the plan (try again)."""
    org_id, bucket_id, _ = yield from _snapshot(snapshot_id)
    if org_id is not None or bucket_id is not None:
        raise InvalidBucketState("a bucket snapshot is restored into its bucket")
    yield from lock_organizations()
    children = yield rows(
        "SELECT id, org_id, bucket_id, config FROM snapshots WHERE parent_id = ? "
        "ORDER BY bucket_id",
        snapshot_id,
    )
    kept = {row[2] for row in children}
    found = yield rows("SELECT id, org_id, location, status FROM buckets ORDER BY id")
    orgs = yield rows("SELECT id FROM organizations")
    touched = {row[1] for row in found}
    restored = ServerRestored([], [], set())
    for bucket_id, _org, location, status in found:
        if bucket_id not in kept:
            if status == "provisioning":  # as a deletion: its cluster bucket is being made
                raise BucketProvisioning("a bucket is still provisioning; try again later")
            if not drop_locked:
                yield from _refuse_protected("", bucket_id, at)
            yield from _drop_bucket(bucket_id)
            restored.gone.append((bucket_id, location, status))
    existing = {row[0] for row in found}
    alive = {row[0] for row in orgs}
    for _, _, child_bucket, _ in children:  # names back below: none may hold another's now
        if child_bucket in existing:
            yield run("UPDATE buckets SET name = id WHERE id = ?", child_bucket)
    for child_id, child_org, child_bucket, config_text in children:
        config = json.loads(config_text)
        made = None
        if copies is not None and (child_bucket in existing or child_org in alive):
            made = copies.get(child_bucket)
            if made is None or (child_bucket not in existing) != (child_bucket in provisioned):
                raise Conflict("the buckets changed while their contents were copied; try again")
            restored.filled.add(child_bucket)
        if child_bucket in existing:
            restored.dropped.extend(
                (
                    yield from _restore_into(
                        child_id, child_bucket, config, at, None, drop_locked, made, named=True
                    )
                )
            )
        elif child_org in alive:
            yield from _recreate(child_id, child_org, child_bucket, config, made)
            touched.add(child_org)
    for org in sorted(touched & alive):
        yield from recount(org)
    return restored


def _drop_bucket(bucket_id: str) -> Script[None]:
    """A bucket goes with its versions, uploads and webhooks (its organization recounted
    by the caller)."""
    yield from move_references(NOTHING, (), HELD_BY_BUCKET, (bucket_id, bucket_id))
    yield from _clear(bucket_id)
    hooks = "SELECT id FROM webhooks WHERE bucket_id = ?"
    yield run(f"DELETE FROM deliveries WHERE webhook_id IN ({hooks})", bucket_id)
    yield run("DELETE FROM webhooks WHERE bucket_id = ?", bucket_id)
    yield run("DELETE FROM buckets WHERE id = ?", bucket_id)


def _recreate(
    snapshot_id: str,
    org_id: str,
    bucket_id: str,
    config: dict[str, Any],
    copies: list[Copy] | None = None,
) -> Script[None]:
    values = {c: config.get(c) for c in SETTINGS}
    values.update(
        id=bucket_id,
        org_id=org_id,
        name=config["name"],
        region=config["region"],
        status="active",
        created_at=config["created_at"],
        location=config["location"],
    )
    yield from _insert_bucket(values)
    yield from share(bucket_id)
    if copies is None:
        yield from move_references(HELD_BY_SNAPSHOT, (snapshot_id,), NOTHING, ())
    yield from _fill(snapshot_id, bucket_id, config)
    if copies is not None:
        yield from _take_copies(bucket_id, copies)
    yield from _share_objects(bucket_id)
