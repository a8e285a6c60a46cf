"""Per-key locks for backends where a key names one mutable object (S3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class KeyLocks:
    """Serialise publish-and-commit (and deletes, renames) of the same key in one process.

    Two uploads to one key must reach the index in the order they reached the backend;
    holding the key's lock from "complete the upload" to "commit the row" guarantees it.
    Locks are created on demand and dropped when nobody waits for them.
    """

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, bucket_id: str, *keys: str) -> AsyncIterator[None]:
        names = sorted({(bucket_id, key) for key in keys})
        for name in names:
            lock, users = self._locks.get(name, (asyncio.Lock(), 0))
            self._locks[name] = (lock, users + 1)
        acquired: list[asyncio.Lock] = []
        try:
            for name in names:
                lock = self._locks[name][0]
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in acquired:
                lock.release()
            for name in names:
                lock, users = self._locks[name]
                if users <= 1:
                    del self._locks[name]
                else:
                    self._locks[name] = (lock, users - 1)
