"""Timestamps as the index stores them (UTC `YYYY-MM-DDTHH:MM:SSZ`), and the server's clock.

`Clock` is "now" for every rule that compares a moment with one stored or signed: key
expiry, signed links and presigned URLs, rate-limit windows, object-lock retention,
lifecycle expiry. It is the system's time plus an offset that only test mode moves
(`gateway/api/testmode.py`), so a test sees a year pass at once. One is made at start-up
and passed down; the offset lives in an 8-byte shared mapping made before the workers
fork, so every worker of one server reads the same one (a read is one memory load).
Monotonic deadlines (an upload's) measure durations, not moments, and stay on the system's
monotonic clock.
"""

from __future__ import annotations

import fcntl
import math
import mmap
import os
import struct
import time
from collections.abc import Callable
from datetime import UTC, datetime

OFFSET = struct.Struct("<d")


class ClockLimit(ValueError):
    """A move that would take the clock beyond its bound (or to NaN); nothing changed."""


def unix_to_iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def iso_to_unix(value: str) -> int:
    """Seconds since the epoch of a stored `...Z` timestamp (fromisoformat is C-fast)."""
    return int(datetime.fromisoformat(value).timestamp())


class Clock:
    """The system's time plus a shared offset (0 unless test mode moved it)."""

    def __init__(self) -> None:
        self._fd = os.memfd_create("bucketd-clock", 0)
        os.ftruncate(self._fd, OFFSET.size)
        self._memory = mmap.mmap(self._fd, OFFSET.size)

    def offset(self) -> float:
        value: float = OFFSET.unpack_from(self._memory)[0]
        return value

    def time(self) -> float:
        """Seconds since the epoch, as `time.time()`, moved by the offset."""
        return time.time() + self.offset()

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.time(), UTC)

    def iso(self) -> str:
        return unix_to_iso(self.time())

    def set_offset(self, seconds: float, most: float = math.inf) -> None:
        """Set the offset; `ClockLimit` (nothing changed) when it is NaN or farther than
        `most` seconds from the system's time."""
        self._move(lambda _offset: seconds, most)

    def advance(self, seconds: float, most: float = math.inf) -> float:
        """Move the clock forward by `seconds` (atomically with the other workers' moves);
        the new offset. `ClockLimit` (nothing changed) when the new offset would be NaN or
        farther than `most` seconds from the system's time: the bound is checked under the
        same lock as the move, so workers moving the clock at once cannot together pass it."""
        return self._move(lambda offset: offset + seconds, most)

    def _move(self, to: Callable[[float], float], most: float) -> float:
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            moved = to(self.offset())
            if not abs(moved) <= most:  # also refuses NaN
                raise ClockLimit(f"the clock moves at most {most:g} seconds from the system's")
            OFFSET.pack_into(self._memory, 0, moved)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        return moved
