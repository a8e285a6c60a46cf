"""One S3 request, resolved: who, which bucket and key, what query flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import quote
from xml.etree import ElementTree

from starlette.requests import Request
from starlette.responses import Response

from gateway.http.forms import PostForm
from gateway.http.inputs import BodyTooLarge, read_capped
from storage.engine import Engine
from storage.models import Actor, Bucket, Organization

from ..settings import Settings
from . import xml
from .auth import S3Principal
from .errors import S3Error
from .payload import Payload
from .refusals import Inputs
from .sigv4 import UNSIGNED_REQUEST

MAX_XML_BYTES = 2 * 1024 * 1024
"""The largest XML body read (DeleteObjects of 1,000 keys of 1,024 bytes fits)."""


ACCESS_DENIED = "Access Denied"
NOBODY = Actor(org_id="")


@dataclass
class S3Call:
    request: Request
    principal: S3Principal | None
    """None for a request without credentials."""
    engine: Engine
    settings: Settings
    bucket: str | None
    key: str | None
    params: dict[str, str]
    request_id: str
    deadline: float
    actor: Actor = NOBODY
    """Who the engine acts for, set once the request is authorized (`access.py`): the key's
    organization, or for a request from outside it the bucket's, confined to that bucket."""
    owner_org: Organization | None = None
    """The organization that owns what the request reaches (set with `actor`)."""
    form: PostForm | None = None
    """A POST upload's form, read up to its file before the request is authorized."""
    operation: str = ""
    touches: frozenset[str] = frozenset()
    """The second resources the operation declares it reads (`touches.py`)."""
    inputs: Inputs | None = None
    """What the operation takes (`refusals.py`): an XML body is checked against it."""
    stale_seconds: float | None = None
    """Test mode's stale-listing fault fired (`faults.py`): a listing answers as it would
    have this many seconds ago."""
    _bucket: Bucket | None = field(default=None, repr=False)

    @property
    def signer(self) -> S3Principal:
        """The request's credentials (AccessDenied for a request without any)."""
        if self.principal is None:
            raise S3Error("AccessDenied", ACCESS_DENIED, 403)
        return self.principal

    @property
    def owner(self) -> list[xml.Node]:
        """The `Owner` (and `Initiator`) of what a listing shows: the bucket's organization;
        its name only to its own keys (AWS no longer sends DisplayName at all)."""
        org = self.owner_org or self.signer.org
        if self.principal is None or self.principal.key.org_id != org.id:
            return [("ID", org.id)]
        return [("ID", org.id), ("DisplayName", org.name)]

    def payload(self, checksum_headers: bool = True) -> Payload:
        """The request's body as signed (or, without credentials, unsigned)."""
        if self.principal is None:
            return Payload(self.request.headers, UNSIGNED_REQUEST, b"", checksum_headers)
        return Payload(
            self.request.headers,
            self.principal.signed,
            self.principal.signing_key,
            checksum_headers,
        )

    def listed_as_of(self) -> float | None:
        """The moment a listing shows (None: now), by the server's clock."""
        if self.stale_seconds is None:
            return None
        return self.engine.clock.time() - self.stale_seconds

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
        if scope not in self.signer.key.scopes:
            raise S3Error("AccessDenied", f"the access key lacks the {scope} scope", 403)

    async def read_body(
        self, max_bytes: int = MAX_XML_BYTES, checksum_headers: bool = True
    ) -> bytes:
        """A small request body (XML), whole: verified as signed (payload hash, Content-MD5,
        checksums, aws-chunked framing) and refused past `max_bytes` before it is held."""
        payload = self.payload(checksum_headers)
        try:
            return await read_capped(
                payload.chunks(self.request.stream()), payload.content_length, max_bytes
            )
        except BodyTooLarge:
            raise S3Error(
                "MaxMessageLengthExceeded", f"Your request was too big (over {max_bytes} bytes)."
            ) from None

    async def read_xml(
        self,
        checksum_headers: bool = True,
        first: Callable[[ElementTree.Element], None] | None = None,
    ) -> ElementTree.Element:
        """The request's XML body, parsed and checked against what the operation takes
        (MalformedXML when it is not XML or off its schema, 501 for a refused element);
        `first` judges it before that check, for errors S3 answers before a refusal."""
        found = await self.read_optional_xml(checksum_headers, first)
        if found is None:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed.")
        return found

    async def read_optional_xml(
        self,
        checksum_headers: bool = True,
        first: Callable[[ElementTree.Element], None] | None = None,
    ) -> ElementTree.Element | None:
        """As `read_xml`, None for an empty body (CreateBucket's configuration)."""
        body = await self.read_body(checksum_headers=checksum_headers)
        if not body.strip():
            return None
        try:
            root = xml.parse(body)
        except xml.MalformedXML:
            raise S3Error("MalformedXML", "The XML you provided was not well-formed.") from None
        if first is not None:
            first(root)
        if self.inputs is not None:
            self.inputs.check_body(root)
        return root

    async def target_bucket(self) -> Bucket:
        """The bucket the request names (looked up once)."""
        if self._bucket is None:
            assert self.bucket is not None
            self._bucket = await self.engine.buckets.get_by_name(self.actor, self.bucket)
        return self._bucket

    def cache_bucket(self, bucket: Bucket) -> None:
        """The bucket the request reaches, as authorization found it."""
        self._bucket = bucket

    async def bucket_id(self) -> str:
        return (await self.target_bucket()).id


Handler = Callable[[S3Call], Awaitable[Response]]
Prepare = Callable[[S3Call], Awaitable[None]]
