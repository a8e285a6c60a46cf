"""Uvicorn's httptools protocol, guarding the connection before a request reaches the app.

- Requests that never reach the app (unparseable request lines, invalid bytes in the path,
  header blocks over MAX_HEAD_BYTES) would get Uvicorn's plain-text 400; clients of a JSON
  API deserve the same envelope as every other error, and an oversized header block a 431.
- A request head must arrive whole within `head_timeout_seconds` of the connection (or of
  the request's first byte): a client that opens connections and sends nothing, or half a
  head, gets a 408 and is closed, instead of holding a file descriptor for ever.
- Connections are counted in total and per client address (`ConnectionGuard`, shared by
  both listeners); one past a cap gets a 503 and is closed at once.
- File bodies may be sent by `sendfile` (`zero_copy.py`).
- A stopping server answers the first request of a connection it had just accepted.
- A stopping server closes a TLS connection without waiting for the client's close_notify.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import struct
import termios
import weakref
from collections import Counter
from typing import Any

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from gateway.http import zero_copy
from gateway.http.envelope import error_body
from gateway.settings import ConnectionSettings

MAX_HEAD_BYTES = 64 * 1024
REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class ConnectionGuard:
    """Open connections, in total and per client address, against their caps."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self.total = 0
        self.by_client: Counter[str] = Counter()

    def admit(self, client: str) -> str | None:
        """Count a new connection in; why not, when a cap is reached."""
        if self.total >= self.settings.max_total:
            return f"the server holds {self.total} connections, its limit"
        if self.by_client[client] >= self.settings.max_per_client:
            return f"your address holds {self.by_client[client]} connections, the limit per client"
        self.total += 1
        self.by_client[client] += 1
        return None

    def release(self, client: str) -> None:
        self.total -= 1
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]


def guarded(guard: ConnectionGuard) -> type[EnvelopeProtocol]:
    """The protocol class of a listener whose connections `guard` counts."""
    return type("GuardedProtocol", (EnvelopeProtocol,), {"guard": guard})


FIRST_REQUEST_GRACE_SECONDS = 1.0
"""How long a stopping worker waits for the first request of a connection it accepted just
before it stopped: closing it at once would drop that request unanswered (the client sent
it to a listener that was open), which a rolling restart must not."""


TLS_CLOSE_NOTIFY_SECONDS = 0.5
"""How long a stopping server waits for a client's TLS close_notify once everything it sent
has reached the socket. asyncio waits 30 s (`ssl_shutdown_timeout`, which Uvicorn gives no
way to set), and a client that keeps an idle connection in its pool (boto3, a browser)
never answers: the stop then waited for Uvicorn's graceful limit, 10 s, with nothing left
in flight. Not waiting for the peer's close_notify is what TLS allows (RFC 8446, 6.1)."""


LOOK_LATE_SECONDS = 0.05
"""A look at a closing TLS connection that comes this much later than due is not trusted:
over TLS the transport's buffer is the TLS layer's, and what the TCP transport under it
still holds is counted nowhere; the kernel's queue (SIOCOUTQ) stands for it only while the
loop sends it as the socket takes it. A loop held up meanwhile (a long callback), the
client may drain the kernel's queue, and a look that runs before the loop sends the rest
(libuv runs timers before it polls) sees nothing unacknowledged. A look on time comes after
a poll that waited, which sent whatever the socket took."""


def _unacknowledged(transport: asyncio.BaseTransport) -> int:
    """Bytes written to `transport` that the peer has not acknowledged: those still in the
    transport's buffers, and those in the kernel's send queue (SIOCOUTQ: unsent and unacked;
    the event loop queues a byte only when the kernel's queue is full)."""
    buffered = transport.get_write_buffer_size()  # type: ignore[attr-defined]
    sock = transport.get_extra_info("socket")
    if buffered or sock is None:
        return int(buffered)
    try:
        queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except OSError:  # closed meanwhile
        return 0
    return int(struct.unpack("i", queued)[0])


