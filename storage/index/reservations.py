"""Reservations of S3 writes: quota held, and the key's object claimed, between "staged in
the cluster" and "committed to the index" (`backends/s3/commits.py`).

A reservation lives while its writer renews `lease_until` (`backends/s3/settle.py`); once
that has passed, whoever meets it (a reader of the key, a writer of the key, `heal`)
settles it: commits the published object as the write would have, with what `commit_with`
recorded, or releases it when the cluster does not hold that object."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import msgspec

from storage.backends.s3.names import version_of
from storage.rules import events
from storage.rules.object_lock import decode_lock, encode_lock

from ..attributes import Attributes
from ..errors import BucketNotFound, ObjectBusy
from ..models import Condition, Reservation, StoredBlob
from . import versions
from .counting import bucket_for_file_write, check_condition, check_quota, upload_bytes
from .leases import OBJECT_LEASE_SECONDS, claim_object, object_lease
from .rows import attribute_columns, insert
from .sql import Script, one, read, rows, run, write

logger = logging.getLogger("bucketd.engine")

FIELDS = (
    "token",
    "bucket_id",
    "org_id",
    "key",
    "size",
    "sha256",
    "content_type",
    "backend_etag",
    "created_at",
    "object_key",
    "encryption",
    "lease_until",
    "commit_with",
)


@dataclass(frozen=True)
class Pending:
    """What a reserved write commits beside its content."""

    attrs: Attributes
    event: str = events.PUT
    upload_id: str | None = None
    md5: str | None = None
    """The S3 ETag's body when the write sets it (a multipart completion's, of the client's
    parts); else the cluster's object's ETag gives it."""


def encode(pending: Pending) -> str:
    """`commit_with`. The envelope stays in its own column (`encryption`), the one a master
    key rotation rewrites (`envelopes.py`)."""
    columns = {k: v for k, v in attribute_columns(pending.attrs).items() if k != "encryption"}
    columns["lock"] = encode_lock(pending.attrs.lock)
    recorded = {"event": pending.event, "upload_id": pending.upload_id, "md5": pending.md5}
    return json.dumps({"attrs": columns, **recorded})


def pending_of(reservation: Reservation) -> Pending:
    """What `reservation`'s write commits; a reservation made before migration 0024 knows
    its content type and envelope only, and so does one whose `commit_with` does not
    decode (damaged, or of another shape: another version of bucketd). Its object is
    already the key's in the cluster: committing it with its columns keeps the key
    readable, where raising failed every read, write and `heal` pass that met it."""
    known = Pending(Attributes(reservation.content_type, encryption=reservation.encryption))
    if reservation.commit_with is None:
        return known
    try:
        recorded = json.loads(reservation.commit_with)
        columns = dict(recorded["attrs"])
        lock = decode_lock(columns.pop("lock", None))
        attrs = Attributes(**columns, lock=lock, encryption=reservation.encryption)
        return Pending(attrs, recorded["event"], recorded["upload_id"], recorded["md5"])
    except (ValueError, KeyError, TypeError, AttributeError, msgspec.MsgspecError) as exc:
        logger.warning(
            "a reservation's commit_with does not decode (%s): committed with its columns",
            type(exc).__name__,
        )
        return known


@write
def reserve(
    token: str,
    bucket_id: str,
    key: str,
    blob: StoredBlob,
    pending: Pending,
    max_storage_bytes: int,
    now: float,
    lease_until: float,
    condition: Condition | None = None,
) -> Script[str | None]:
    """Hold quota for content about to become visible in the backend (402 past it); the
    parts of the upload it completes already hold theirs. The content's envelope, if any,
    is `pending.attrs.encryption` (`size` is then the stored size). ObjectBusy while another
    write's reservation holds the key's object. Returns the ETag the key's record gives
    the object this write replaces (None: it names none), the publish's fence."""
    bucket = yield from bucket_for_file_write(bucket_id)
    org_id = bucket.org_id
    old = yield from versions.current(bucket_id, key)
    check_condition(old, condition)
    upload_id = pending.upload_id
    freed = 0 if upload_id is None else (yield from upload_bytes(upload_id))
    replaced = yield from versions.bytes_a_write_frees(bucket_id, key, bucket.versioning, old)
    growth = blob.file_size - replaced - freed
    yield from check_quota(org_id, growth, max_storage_bytes)
    if not version_of(blob.object_key):  # the key's own object: one publisher at a time
        taken = yield from claim_object(bucket_id, key, token, now)
        if not taken:
            raise ObjectBusy("another write of this key is being published; retry")
    values = {
        "token": token,
        "bucket_id": bucket_id,
        "org_id": org_id,
        "key": key,
        "size": blob.size,
        "sha256": blob.sha256,
        "content_type": pending.attrs.content_type,
        "backend_etag": blob.backend_etag or "",
        "created_at": now,
        "object_key": blob.object_key,
        "encryption": pending.attrs.encryption,
        "lease_until": lease_until,
        "commit_with": encode(pending),
    }
    yield insert("reservations", FIELDS, values)
    if old is None or old.delete_marker or old.object_key != blob.object_key:
        return None
    return old.backend_etag


