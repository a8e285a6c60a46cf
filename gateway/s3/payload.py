"""An S3 request body as content: plain or aws-chunked, verified against what was signed.

- plain: the SHA-256 in x-amz-content-sha256 (unless UNSIGNED-PAYLOAD) and Content-MD5 are
  checked once the body has ended;
- aws-chunked (x-amz-content-sha256 STREAMING-*; a `Content-Encoding: aws-chunked` alone
  says nothing, as boto3 passes a caller's value through over a plain body): the framing
  is removed, each chunk's signature is checked in
  its chain (signed forms), and trailing headers are read (and their signature checked);
- either way a checksum (x-amz-checksum-<algorithm>, as a header or a trailer) is computed
  over the content and compared.

A mismatch raises `PayloadError` at the end of the stream, so the engine never commits the
content it was fed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import AsyncIterator, Mapping

from storage.rules.checksums import ALGORITHMS, Checksum, Hasher
from storage.rules.validation import whole_number

from . import sigv4

MAX_LINE = 4096


class PayloadError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class Payload:
    def __init__(
        self,
        headers: Mapping[str, str],
        signed: sigv4.Signed | None,
        key: bytes | None,
        checksum_headers: bool = True,
    ) -> None:
        """`checksum_headers`: whether x-amz-checksum-* headers describe this body (not so
        on CompleteMultipartUpload, where they describe the object it completes)."""
        self._signed = signed
        self._key = key
        self._verified: str | None = None
        self._payload = signed.payload if signed else sigv4.UNSIGNED
        declared = headers.get("x-amz-content-sha256")
        self.streaming = self._payload in sigv4.STREAMING or (
            self._payload == sigv4.UNSIGNED and declared == sigv4.STREAMING_UNSIGNED_TRAILER
        )
        self._md5 = _decode_b64(headers.get("content-md5"), "Content-MD5", 16)
        self._algorithm, self._expected = (
            _checksum_claim(headers) if checksum_headers else (None, None)
        )
        self.checksum: Checksum | None = None
        decoded = headers.get("x-amz-decoded-content-length") if self.streaming else None
        self._decoded_length = whole_number(decoded)
        length = decoded or headers.get("content-length")
        self.content_length = whole_number(length)

    @property
    def signs_content(self) -> bool:
        """Whether the body's SHA-256 is signed (x-amz-content-sha256 names it): `chunks`
        then computes it, and `content_sha256` reads it once the body has ended."""
        return self._payload not in (sigv4.UNSIGNED, *sigv4.STREAMING)

    def content_sha256(self) -> str:
        """The body's SHA-256 (hex), verified: only once `chunks` has ended, for a body that
        `signs_content`."""
        assert self._verified is not None, "read before the body ended, or not signed"
        return self._verified

    def checksum_json(self) -> str | None:
        return None if self.checksum is None else self.checksum.to_json()

    async def chunks(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        hasher = Hasher(self._algorithm) if self._algorithm else None
        md5 = hashlib.md5() if self._md5 is not None else None
        sha = hashlib.sha256() if self.signs_content else None
        source = self._dechunk(body) if self.streaming else body
        declared, total = self._decoded_length, 0
        async for chunk in source:
            if not chunk:
                continue
            total += len(chunk)
            if declared is not None and total > declared:
                raise PayloadError(
                    "IncompleteBody", "the content is longer than x-amz-decoded-content-length"
                )
            for digest in (hasher, md5, sha):
                if digest is not None:
                    digest.update(chunk)
            yield chunk
        if declared is not None and total != declared:
            raise PayloadError(
                "IncompleteBody", "the content is shorter than x-amz-decoded-content-length"
            )
        if sha is not None and sha.hexdigest() != self._payload:
            raise PayloadError(
                "XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
        if sha is not None:
            self._verified = self._payload
        if md5 is not None and md5.digest() != self._md5:
            raise PayloadError(
                "BadDigest", "The Content-MD5 you specified did not match what we received."
            )
        if hasher is not None and self._algorithm is not None:
            if self._expected is None:
                raise PayloadError("InvalidRequest", f"no {self._algorithm} checksum was sent")
            if hasher.value() != self._expected:
                raise PayloadError(
                    "BadDigest",
                    f"The {self._algorithm} you specified did not match the calculated checksum.",
                )
            self.checksum = Checksum(self._algorithm, self._expected)

    async def _dechunk(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        reader = _Reader(body)
        signed = self._payload in (sigv4.STREAMING_SIGNED, sigv4.STREAMING_SIGNED_TRAILER)
        previous = self._signed.signature if self._signed else ""
        while True:
            line = await reader.line()
            size_text, _, extension = line.partition(";")
            try:
                size = int(size_text.strip(), 16)
            except ValueError:
                raise PayloadError("IncompleteBody", "the aws-chunked framing is broken") from None
            digest = hashlib.sha256()
            remaining = size
            while remaining:
                piece = await reader.take(remaining)
                digest.update(piece)
                remaining -= len(piece)
                yield piece
            if signed:
                previous = self._check_chunk(extension, previous, digest.hexdigest())
            if size == 0:
                break
            if await reader.line() != "":
                raise PayloadError("IncompleteBody", "a chunk is longer than its size")
        await self._trailers(reader, signed, previous)

    def _check_chunk(self, extension: str, previous: str, chunk_sha256: str) -> str:
        name, _, given = extension.partition("=")
        assert self._signed is not None and self._key is not None
        scope = self._signed.credential.scope
        expected = sigv4.sign(
            self._key,
            sigv4.chunk_string_to_sign(self._signed.amz_date, scope, previous, chunk_sha256),
        )
        if name.strip() != "chunk-signature" or not sigv4.same(expected, given.strip()):
            raise PayloadError(
                "SignatureDoesNotMatch", "a chunk signature does not match its content", 403
            )
        return expected

    async def _trailers(self, reader: _Reader, signed: bool, previous: str) -> None:
        canonical = b""
        signature = None
        while (line := await reader.line(allow_end=True)) != "":
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "x-amz-trailer-signature":
                signature = value
                continue
            canonical += f"{name}:{value}\n".encode()
            if name.startswith("x-amz-checksum-"):
                algorithm = name.removeprefix("x-amz-checksum-").upper()
                if algorithm not in ALGORITHMS:
                    raise PayloadError("NotImplemented", f"the {name} trailer", 501)
                if algorithm != self._algorithm:
                    raise PayloadError(
                        "InvalidRequest", f"the {name} trailer is not the one x-amz-trailer names"
                    )
                self._expected = value
        if self._payload == sigv4.STREAMING_SIGNED_TRAILER:
            assert self._signed is not None and self._key is not None
            expected = sigv4.sign(
                self._key,
                sigv4.trailer_string_to_sign(
                    self._signed.amz_date, self._signed.credential.scope, previous, canonical
                ),
            )
            if signature is None or not sigv4.same(expected, signature):
                raise PayloadError(
                    "SignatureDoesNotMatch", "the trailer signature does not match", 403
                )


class _Reader:
    """Lines and byte runs out of an ASGI body stream."""

    def __init__(self, body: AsyncIterator[bytes]) -> None:
        self._body = body.__aiter__()
        self._buffer = bytearray()
        self._ended = False

    async def _more(self) -> bool:
        if self._ended:
            return False
        try:
            self._buffer += await self._body.__anext__()
        except StopAsyncIteration:
            self._ended = True
            return False
        return True

    async def line(self, allow_end: bool = False) -> str:
        while (at := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_LINE:
                raise PayloadError("IncompleteBody", "an aws-chunked line is too long")
            if not await self._more():
                if allow_end and not self._buffer:
                    return ""
                raise PayloadError(
                    "IncompleteBody", "the body ended inside the aws-chunked framing"
                )
        line = bytes(self._buffer[:at])
        del self._buffer[: at + 2]
        return line.decode("latin-1")

    async def take(self, most: int) -> bytes:
        if not self._buffer and not await self._more():
            raise PayloadError("IncompleteBody", "the body ended inside a chunk")
        piece = bytes(self._buffer[:most])
        del self._buffer[: len(piece)]
        return piece


def _decode_b64(value: str | None, what: str, size: int) -> bytes | None:
    if value is None:
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != size:
        raise PayloadError("InvalidDigest", f"The {what} you specified is not valid.")
    return decoded


NOT_VALUES = ("x-amz-checksum-algorithm", "x-amz-checksum-type", "x-amz-checksum-mode")


def _checksum_claim(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(algorithm, expected base64 value or None when it comes as a trailer): one checksum
    per request, as on AWS (a second, checked or not, is refused, never ignored)."""
    given = {
        name.lower()
        for name in headers
        if name.lower().startswith("x-amz-checksum-") and name.lower() not in NOT_VALUES
    }
    trailer = [n.strip().lower() for n in headers.get("x-amz-trailer", "").split(",") if n.strip()]
    checksums = [n for n in trailer if n.startswith("x-amz-checksum-")]
    if len(given) + len(checksums) > 1:
        raise PayloadError("InvalidRequest", "Expecting a single x-amz-checksum- header")
    for algorithm in ALGORITHMS:
        value = headers.get(f"x-amz-checksum-{algorithm.lower()}")
        if value is not None:
            return algorithm, value.strip()
    for name in checksums:
        algorithm = name.removeprefix("x-amz-checksum-").upper()
        if algorithm not in ALGORITHMS:
            raise PayloadError("NotImplemented", f"the {name} trailer", 501)
        return algorithm, None
    declared = headers.get("x-amz-sdk-checksum-algorithm", "").upper()
    if declared in ALGORITHMS and "x-amz-trailer" in headers:
        return declared, None
    return None, None
