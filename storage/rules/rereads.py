"""When a GET looks a key up again: the content it found would not open because the key's
content was replaced meanwhile. On the S3 backend an overwrite publishes the new object at
the key, then commits it to the index: between the two, the index still names the old
record while the cluster's object is the new one (not of the record's ETag), and every
lookup finds that same old record until the commit lands; an overwrite committed between a
lookup and its open gives a new record at the next lookup.

Two attempts, one after the other, were too few: a reader of a key overwritten every few
dozen milliseconds through three gateways got 404, though the key existed throughout, a
read no linearization explains (tests/test_linearizable_cluster.py found it). Now a new
record is looked at again at once. The same record failing again asks the storage what
replaced it (`replaced`, `backends/s3/settle.py`): a live write of the key in flight is
waited for (a pause, 5 ms doubling to 100 ms, for as long as it lives, up to
`WRITER_WAIT_SECONDS`), a write whose writer is gone is settled there and then and the key
looked at again at once. Otherwise the record is looked at again after a pause until
`SETTLE_SECONDS` have passed; the same record failing past that, and again at one more
lookup made then, is not a race: its content is gone (FileNotFound, as before). A key
replaced under every one of `READ_ATTEMPTS` lookups, or a writer outliving the wait, is a
503 for the client to try again, never a 404.

The rule is storage's: the HTTP handlers only loop (`Files.rereads`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal

from storage.errors import BackendUnavailable
from storage.models import FileRecord

READ_ATTEMPTS = 50
SETTLE_SECONDS = 1.0
WRITER_WAIT_SECONDS = 30.0
"""Longer than a write lease (`storage.s3.write_lease_seconds`, 5 s by default): a writer
that dies is settled once its lease lapses, within this wait."""

Replaced = Literal["writing", "settled", "none"]
"""What replaced a record whose content would not open: a live write of the key is in
flight (wait for its commit), a write whose writer was gone was just settled (look again),
or nothing the storage knows of."""


async def nothing_known(record: FileRecord) -> Replaced:
    return "none"


class Rereads:
    """One GET's lookups: `for _ in rereads.attempts()`, `await rereads.raced(record)` when
    the record's content would not open, `raise rereads.exhausted(key)` after the loop."""

    def __init__(
        self,
        replaced: Callable[[FileRecord], Awaitable[Replaced]] = nothing_known,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._replaced = replaced
        self._clock = clock
        self._sleep_for = sleep
        self._failed: FileRecord | None = None
        self._since = 0.0
        self._pause = 0.005
        self._last_look = False
        self._waited_since: float | None = None
        self._tries = 0

    def attempts(self) -> Iterator[int]:
        """Up to READ_ATTEMPTS lookups, besides those made while a live writer is waited for."""
        while self._tries < READ_ATTEMPTS:
            self._tries += 1
            yield self._tries

    async def raced(self, record: FileRecord) -> bool:
        """Whether to look the key up again after `record`'s content would not open (after
        a pause when it is the record that failed last time); False once its content is
        gone for good."""
        if record != self._failed:
            self._failed, self._since, self._pause = record, self._clock(), 0.005
            self._last_look = False
            return True
        replaced = await self._replaced(record)
        if replaced == "settled":
            return True
        if replaced == "writing":
            now = self._clock()
            if self._waited_since is None:
                self._waited_since = now
            if now - self._waited_since < WRITER_WAIT_SECONDS:
                self._tries -= 1  # a wait for a live writer is not one of the attempts
                self._since = now  # the settling time counts from its end
                await self._sleep()
                return True
        if self._clock() - self._since > SETTLE_SECONDS:
            # Past the settling time, one more lookup made now decides: an open that hung
            # through it (a stalled cluster) says nothing of what the key holds since.
            if self._last_look:
                return False
            self._last_look = True
            return True
        await self._sleep()
        return True

    async def _sleep(self) -> None:
        await self._sleep_for(self._pause)
        self._pause = min(0.1, self._pause * 2)

    def exhausted(self, key: str) -> BackendUnavailable:
        return BackendUnavailable(
            f"{key!r} was replaced {READ_ATTEMPTS} times while being read; try again"
        )
