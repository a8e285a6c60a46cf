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
lapsed while it lived (it then answers with what was settled, when that is its object, or
claims the key again: `recommit`). A writer never starts publishing with less than a third
of its lease ahead, and its publish is fenced (`fence`): a lease is a clock, and a writer
stalled past it must not replace the object of a write that came after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal, TypeVar

from storage import encryption
from storage.backends.commits import new_version
from storage.backends.protocol import Fence, ObjectStore
from storage.backends.s3 import names as object_names
from storage.errors import (
    BackendUnavailable,
    BucketNotActive,
    BucketNotFound,
    Conflict,
    ObjectBusy,
    StorageError,
    UploadNotFound,
    WriteSettled,
)
from storage.index import Index, files, reservations
from storage.index.reservations import Pending
from storage.models import Bucket, Condition, FileRecord, Reservation, StoredBlob
from storage.rules import events
from storage.rules.clock import Clock
from storage.rules.etags import md5_of, same_tag

logger = logging.getLogger("bucketd.engine")
T = TypeVar("T")
OUTCOME_UNKNOWN = (
    "this write's lease lapsed before its commit, and the key has changed since; whether it "
    "took effect is unknown: retry"
)
PUBLISH_WAIT_SECONDS = 30.0
"""How long a write waits for another live gateway publishing the same key before a 409 (a
gone one's write is settled once its lease lapses: `settle.py`)."""

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