@write
def hold_key(token: str, bucket_id: str, key: str, now: float, lease_until: float) -> Script[None]:
    """Claim the key's object for a delete, as `reserve` does for a write (ObjectBusy while
    a write's reservation holds it): a delete removes the object under the key, which a
    write between its publish and its commit has replaced with its own. The claim is a
    reservation of nothing (size 0, no ETag: a settler that meets it lapsed releases it)."""
    row = yield one("SELECT org_id FROM buckets WHERE id = ?", bucket_id)
    if row is None:
        raise BucketNotFound("bucket not found")
    if not (yield from claim_object(bucket_id, key, token, now)):
        raise ObjectBusy("a write of this key is being published; retry")
    values = {
        "token": token,
        "bucket_id": bucket_id,
        "org_id": str(row[0]),
        "key": key,
        "size": 0,
        "sha256": "",
        "content_type": "",
        "backend_etag": "",
        "created_at": now,
        "object_key": None,
        "encryption": None,
        "lease_until": lease_until,
        "commit_with": None,
    }
    yield insert("reservations", FIELDS, values)


@write
def renew(token: str, bucket_id: str, key: str, lease_until: float) -> Script[bool]:
    """Extend a live write's lease; False when its reservation is gone (settled)."""
    found = yield run("UPDATE reservations SET lease_until = ? WHERE token = ?", lease_until, token)
    if found:  # the object's lease, a backstop, never ends before the write's
        yield run(
            "UPDATE leases SET until = ? WHERE name = ? AND owner = ?",
            lease_until + OBJECT_LEASE_SECONDS,
            object_lease(bucket_id, key),
            token,
        )
    return bool(found)


@write
def expect(token: str, backend_etag: str) -> Script[bool]:
    """Name the ETag a reserved write's object will have, once it is known (a staged copy's);
    False when the reservation is gone (its lease lapsed and it was settled)."""
    found = yield run(
        "UPDATE reservations SET backend_etag = ? WHERE token = ?", backend_etag, token
    )
    return bool(found)


@write
def release(token: str) -> Script[None]:
    yield run("DELETE FROM reservations WHERE token = ?", token)
    yield run("DELETE FROM leases WHERE owner = ?", token)  # its object's, if it held one


SELECT = (
    "SELECT r.token, r.bucket_id, r.key, r.size, r.sha256, r.content_type, r.backend_etag, "
    "r.object_key, r.encryption, r.lease_until, r.commit_with, b.location FROM reservations r "
    "LEFT JOIN buckets b ON b.id = r.bucket_id "
)
NAMES = (
    "token",
    "bucket_id",
    "key",
    "size",
    "sha256",
    "content_type",
    "backend_etag",
    "object_key",
    "encryption",
    "lease_until",
    "commit_with",
)


def _reservations(found: list[tuple[Any, ...]]) -> list[Reservation]:
    return [
        Reservation(**dict(zip(NAMES, row[:-1], strict=True)), location=row[-1]) for row in found
    ]


@read
def settleable(created_before: float, now: float) -> Script[list[Reservation]]:
    """Reservations whose writer is gone: their lease lapsed before `now`, or (made before
    leases, or by a writer whose clock lags) they were made before `created_before`."""
    found = yield rows(
        SELECT + "WHERE r.created_at < ? OR r.lease_until < ? ORDER BY r.created_at",
        created_before,
        now,
    )
    return _reservations(found)


@read
def on_key(bucket_id: str, key: str) -> Script[list[Reservation]]:
    """The reservations of writes of the key's own object (under the key, or its encoded
    name: `names.py`), not of a named version's."""
    found = yield rows(
        SELECT + "WHERE r.bucket_id = ? AND r.key = ? ORDER BY r.created_at", bucket_id, key
    )
    return [r for r in _reservations(found) if not version_of(r.object_key)]
