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

A body made block by block into a buffer the app reuses (an encrypted blob opened in
place: `storage/services/sealed_range.py`) is the `FILLED` message: the same worker
thread makes each block and writes it to the socket, so the block is never copied into
the transport's buffer nor held past the write, and the loop sees one hop per several
blocks; a full socket is waited for on the loop, as for `sendfile`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

EXTENSION = "http.response.zerocopysend"
STILL_ALLOWED = "bucketd.still_allowed"
ABORT = "bucketd.response.abort"
FILLED = "bucketd.response.filled"
"""Keys: `next_block` (a blocking callable: the next block as a memoryview, empty at the
end), `count` (the bytes it makes in all), and optionally `STILL_ALLOWED`."""
FILLED_PER_HOP = 8 * 1024 * 1024
"""Bytes a `FILLED` body writes per worker-thread hop before the key is asked again."""


def offer(scope: dict[str, Any], transport: asyncio.Transport) -> None:
    if transport.get_extra_info("sslcontext") is None and transport.get_extra_info("socket"):
        scope.setdefault("extensions", {})[EXTENSION] = {}


def wrap(cycle: Any) -> None:
    """Have `cycle` (a Uvicorn RequestResponseCycle) take zero-copy and abort messages."""
    send: Callable[[dict[str, Any]], Awaitable[None]] = cycle.send

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == FILLED:
            if not cycle.disconnected and cycle.scope["method"] != "HEAD":
                await _send_filled(cycle, message["next_block"], message.get(STILL_ALLOWED))
            if not cycle.disconnected:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
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


async def _socket_of(transport: asyncio.Transport) -> int:
    """A descriptor of the transport's socket of the caller's own, once what the transport
    buffered (the response's start) has gone out: the body's bytes must follow it."""
    while transport.get_write_buffer_size() and not transport.is_closing():
        await asyncio.sleep(0.001)
    return os.dup(transport.get_extra_info("socket").fileno())


async def _sendfile(
    cycle: Any,
    file: int,
    offset: int,
    count: int,
    allowed: Callable[[], Awaitable[bool]] | None,
) -> None:
    transport: asyncio.Transport = cycle.transport
    loop = asyncio.get_running_loop()
    out = await _socket_of(transport)
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


async def _send_filled(
    cycle: Any,
    next_block: Callable[[], memoryview],
    allowed: Callable[[], Awaitable[bool]] | None,
) -> None:
    transport: asyncio.Transport = cycle.transport
    loop = asyncio.get_running_loop()
    out = await _socket_of(transport)
    pending = memoryview(b"")
    try:
        while True:
            if allowed is not None and not await allowed():
                _cut(cycle)
                return
            work = loop.run_in_executor(None, _pump, out, next_block, pending)
            try:
                pending, sent, state = await work
            except asyncio.CancelledError:
                await _outlast(work)  # the thread writes to `out` and the app's buffer
                raise
            cycle.expected_content_length -= sent
            if state == _GONE:
                cycle.disconnected = True
                transport.close()
                return
            if state == _DONE:
                return
            if state == _FULL:
                await _writable(loop, out)
    finally:
        os.close(out)


async def _outlast(work: asyncio.Future[Any]) -> None:
    """Wait for a worker thread's `work` to end however often this task is cancelled
    meanwhile: until then it writes to a descriptor the caller would close (whose number a
    new connection may take) from a buffer the caller would reuse."""
    while not work.done():
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError:
            continue


_DONE, _FULL, _MORE, _GONE = range(4)


def _pump(
    out: int, next_block: Callable[[], memoryview], pending: memoryview
) -> tuple[memoryview, int, int]:
    """In a worker thread: write `pending`, then block after block, until the body ends
    (_DONE), the socket is full (_FULL), FILLED_PER_HOP bytes went (_MORE) or the client
    left (_GONE); what is left of the block being written, and the bytes written."""
    sent = 0
    while sent < FILLED_PER_HOP:
        if not pending:
            pending = next_block()
            if not pending:
                return pending, sent, _DONE
        try:
            written = os.write(out, pending)
        except BlockingIOError:
            return pending, sent, _FULL
        except OSError:
            return pending, sent, _GONE
        sent += written
        pending = pending[written:]
    return pending, sent, _MORE


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
