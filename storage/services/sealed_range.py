"""A large range of an encrypted content in a local blob file, opened about a MiB at a
time into a buffer it keeps (a `bodies.FilledRange`).

Why not `encryption.open_stream` over the backend's chunks: that path pays, per MiB, a
fresh `bytes` for the read, one per 64 KiB package opened and one joining them, the
carry of a package split between two reads, and a thread hop and an event-loop send per
chunk; together they cost the server about four times the AES. Here one blocking call
(a worker thread's) reads 16 whole packages with `preadv` into the thread's buffer
(`_sealed_buffer`) and opens them with `decrypt_into` into the range's, and the server
writes that buffer to the socket in the same thread (`gateway/http/zero_copy.py`);
nothing is allocated per package or per block. A range still reads only the packages it
covers (`encryption.span`), and a changed, moved or cut package is `ContentTampered`,
never bytes."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from storage import encryption
from storage.bodies import OpenRange
from storage.errors import BackendUnavailable

T = TypeVar("T")
BLOCK_PACKAGES = 16
"""Packages read and opened per call: about a MiB, as the plaintext reads' chunks."""

_THREAD = threading.local()


def _sealed_buffer() -> memoryview:
    """The calling thread's buffer for the sealed packages of one block. They are read and
    opened within one `next_block` call, so a range need not keep a buffer of its own: a
    download whose client stops reading holds only its plaintext block (it held both, about
    1.9 MiB, so 1024 stalled downloads from one client pinned 1.9 GiB)."""
    found: memoryview | None = getattr(_THREAD, "sealed", None)
    if found is None:
        found = _THREAD.sealed = memoryview(bytearray(BLOCK_PACKAGES * encryption.SEALED_PACKAGE))
    return found


class SealedRange:
    """Plaintext [start, end) of a content of `plain_size` bytes sealed in the stored range
    `stored` (which `encryption.span(start, end, plain_size)` names, and which this
    closes)."""

    def __init__(
        self,
        stored: OpenRange,
        key: bytes,
        start: int,
        end: int,
        plain_size: int,
        executor: Executor,
    ) -> None:
        self._stored = stored
        where = encryption.span(start, end, plain_size)
        if (stored.offset, stored.count) != (
            where.stored_start,
            where.stored_end - where.stored_start,
        ):
            raise ValueError("the stored range is not the one the plaintext range covers")
        self.count = end - start
        self._aead = encryption.cipher(key)
        self._total = encryption.packages(plain_size)
        self._number = where.first
        self._position = where.stored_start
        self._stored_end = where.stored_end
        self._skip = where.skip
        self._left = end - start
        self._plain = memoryview(bytearray(BLOCK_PACKAGES * encryption.PACKAGE))
        self._primed: memoryview | None = None
        self._executor = executor
        self._busy: asyncio.Future[Any] | None = None

    def next_block(self) -> memoryview:
        """The next block of plaintext, empty at the end: a view of a buffer the next call
        overwrites. Blocking (a worker thread's call); `ContentTampered` for a package that
        does not open, `BackendUnavailable` for a blob file shorter than its record."""
        if self._primed is not None:
            block, self._primed = self._primed, None
            return block
        if self._position >= self._stored_end:
            return self._plain[:0]
        want = min(BLOCK_PACKAGES * encryption.SEALED_PACKAGE, self._stored_end - self._position)
        sealed = _sealed_buffer()[:want]
        got = 0
        while got < want:
            read = os.preadv(self._stored.fd, [sealed[got:]], self._position + got)
            if read == 0:
                raise BackendUnavailable("the blob is shorter than the index says")
            got += read
        self._position += want
        opened = encryption.open_packages_into(
            self._aead, self._number, self._total, sealed, self._plain
        )
        self._number += -(-want // encryption.SEALED_PACKAGE)
        block = self._plain[self._skip : min(opened, self._skip + self._left)]
        self._skip = 0
        self._left -= len(block)
        return block

    async def start(self) -> SealedRange:
        """Open the first block now: a content whose first package fails is an error
        status, not a 200 cut short. Closes the blob file if it fails."""
        try:
            self._primed = await self._hop(self.next_block)
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _hop(self, work: Callable[[], T]) -> T:
        busy = asyncio.get_running_loop().run_in_executor(self._executor, work)
        self._busy = busy
        return await busy

    def __aiter__(self) -> SealedRange:
        return self

    async def __anext__(self) -> bytes:
        """For a reader that takes chunks (a TLS connection, a copy): one thread hop and
        one `bytes` per block."""
        try:
            chunk = await self._hop(lambda: bytes(self.next_block()))
        except BaseException:
            await self.aclose()
            raise
        if not chunk:
            # Readers that take every chunk (a copy's) need not close what they read.
            await self.aclose()
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        """Close the blob file, once a block being read (the reader gone meanwhile) is."""
        if self._busy is not None and not self._busy.done():
            await asyncio.wait([self._busy])
        await self._stored.aclose()

    def __del__(self) -> None:
        """A reader that dropped it halfway without closing it (an async generator's
        finalizer closed the chunk path's file the same way)."""
        if self._stored.fd >= 0:
            os.close(self._stored.fd)
            self._stored.fd = -1