class ListenerState(ServerState):
    """Uvicorn's state of a listener, shared by its connections, and the TLS connections
    accepted whose handshake is not done: Uvicorn counts a connection (and a stop looks at
    it) only from `connection_made`, which comes after the handshake."""

    def __init__(self) -> None:
        super().__init__()
        self.handshaking: weakref.WeakSet[EnvelopeProtocol] = weakref.WeakSet()

    async def wait_for_handshakes(self, limit: float) -> None:
        """Wait, at most `limit` s, for the TLS handshakes in progress to end: a stop that
        came just after such a connection was accepted then sees it, and gives it the first
        request's grace, as it does a plain connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        if self.handshaking:  # one whose handshake failed is told nothing, and its parser
            gc.collect()  # holds it in a cycle: only a collection takes it out of the set
        while loop.time() < deadline and self.handshaking:
            await asyncio.sleep(0.02)


class HeadTooLarge(Exception):
    pass


class EnvelopeProtocol(HttpToolsProtocol):
    guard: ConnectionGuard | None = None
    head_bytes = 0
    head_too_large = False
    admitted: str | None = None
    """The client address this connection is counted under (None: not counted)."""
    head_timer: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.is_ssl and isinstance(self.server_state, ListenerState):
            self.server_state.handshaking.add(self)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if isinstance(self.server_state, ListenerState):
            self.server_state.handshaking.discard(self)
        super().connection_made(transport)
        if self.guard is None:
            return
        client = self.client[0] if self.client else ""
        refusal = self.guard.admit(client)
        if refusal is not None:
            self._reply(503, "too_many_connections", refusal, b"retry-after: 1\r\n")
            return
        self.admitted = client
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._disarm_head_timer()
        if self.admitted is not None and self.guard is not None:
            self.guard.release(self.admitted)
            self.admitted = None
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self.guard is not None:
            self._disarm_head_timer()
            timeout = self.guard.settings.head_timeout_seconds
            self.head_timer = self.loop.call_later(timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if not self.transport.is_closing():
            timeout = self.guard.settings.head_timeout_seconds if self.guard else 0
            self._reply(
                408, "request_timeout", f"the request head did not arrive within {timeout} s"
            )

    draining = False
    lost = False
    closed_since: float | None = None
    cut_due: float | None = None

    def shutdown(self) -> None:
        if self.config.is_ssl:
            self._cut_tls_close()
        if self.cycle is None and not self.transport.is_closing():
            self.draining = True
            self.loop.call_later(FIRST_REQUEST_GRACE_SECONDS, self._close_if_unused)
            return
        super().shutdown()

    def _close_if_unused(self) -> None:
        if self.cycle is None:
            self.transport.close()

    def _cut_tls_close(self) -> None:
        """Looked at four times a `TLS_CLOSE_NOTIFY_SECONDS` while the server stops: a TLS
        connection that has been closing for that long, every byte of ours acknowledged by
        the client, is waiting only for the client's close_notify, and is cut (an abort
        drops what is still buffered: a slow reader's last bytes are waited for). One still
        answering (or draining) is looked at again."""
        if self.lost:
            return
        now = self.loop.time()
        held = self.cut_due is None or now - self.cut_due > LOOK_LATE_SECONDS
        if held:  # the first look, or one the loop held up: not trusted (`LOOK_LATE_SECONDS`)
            self.closed_since = None
        elif self.transport.is_closing() and not _unacknowledged(self.transport):
            if self.closed_since is None:
                self.closed_since = now
            elif now - self.closed_since >= TLS_CLOSE_NOTIFY_SECONDS:
                self.transport.abort()
                return
        else:
            self.closed_since = None
        self.cut_due = now + TLS_CLOSE_NOTIFY_SECONDS / 4
        self.loop.call_later(TLS_CLOSE_NOTIFY_SECONDS / 4, self._cut_tls_close)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes = 0
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._disarm_head_timer()
        zero_copy.offer(self.scope, self.transport)  # type: ignore[arg-type]
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not None and self.cycle is not previous:
            zero_copy.wrap(self.cycle)
            if self.draining:
                self.cycle.keep_alive = False

    def _count(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > MAX_HEAD_BYTES:
            self.head_too_large = True
            raise HeadTooLarge

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if self.head_too_large:
            status, code = 431, "headers_too_large"
            message = f"the request line and headers are larger than {MAX_HEAD_BYTES} bytes"
        else:
            status, code = 400, "malformed_request"
            message = "the request is not valid HTTP/1.1 (or its path is not ASCII)"
        self._reply(status, code, message)

    def _reply(self, status: int, code: str, message: str, extra: bytes = b"") -> None:
        """An error in the envelope, written straight to the socket, which is then closed."""
        body = msgspec.json.encode(error_body(code, message))
        head = [
            b"HTTP/1.1 %d %s\r\n" % (status, REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            extra,
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
