"""Rate limits counted once for all the workers of one server (`bucketd serve --workers N`).

The counters live in memory shared by the workers: an anonymous file, mapped by each, made
before they are forked. A slot is (window, identity hash, count); an identity's slot is
found by open addressing from its hash, and a slot of an older window is free, so a new
window empties the table for every identity at once. Each hit takes an exclusive POSIX
record lock (`lockf`: per process, where the inherited descriptor would make `flock` one
lock for all) on the file for the few microseconds of the update: the kernel drops a lock with the
process that held it, so a worker killed mid-update cannot wedge the others. Should a window
see more identities than the table probes reach, the rest are counted per worker, and the
log says so once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import mmap
import os
import struct

from gateway.http.ratelimit import Decision, RateLimiter, decide

logger = logging.getLogger("bucketd.ratelimit")
SLOT = struct.Struct("<qQq")
SLOTS = 1 << 16
PROBES = 64


class WorkerRateLimiter:
    """Made by the supervisor before it forks; used by every worker."""

    def __init__(self, window_seconds: int = 60, slots: int = SLOTS) -> None:
        self.window_seconds = window_seconds
        self._slots = slots
        self._fd = os.memfd_create("bucketd-ratelimit", 0)
        os.ftruncate(self._fd, slots * SLOT.size)
        self._memory = mmap.mmap(self._fd, slots * SLOT.size)
        self._overflow = RateLimiter(window_seconds)
        self._warned = False

    async def hit(self, identity: str, limit: int, now: float) -> Decision:
        window = int(now // self.window_seconds)
        count = self._count(window, _hash(identity))
        if count is None:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "more identities in one window than the shared rate-limit table holds: "
                    "the rest are counted per worker"
                )
            return await self._overflow.hit(identity, limit, now)
        return decide(count, limit, window, self.window_seconds, now)

    def _count(self, window: int, identity: int) -> int | None:
        """The identity's count in `window` after this hit; None when no slot is left."""
        memory, size = self._memory, SLOT.size
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            slot = identity % self._slots
            for _ in range(PROBES):
                offset = slot * size
                slot_window, slot_identity, count = SLOT.unpack_from(memory, offset)
                if slot_window != window:
                    SLOT.pack_into(memory, offset, window, identity, 1)
                    return 1
                if slot_identity == identity:
                    SLOT.pack_into(memory, offset, window, identity, count + 1)
                    return int(count + 1)
                slot = (slot + 1) % self._slots
            return None
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    async def close(self) -> None:
        """The mapping lives as long as the process: workers share it until they exit."""


def _hash(identity: str) -> int:
    return int.from_bytes(hashlib.blake2b(identity.encode(), digest_size=8).digest(), "little")
