"""One S3 request, resolved: who, which bucket and key, what query flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import quote
from xml.etree import ElementTree

from starlette.requests import Request
from starlette.responses import Response

from storage.engine import Engine
from storage.models import Bucket

from ..inputs import BodyTooLarge, read_capped
from ..settings import Settings
from . import xml
from .auth import S3Principal
from .errors import S3Error
from .payload import Payload

MAX_XML_BYTES = 2 * 1024 * 1024
"""The largest XML body read (DeleteObjects of 1,000 keys of 1,024 bytes fits)."""


@dataclass
class S3Call:
    request: Request
    principal: S3Principal
    engine: Engine
    settings: Settings
    bucket: str | None
    key: str | None
    params: dict[str, str]
    request_id: str
    deadline: float
    _bucket: Bucket | None = field(default=None, repr=False)

    @property
    def owner(self) -> list[xml.Node]:
        """The `Owner` (and `Initiator`) of what a listing shows: the key's organization."""
        return [("ID", self.principal.org.id), ("DisplayName", self.principal.org.name)]

    def key_encoder(self) -> Callable[[str], str]:
        """How a listing writes keys and prefixes: as they are, or URL-encoded with
        `encoding-type=url` (InvalidArgument for any other encoding)."""
        encoding = self.params.get("encoding-type")
        if encoding is None:
            return str
        if encoding != "url":
            raise S3Error("InvalidArgument", "Invalid Encoding Method specified in Request")
        return lambda value: quote(value, safe="/")

    def require(self, scope: str) -> None:
        if scope not in self.principal.key.scopes:
            raise S3Error("AccessDenied", f"the access key lacks the {scope} scope", 403)

    async def read_body(self, max_bytes: int = MAX_XML_BYTES) -> bytes:
        """A small request body (XML), whole: verified as signed (payload hash, Content-MD5,
        checksums, aws-chunked framing) and refused past `max_bytes` before it is held."""
        payload = Payload(self.request.headers, self.principal.signed, self.principal.signing_key)
        try:
            return await read_capped(
                payload.chunks(self.request.stream()), payload.content_length, max_bytes
            )
        except BodyTooLarge:
            raise S3Error(
                "MaxMessageLengthExceeded", f"Your request was too big (over {max_bytes} bytes)."
            ) from None

    async def read_xml(self) -> ElementTree.Element:
        """The request's XML body, parsed (MalformedXML when it is not XML)."""
        try:
            return xml.parse(await self.read_body())
        except xml.MalformedXML:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed.") from None

    async def target_bucket(self) -> Bucket:
        """The bucket the request names (looked up once)."""
        if self._bucket is None:
            assert self.bucket is not None
            self._bucket = await self.engine.buckets.get_by_name(self.principal.actor, self.bucket)
        return self._bucket

    async def bucket_id(self) -> str:
        return (await self.target_bucket()).id


Handler = Callable[[S3Call], Awaitable[Response]]
