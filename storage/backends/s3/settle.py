"""When an S3 write is gone, and what becomes of it: a lease per write, renewed by its
writer, and the settling of writes whose lease lapsed.

An overwrite publishes its object at the key, then commits its record. A writer that dies
between the two (SIGKILL, or its index gone when it commits) leaves the old record naming
an object the cluster no longer holds, and its reservation holding the key's object. The
key held a value all along: the write was in flight, and its object is the key's value now.
So whoever meets such a reservation once its lease has lapsed settles it, exactly as
`heal` did after the upload deadline: commits the published object with what the write
recorded (`index/reservations.py`), or releases the reservation when the cluster does not
hold that object (the writer died before publishing). A reader of the key does (the next
lookup finds the committed record), a writer of the key does (instead of waiting 30 s for
the object's lease, then 409), and so does `heal`, promptly.

A live writer renews its lease every third of `write_lease_seconds`, only while one of its
writes is between its reservation and its commit: nothing runs when nothing is written. A
reader meeting a live reservation of the key waits for its commit (`rules/rereads.py`).

Two settlers of one reservation race in the index: the commit deletes the reservation in
its transaction, and the second finds it gone (`WriteSettled`), as does a writer whose lease
lapsed while it lived (it then answers with what was settled, when that is its object). A
writer never starts publishing with less than a third of its lease ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Literal

from storage import encryption
from storage.backends.commits import new_version
from storage.backends.protocol import ObjectStore
from storage.backends.s3 import names as object_names
from storage.errors import (
    BackendUnavailable,
    BucketNotActive,
    BucketNotFound,
    Conflict,
    StorageError,
    UploadNotFound,
    WriteSettled,
)
from storage.index import Index, files, reservations
from storage.index.reservations import Pending
from storage.models import Bucket, FileRecord, Reservation, StoredBlob
from storage.rules.clock import Clock
from storage.rules.etags import md5_of

logger = logging.getLogger("bucketd.engine")

Replaced = Literal["writing", "settled", "none"]
"""What a reader learns of the key whose record's object would not open: a live write is
publishing or committing it (wait for its commit), a write whose writer is gone was just
settled (look again), or neither."""


class WriteLease:
    """One write's lease, as this process last set it."""

    def __init__(self, until: float, seconds: float) -> None:
        self.until = until
        self._seconds = seconds

    def check(self) -> None:
        """Before publishing: a write whose lease may lapse during its publish could have
        its reservation released meanwhile, and then replace another write's object."""
        if time.time() > self.until - self._seconds / 3:
            raise BackendUnavailable("the index did not renew this write's lease; try again")


class Settler:
    def __init__(self, index: Index, backend: ObjectStore, clock: Clock, seconds: float) -> None:
        self._index = index
        self._backend = backend
        self._clock = clock
        self.seconds = seconds

    def lease_from(self, now: float) -> float:
        return now + self.seconds

    @contextlib.asynccontextmanager
    async def held(
        self, token: str, bucket_id: str, key: str, until: float
    ) -> AsyncIterator[WriteLease]:
        """The lease of the write reserved as `token`, renewed until the block ends."""
        lease = WriteLease(until, self.seconds)
        renewing = asyncio.create_task(self._renew(lease, token, bucket_id, key))
        try:
            yield lease
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _renew(self, lease: WriteLease, token: str, bucket_id: str, key: str) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            until = self.lease_from(time.time())
            try:
                if not await self._index.run(reservations.renew, token, bucket_id, key, until):
                    return  # settled by another gateway
            except StorageError:
                continue  # it lapses unless a later renewal lands
            lease.until = until

    @staticmethod
    def lapsed(reservation: Reservation, now: float) -> bool:
        return reservation.lease_until is not None and reservation.lease_until < now

    async def replaced(self, record: FileRecord) -> Replaced:
        """After `record`'s content would not open: settle the lapsed writes of its key
        (its object is the one under the key), and say whether a live one is in flight."""
        if object_names.version_of(record.object_key):  # a named version's is never replaced
            return "none"
        found = await self._index.run(reservations.on_key, record.bucket_id, record.key)
        now, writing, settled = time.time(), False, False
        for reservation in found:
            if reservation.lease_until is None:
                continue  # made before leases: `heal` settles it after the upload deadline
            if self.lapsed(reservation, now):
                await self.settle(reservation)
                settled = True
            else:
                writing = True
        if writing:
            return "writing"
        return "settled" if settled else "none"

    async def lapsed_on_key(self, bucket_id: str, key: str) -> bool:
        """For a writer of `key` kept waiting: settle the lapsed writes holding its object;
        whether there were any."""
        now = time.time()
        lapsed = [
            r
            for r in await self._index.run(reservations.on_key, bucket_id, key)
            if self.lapsed(r, now)
        ]
        for reservation in lapsed:
            await self.settle(reservation)
        return bool(lapsed)

    async def settle_own(
        self, token: str, bucket: Bucket, key: str, blob: StoredBlob, pending: Pending
    ) -> None:
        """A publish that failed (or was cancelled) may still have landed: committed if the
        cluster holds its object, else released; left to lapse if that cannot be told now."""
        own = Reservation(
            token=token,
            bucket_id=bucket.id,
            key=key,
            size=blob.size,
            sha256=blob.sha256,
            content_type=pending.attrs.content_type,
            backend_etag=blob.backend_etag or "",
            location=bucket.location,
            object_key=blob.object_key,
            encryption=pending.attrs.encryption,
            commit_with=reservations.encode(pending),
        )
        try:
            await self.settle(own)
        except StorageError as exc:
            logger.warning("a failed publish is left to lapse (bucket %s): %s", bucket.id, exc)

    async def settle(self, reservation: Reservation) -> bool:
        """Commit a reserved write whose object the cluster holds, as its writer would have;
        else release it. Whether this call committed it."""
        if reservation.location is None:  # its bucket is gone
            await self._index.run(reservations.release, reservation.token)
            return False
        name = reservation.object_key or reservation.key
        etag = await self._backend.head(reservation.location, name)
        if etag != reservation.backend_etag:
            await self._index.run(reservations.release, reservation.token)
            return False
        pending = reservations.pending_of(reservation)
        blob = StoredBlob(
            blob_id=f"s3:{uuid.uuid4().hex}",
            size=reservation.size,
            sha256=reservation.sha256,
            backend_etag=etag,
            md5=pending.md5 or md5_of(etag),
            object_key=reservation.object_key,
            plain_size=None
            if reservation.encryption is None
            else encryption.plain_size(reservation.size),
        )
        try:
            await self._index.run(
                files.commit_file,
                reservation.bucket_id,
                reservation.key,
                blob,
                pending.attrs,
                self._clock.iso(),
                0,
                reservation.token,
                upload_id=pending.upload_id,
                version=object_names.version_of(reservation.object_key) or new_version(),
                event=pending.event,
            )
        except WriteSettled:
            return False  # another gateway (or the writer) was first
        except (BucketNotFound, BucketNotActive, Conflict, UploadNotFound):
            await self._index.run(reservations.release, reservation.token)
            return False
        logger.info("committed a write whose writer was gone (bucket %s)", reservation.bucket_id)
        return True
