"""Responses that carry a file's bytes, shared by /v1 and the S3 endpoint."""

from __future__ import annotations

import email.utils
from collections.abc import AsyncIterator, Mapping

from starlette.responses import Response, StreamingResponse

from storage.clock import iso_to_unix

BUFFERED_MAX_BYTES = 256 * 1024
"""Bodies up to this size are gathered and sent in one piece. A streaming response costs
a task group and a send per chunk, which dominates the time of a small download; above
this size, streaming keeps memory flat."""


def http_date(iso: str) -> str:
    """A stored `...Z` timestamp as an RFC 9110 date (Last-Modified, If-Range)."""
    return email.utils.formatdate(iso_to_unix(iso), usegmt=True)


async def content_response(
    body: AsyncIterator[bytes], length: int, status: int, headers: Mapping[str, str]
) -> Response:
    """The response for `length` bytes of file content read from `body`."""
    if length > BUFFERED_MAX_BYTES:
        return StreamingResponse(body, status, headers)
    data = b"".join([chunk async for chunk in body])
    return Response(data, status, headers)
