"""Every request body within the upload deadline, and a connection answered before its
body ends closed rather than drained (issue 32 point 8): a body trickled after a 401 no
longer holds a connection slot for minutes, nor does a JSON body sent a byte at a time."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.live import TEST_CONFIG, LiveServer

DEADLINE = 2


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    config = TEST_CONFIG + f"\n[uploads]\ndeadline_seconds = {DEADLINE}\n"
    live = LiveServer(tmp_path_factory.mktemp("deadline") / "data", config).start()
    yield live
    live.stop()


def _answer_then_closed(port: int, head: bytes, trickle: bool = False) -> tuple[bytes, float]:
    """The response's first line, and how long after it the server closed the connection
    (a client sending its body a byte a second meanwhile, when `trickle`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        sock.settimeout(0.5)
        received = b""
        started = time.monotonic()
        while b"\r\n\r\n" not in received and time.monotonic() - started < 30:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if trickle:
                    sock.sendall(b" ")
                continue
            if not chunk:
                break
            received += chunk
        answered = time.monotonic()
        while time.monotonic() - started < 20:
            try:
                if not sock.recv(65536):
                    return received.split(b"\r\n", 1)[0], time.monotonic() - answered
            except TimeoutError:
                try:
                    sock.sendall(b"x")
                except OSError:
                    return received.split(b"\r\n", 1)[0], time.monotonic() - answered
            except OSError:
                return received.split(b"\r\n", 1)[0], time.monotonic() - answered
        return received.split(b"\r\n", 1)[0], float("inf")


def test_a_connection_answered_before_its_body_is_closed(short: LiveServer) -> None:
    head = (
        b"POST /v1/buckets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer svc_nope\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    status, closed_after = _answer_then_closed(short.port, head)
    assert status.startswith(b"HTTP/1.1 401") and closed_after < 5
    s3_head = b"PUT /bucket/key HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    status, closed_after = _answer_then_closed(short.s3_port, s3_head)
    assert status.startswith(b"HTTP/1.1 403") and closed_after < 5


def test_a_json_body_trickled_past_the_deadline_is_cut(short: LiveServer) -> None:
    head = (
        f"POST /v1/buckets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {short.admin_key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    started = time.monotonic()
    status, _ = _answer_then_closed(short.port, head, trickle=True)
    assert status.startswith(b"HTTP/1.1 4"), status
    assert time.monotonic() - started < DEADLINE + 8


def test_a_body_that_arrived_is_not_timed_once_it_has(short: LiveServer) -> None:
    """A stream answered to a request with a (complete) body lives past the deadline: the
    deadline is the body's, not the response's."""
    head = (
        f"GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {short.admin_key}\r\n"
        "Content-Length: 1\r\n\r\nx"
    ).encode()
    with socket.create_connection(("127.0.0.1", short.port), timeout=30) as sock:
        sock.sendall(head)
        sock.settimeout(DEADLINE + 3)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        deadline = time.monotonic() + DEADLINE + 2
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            assert chunk, "the stream ended at the body's deadline"
