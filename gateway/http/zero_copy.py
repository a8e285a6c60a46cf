"""The ASGI "zero copy send" extension on Uvicorn's protocol: a response body that is a
range of an open file goes from the page cache to the socket by `sendfile`, never through
Python's memory (a 1 GiB download otherwise copies every byte into a `bytes` and out
again). Offered on plain-text connections only: TLS must see the bytes.

The socket is the transport's; its write buffer is empty first (the response head went
out), then `sendfile` runs in a worker thread (it may wait for the disk) and, when the
socket is full, the loop waits for it to drain on a duplicate of the descriptor (uvloop
refuses a watcher on the transport's own), so a slow client holds no thread.

A zero-copy message may carry `STILL_ALLOWED`, an async callable asked before each
`sendfile`: once it answers False the connection is dropped mid-body. The same cut, for a
body sent chunk by chunk, is the `ABORT` message (ASGI has none): the client sees a body
shorter than its Content-Length, never one that looks whole.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

EXTENSION = "http.response.zerocopysend"
STILL_ALLOWED = "bucketd.still_allowed"
ABORT = "bucketd.response.abort"


def offer(scope: dict[str, Any], transport: asyncio.Transport) -> None:
    if transport.get_extra_info("sslcontext") is None and transport.get_extra_info("socket"):
        scope.setdefault("extensions", {})[EXTENSION] = {}


def wrap(cycle: Any) -> None:
    """Have `cycle` (a Uvicorn RequestResponseCycle) take zero-copy and abort messages."""
    send: Callable[[dict[str, Any]], Awaitable[None]] = cycle.send

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] != EXTENSION:
            if message["type"] == ABORT:
                _cut(cycle)
                return
            await send(message)
            return
        if not cycle.disconnected and cycle.scope["method"] != "HEAD":
            await _sendfile(
                cycle,
                message["file"],
                message.get("offset") or 0,
                message["count"],
                message.get(STILL_ALLOWED),
            )
        if not cycle.disconnected:
            more = message.get("more_body", False)
            await send({"type": "http.response.body", "body": b"", "more_body": more})

    cycle.send = sending


def _cut(cycle: Any) -> None:
    """End the response where it is: the connection is dropped with whatever it had not yet
    written (a client that stopped reading is owed nothing, and holds nothing open)."""
    cycle.disconnected = True
    cycle.transport.abort()


async def _sendfile(
    cycle: Any,
    file: int,
    offset: int,
    count: int,
    allowed: Callable[[], Awaitable[bool]] | None,
) -> None:
    transport: asyncio.Transport = cycle.transport
    loop = asyncio.get_running_loop()
    while transport.get_write_buffer_size() and not transport.is_closing():
        await asyncio.sleep(0.001)
    out = os.dup(transport.get_extra_info("socket").fileno())
    try:
        while count > 0:
            if allowed is not None and not await allowed():
                _cut(cycle)
                return
            try:
                sent = await loop.run_in_executor(None, os.sendfile, out, file, offset, count)
            except BlockingIOError:
                await _writable(loop, out)
                continue
            except OSError:
                sent = 0
            if sent == 0:  # the client went away (or the file is shorter than said)
                cycle.disconnected = True
                transport.close()
                return
            offset += sent
            count -= sent
            cycle.expected_content_length -= sent
    finally:
        os.close(out)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready = loop.create_future()

    def woken() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, woken)
    try:
        await ready
    finally:
        loop.remove_writer(fd)
