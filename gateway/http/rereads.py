"""When a GET looks a key up again: the content it found would not open because the key's
content was replaced meanwhile. On the S3 backend an overwrite publishes the new object at
the key, then commits it to the index: between the two, the index still names the old
record while the cluster's object is the new one (not of the record's ETag), and every
lookup finds that same old record until the commit lands; an overwrite committed between a
lookup and its open gives a new record at the next lookup.

Two attempts, one after the other, were too few: a reader of a key overwritten every few
dozen milliseconds through three gateways got 404, though the key existed throughout, a
read no linearization explains (tests/test_linearizable_cluster.py found it). Now a new
record is looked at again at once, and the same record failing again is looked at again
after a pause (5 ms, doubling, up to 100 ms) until `SETTLE_SECONDS` have passed: a commit
comes within milliseconds of its publish. The same record failing past that, and again at
one more lookup made then, is not a race: its content is gone (FileNotFound, as before); a
key replaced under every one of `READ_ATTEMPTS` lookups is a 503 for the client to try
again, never a 404."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from storage.errors import BackendUnavailable
from storage.models import FileRecord

READ_ATTEMPTS = 50
SETTLE_SECONDS = 1.0


class Rereads:
    """One GET's lookups: `for _ in rereads.attempts()`, `await rereads.raced(record)` when
    the record's content would not open, `raise rereads.exhausted(key)` after the loop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failed: FileRecord | None = None
        self._since = 0.0
        self._pause = 0.005
        self._last_look = False

    def attempts(self) -> range:
        return range(READ_ATTEMPTS)

    async def raced(self, record: FileRecord) -> bool:
        """Whether to look the key up again after `record`'s content would not open (after
        a pause when it is the record that failed last time); False once its content is
        gone for good."""
        if record != self._failed:
            self._failed, self._since, self._pause = record, self._clock(), 0.005
            self._last_look = False
            return True
        if self._clock() - self._since > SETTLE_SECONDS:
            # Past the settling time, one more lookup made now decides: an open that hung
            # through it (a stalled cluster) says nothing of what the key holds since.
            if self._last_look:
                return False
            self._last_look = True
            return True
        await asyncio.sleep(self._pause)
        self._pause = min(0.1, self._pause * 2)
        return True

    def exhausted(self, key: str) -> BackendUnavailable:
        return BackendUnavailable(
            f"{key!r} was replaced {READ_ATTEMPTS} times while being read; try again"
        )
