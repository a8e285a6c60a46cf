"""The bodies a read hands a server that it can send without copying the content through
Python: a range of an open local blob (sent by the kernel), or an encrypted one opened block by
block into a buffer the sending thread writes from. `gateway/http/content.py` answers each
kind in its own way; anything else is an async iterator of chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable


@runtime_checkable
class OpenRange(Protocol):
    """A file's content that is a range of an open file on this machine (a local blob):
    readable as chunks, or sent by the kernel from `fd` without passing through Python."""

    fd: int
    offset: int
    count: int

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class FilledRange(Protocol):
    """A file's content made block by block into a buffer of its own by a blocking call,
    which a server writes to the socket from the same worker thread (an encrypted local
    blob: `services/sealed_range.py`); readable as chunks too."""

    count: int

    def next_block(self) -> memoryview:
        """The next block, empty at the end; the next call may overwrite it."""
        ...

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...
