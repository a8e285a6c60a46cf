"""A counter shared by the workers of one server (`bucketd serve --workers N`), made by the
supervisor before it forks: an 8-byte anonymous file mapped by each worker.

Key revocations bump it. A worker that revokes a key bumps it before it answers, and every
worker compares it with the value its cached keys were verified under, so no worker
accepts a revoked key once the revocation was answered, even before the commit notice
(relayed through the supervisor) reaches it. A read is one memory load; a bump takes a
POSIX record lock for the increment.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct

COUNTER = struct.Struct("<Q")


class Generation:
    def __init__(self) -> None:
        self._fd = os.memfd_create("bucketd-generation", 0)
        os.ftruncate(self._fd, COUNTER.size)
        self._memory = mmap.mmap(self._fd, COUNTER.size)

    def value(self) -> int:
        value: int = COUNTER.unpack_from(self._memory)[0]
        return value

    def bump(self) -> None:
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            COUNTER.pack_into(self._memory, 0, self.value() + 1)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
