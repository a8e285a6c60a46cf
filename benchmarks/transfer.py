"""Large uploads and downloads over raw sockets, so the client costs almost nothing.

The upload sends the file with `socket.sendfile` (zero copy); the download reads into one
reused buffer and discards it.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.support.rawhttp import read_response, request_head

BUFFER = 1024 * 1024


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=600)


def upload(url: str, path: str, headers: dict[str, str], source: Path) -> tuple[float, int]:
    """(seconds, status) of a PUT of `source` with its Content-Length."""
    size = source.stat().st_size
    with _connect(url) as sock, open(source, "rb") as handle:
        started = time.perf_counter()
        sock.sendall(request_head("PUT", path, {**headers, "Content-Length": str(size)}))
        sock.sendfile(handle)
        response = read_response(sock)
        return time.perf_counter() - started, response.status


def download(url: str, path: str, headers: dict[str, str]) -> tuple[float, int]:
    """(seconds, bytes) of a GET whose body is read and dropped."""
    with _connect(url) as sock:
        started = time.perf_counter()
        sock.sendall(request_head("GET", path, headers))
        buffer = bytearray(BUFFER)
        view = memoryview(buffer)
        head = b""
        while b"\r\n\r\n" not in head:
            received = sock.recv(65536)
            if not received:
                raise ConnectionError("closed before the headers")
            head += received
        header_block, body_start = head.split(b"\r\n\r\n", 1)
        length = 0
        for line in header_block.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        received_bytes = len(body_start)
        while received_bytes < length:
            count = sock.recv_into(view, min(BUFFER, length - received_bytes))
            if count == 0:
                raise ConnectionError("closed mid-body")
            received_bytes += count
        return time.perf_counter() - started, received_bytes
