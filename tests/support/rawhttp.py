"""Hand-written HTTP/1.1 exchanges, for bodies that lie, stall or stop half way."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1"]
    if not any(name.lower() == "host" for name in headers):
        lines.append("Host: 127.0.0.1")
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def read_response(sock: socket.socket, pending: bytearray | None = None) -> RawResponse:
    """Read one response; bytes read past it are left in `pending` for the next call."""
    data = bytes(pending or b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before headers: {data!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    if pending is not None:
        pending[:] = body[length:]
    return RawResponse(int(status_line.split()[1]), headers, body[:length])


def exchange(
    url: str,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes = b"",
    pause_after: int | None = None,
    pause: float = 0.0,
) -> RawResponse:
    with connect(url) as sock:
        sock.sendall(request_head(method, path, headers))
        if pause_after is not None:
            sock.sendall(body[:pause_after])
            time.sleep(pause)
            try:
                sock.sendall(body[pause_after:])
            except OSError:
                pass
        elif body:
            try:
                sock.sendall(body)
            except OSError:
                pass
        return read_response(sock)