class Claim:
    """A delete's hold on the key's object (`Settler.claimed`)."""

    def __init__(
        self, settler: Settler, lease: WriteLease, token: str, bucket_id: str, key: str
    ) -> None:
        self._settler = settler
        self._lease = lease
        self._token = token
        self._bucket_id = bucket_id
        self._key = key

    async def held(self) -> bool:
        """Before removing the object: whether this claim still holds it, with a third of
        its lease ahead. A delete stalled past its lease (its claim released by whoever met
        it lapsed) must not remove the object of a write that came after it."""
        try:
            await self._settler.ensure(self._lease, self._token, self._bucket_id, self._key)
        except (WriteSettled, StorageError):
            return False
        return True


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
        settled, writing = await self._settle_lapsed(record.bucket_id, record.key)
        if writing:
            return "writing"
        return "settled" if settled else "none"

    async def _settle_lapsed(self, bucket_id: str, key: str) -> tuple[bool, bool]:
        """Settle the writes of `key` whose lease lapsed: whether there were any, and
        whether a live one holds the key. One made before leases (no `lease_until`) is
        neither: `heal` settles it after the upload deadline."""
        now, settled, writing = time.time(), False, False
        for reservation in await self._index.run(reservations.on_key, bucket_id, key):
            if reservation.lease_until is None:
                continue
            if self.lapsed(reservation, now):
                await self.settle(reservation)
                settled = True
            else:
                writing = True
        return settled, writing

    async def settle_own(
        self, token: str, bucket: Bucket, key: str, blob: StoredBlob, pending: Pending
    ) -> None:
        """A publish that failed (or was cancelled) may still have landed: committed if the
        cluster holds its object, else released; left to lapse if that cannot be told now."""
        try:
            await self.settle(self.own(token, bucket, key, blob, pending))
        except StorageError as exc:
            logger.warning("a failed publish is left to lapse (bucket %s): %s", bucket.id, exc)

    async def ensure(self, lease: WriteLease, token: str, bucket_id: str, key: str) -> None:
        """Before publishing: a lease with less than a third of it ahead is renewed now
        (a slow index, a loaded machine), WriteSettled if it was settled meanwhile."""
        try:
            lease.check()
        except BackendUnavailable:
            until = self.lease_from(time.time())
            if not await self._index.run(reservations.renew, token, bucket_id, key, until):
                raise WriteSettled("this write's lease lapsed before its publish; retry") from None
            lease.until = until

    @staticmethod
    def own(
        token: str, bucket: Bucket, key: str, blob: StoredBlob, pending: Pending
    ) -> Reservation:
        """The reservation `token` of this process's own write."""
        return Reservation(
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

    async def settle(self, reservation: Reservation) -> bool:
        """Commit a reserved write whose object the cluster holds, as its writer would have;
        else release it. Whether this call committed it. A copy's staged object goes."""
        pending = reservations.pending_of(reservation)
        try:
            return await self._settle(reservation, pending)
        finally:
            if reservation.location is not None and pending.event == events.COPY:
                await self._unstage(reservation.location, reservation.token)

    async def _unstage(self, location: str, token: str) -> None:
        try:
            await self._backend.delete_prefix(location, object_names.staging(token))
        except StorageError as exc:
            logger.warning("a copy's staged object is left in the cluster: %s", exc)

    async def _settle(self, reservation: Reservation, pending: Pending) -> bool:
        if reservation.location is None:  # its bucket is gone
            await self._index.run(reservations.release, reservation.token)
            return False
        name = reservation.object_key or reservation.key
        etag = await self._backend.head(reservation.location, name)
        if not same_tag(etag, reservation.backend_etag or None):
            await self._index.run(reservations.release, reservation.token)
            return False
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

    async def reserve(
        self,
        token: str,
        bucket: Bucket,
        key: str,
        blob: StoredBlob,
        pending: Pending,
        quota: int,
        condition: Condition | None,
    ) -> tuple[float, str | None]:
        """Reserve quota for a write about to be published, waiting while another live
        gateway publishes the same object (`reservations.reserve`): its turn comes first. A
        gone one's write is settled at once. The write's lease runs until the time returned,
        with the ETag of the object it replaces as the index knows it."""

        async def attempt(now: float, until: float) -> str | None:
            return await self._index.run(
                reservations.reserve,
                token,
                bucket.id,
                key,
                blob,
                pending,
                quota,
                now,
                until,
                condition,
            )

        return await self._in_turn(bucket.id, key, attempt)

    async def _in_turn(
        self, bucket_id: str, key: str, attempt: Callable[[float, float], Awaitable[T]]
    ) -> tuple[float, T]:
        """`attempt(now, lease_until)` once no other write holds the key's object: a live
        one is waited for (ObjectBusy after PUBLISH_WAIT_SECONDS), a lapsed one settled."""
        waited, pause = 0.0, 0.005
        while True:
            now = time.time()
            until = self.lease_from(now)
            try:
                return until, await attempt(now, until)
            except ObjectBusy:
                if (await self._settle_lapsed(bucket_id, key))[0]:
                    continue
                if waited >= PUBLISH_WAIT_SECONDS:
                    raise
                await asyncio.sleep(pause)
                waited, pause = waited + pause, min(0.1, pause * 2)

    @contextlib.asynccontextmanager
    async def claimed(self, bucket_id: str, key: str) -> AsyncIterator[Claim]:
        """The key's object, held for a delete as a write holds it (`reservations.hold_key`):
        a write between its publish and its commit has replaced the object under the key,
        which the delete would remove under that write's coming record. Its lease is
        renewed until the block ends; then the claim goes."""
        token = uuid.uuid4().hex

        async def attempt(now: float, until: float) -> None:
            await self._index.run(reservations.hold_key, token, bucket_id, key, now, until)

        until, _ = await self._in_turn(bucket_id, key, attempt)
        try:
            async with self.held(token, bucket_id, key, until) as lease:
                yield Claim(self, lease, token, bucket_id, key)
        finally:
            try:
                await self._index.run(reservations.release, token)
            except StorageError as exc:  # it lapses, and the next one to meet it releases it
                logger.warning("a delete's claim is left to lapse (bucket %s): %s", bucket_id, exc)

    @staticmethod
    def fence(bucket: Bucket, name: str, current: str | None) -> Fence | None:
        """What this write's publish may replace: a publish that stalls past its lease must
        not replace a later write's object. A named version's object is new: no other
        write publishes it."""
        if bucket.location is None or object_names.version_of(name):
            return None
        return Fence(current)

    async def publish(
        self,
        token: str,
        bucket: Bucket,
        key: str,
        content_type: str,
        blob: StoredBlob,
        fence: Fence | None,
    ) -> StoredBlob:
        """`backend.publish` over `fence`'s object (the one the key's record names). When the
        cluster holds another (an orphan, or an object a settler committed), this write may
        replace it if its reservation still lives once that is seen: no later write of the
        key can have published meanwhile. A refusal while the cluster holds what the fence
        says is not a replacement (SeaweedFS refuses If-None-Match: * for some keys with no
        object, e.g. `%`): that publish goes on without its condition."""
        name = blob.object_key or key

        async def put(over: Fence | None) -> StoredBlob:
            return await self._backend.publish(bucket, name, content_type, blob, over)

        return await self.fenced(token, bucket, key, name, fence, put)

    async def fenced(
        self,
        token: str,
        bucket: Bucket,
        key: str,
        name: str,
        fence: Fence | None,
        put: Callable[[Fence | None], Awaitable[StoredBlob]],
    ) -> StoredBlob:
        """`put(fence)` at `name`, the object of `key` (a publish, or a server-side copy),
        as `publish` says."""
        for _ in range(2):
            try:
                return await put(fence)
            except WriteSettled:
                if fence is None or bucket.location is None:
                    raise
                seen = await self._backend.head(bucket.location, name)
                if seen == fence.etag:
                    break
                until = self.lease_from(time.time())
                if not await self._index.run(reservations.renew, token, bucket.id, key, until):
                    raise
                fence = Fence(seen)
        return await put(None)

    async def settled(self, bucket_id: str, key: str, published: StoredBlob) -> FileRecord | None:
        """The record another gateway committed for this write after its lease lapsed, if
        the key's record is it."""
        found = await self._index.run(files.get_file, bucket_id, key)
        if found is None or found.object_key != published.object_key:
            return None
        # the settler's record holds the tag its HEAD gave, quoted; a copy's own, bare
        return found if same_tag(found.backend_etag, published.backend_etag) else None

    async def recommit(
        self, bucket: Bucket, key: str, published: StoredBlob, pending: Pending, quota: int
    ) -> FileRecord:
        """This write's reservation was released while it stalled (its object was not in
        the cluster yet), and it published since over the object the key's record names
        (its fence held): left so, the record names an object the cluster no longer holds
        (404 until the key's next write). So it claims the key again and commits what the
        cluster holds there if that is still its object. Otherwise a later write replaced
        it, or a settler committed it before that: the outcome is unknown, a 503, never a
        refusal (409) that says the write took no effect."""
        token = uuid.uuid4().hex
        until, _ = await self.reserve(token, bucket, key, published, pending, quota, None)
        async with self.held(token, bucket.id, key, until):
            own = self.own(token, bucket, key, published, pending)
            if await self.settle(own):
                found = await self.settled(bucket.id, key, published)
                if found is not None:
                    return found
        raise BackendUnavailable(OUTCOME_UNKNOWN)
