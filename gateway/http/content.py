"""Responses that carry a file's bytes, shared by /v1 and the S3 endpoint."""

from __future__ import annotations

import email.utils
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from starlette.responses import Content, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.http import zero_copy
from gateway.http.key_watch import WatchedKey, watching
from storage.bodies import FilledRange, OpenRange
from storage.rules.clock import iso_to_unix
from storage.rules.validation import mime_essence

BUFFERED_MAX_BYTES = 256 * 1024
"""Bodies up to this size are gathered and sent in one piece. A streaming response costs
a task group and a send per chunk, which dominates the time of a small download; above
this size, streaming keeps memory flat."""


ACTIVE_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "application/vnd.wap.xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/xml",
        "text/xsl",
        "application/xslt+xml",
        "application/rss+xml",
        "application/atom+xml",
        "text/javascript",
        "application/javascript",
        "text/ecmascript",
        "application/ecmascript",
        "application/x-shockwave-flash",
        "multipart/x-mixed-replace",
    }
)
"""Types a browser would run as a page or script of the origin that served them."""


def safe_content_headers(content_type: str) -> dict[str, str]:
    """What every download carries so stored content cannot act as the server's own page:
    no sniffing, and active types (or a type that does not parse) as an attachment."""
    headers = {"Content-Type": content_type, "X-Content-Type-Options": "nosniff"}
    essence = mime_essence(content_type)
    if essence is None or essence in ACTIVE_TYPES:
        headers["Content-Disposition"] = "attachment"
    return headers


def http_date(iso: str) -> str:
    """A stored `...Z` timestamp as an RFC 9110 date (Last-Modified, If-Range)."""
    return email.utils.formatdate(iso_to_unix(iso), usegmt=True)


async def content_response(
    body: AsyncIterator[bytes], length: int, status: int, headers: Mapping[str, str]
) -> Response:
    """The response for `length` bytes of file content read from `body`."""
    if length > BUFFERED_MAX_BYTES:
        if isinstance(body, FilledRange):
            return FilledResponse(body, status, headers)
        if isinstance(body, OpenRange):  # a Protocol check: not paid by small bodies
            return RangeResponse(body, status, headers)
        return ContentStream(body, status, headers)
    data = b"".join([chunk async for chunk in body])
    return Response(data, status, headers)


class ContentStream(StreamingResponse):
    """File content streamed chunk by chunk while the key that asked for it holds
    (`key_watch.py`): revoked or expired, the connection is dropped mid-body. The body is
    closed once the response ends, however it ends: here, outside the task group that
    cancels the sending when the connection goes (a close under it would be cancelled too,
    leaving a blob file open)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self.body_iterator
        held = watching(scope)
        if held is not None:
            self.body_iterator = _while_held(body, held, send)
        try:
            await super().__call__(scope, receive, send)
        finally:
            close = getattr(body, "aclose", None)
            if close is not None:
                await close()


async def _while_held(
    body: AsyncIterable[Content], held: WatchedKey, send: Send
) -> AsyncIterator[Content]:
    async for chunk in body:
        if not await held.holds():
            await send({"type": zero_copy.ABORT})
            return
        yield chunk


class _HandedResponse(ContentStream):
    """A body the server sends by a message of its own where it offers zero-copy sends
    (`zero_copy.EXTENSION`), else streamed chunk by chunk; either way only while the key
    holds, and closed either way."""

    def __init__(self, body: OpenRange | FilledRange, status: int, headers: Mapping[str, str]):
        super().__init__(body, status, headers)
        self.handed = body

    def message(self) -> dict[str, Any]:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            if zero_copy.EXTENSION not in scope.get("extensions", {}):
                await super().__call__(scope, receive, send)
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            message = self.message()
            held = watching(scope)
            if held is not None:
                message[zero_copy.STILL_ALLOWED] = held.holds
            await send(message)
        finally:
            await self.handed.aclose()


class RangeResponse(_HandedResponse):
    """A range of an open file, sent by the kernel (`sendfile`)."""

    def __init__(self, body: OpenRange, status: int, headers: Mapping[str, str]) -> None:
        super().__init__(body, status, headers)
        self.range = body

    def message(self) -> dict[str, Any]:
        return {
            "type": zero_copy.EXTENSION,
            "file": self.range.fd,
            "offset": self.range.offset,
            "count": self.range.count,
        }


class FilledResponse(_HandedResponse):
    """A body made block by block in place (an encrypted local blob), written to the socket
    from the worker thread that makes each block (`zero_copy.FILLED`)."""

    def __init__(self, body: FilledRange, status: int, headers: Mapping[str, str]) -> None:
        super().__init__(body, status, headers)
        self.filled = body

    def message(self) -> dict[str, Any]:
        return {
            "type": zero_copy.FILLED,
            "next_block": self.filled.next_block,
            "count": self.filled.count,
        }
