"""Limits applied to an upload stream while it flows."""

from __future__ import annotations

from collections.abc import AsyncIterator

from storage.errors import QuotaExceeded, TooLarge


async def limited(
    chunks: AsyncIterator[bytes], max_bytes: int, quota_left: int
) -> AsyncIterator[bytes]:
    """Pass chunks through, failing the moment the total passes the size limit or quota.

    The size limit is checked first, so a body over both limits is a 413, as it would be
    from its Content-Length.
    """
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > max_bytes:
            raise TooLarge(f"the upload passes the bucket's limit of {max_bytes} bytes")
        if total > quota_left:
            raise QuotaExceeded("the upload would bring the organization past its storage quota")
        yield chunk


async def prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


async def once(data: bytes) -> AsyncIterator[bytes]:
    """A stream of one chunk."""
    yield data
