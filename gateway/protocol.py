"""Uvicorn's httptools protocol, answering malformed requests in the envelope.

Requests that never reach the app (unparseable request lines, invalid bytes in the path,
header blocks over MAX_HEAD_BYTES) would get Uvicorn's plain-text 400; clients of a JSON
API deserve the same envelope as every other error, and an oversized header block a 431.
"""

from __future__ import annotations

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .envelope import error_body

MAX_HEAD_BYTES = 64 * 1024
REASONS = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}


class HeadTooLarge(Exception):
    pass


class EnvelopeProtocol(HttpToolsProtocol):
    head_bytes = 0
    head_too_large = False

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes = 0

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
        body = msgspec.json.encode(error_body(code, message))
        head = [
            b"HTTP/1.1 %d %s\r\n" % (status, REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
