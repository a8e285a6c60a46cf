"""aws-chunked bodies, chunk and trailer signatures, checksums (unit level)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import zlib
from collections.abc import AsyncIterator

import pytest

from gateway.s3 import sigv4
from gateway.s3.payload import Payload, PayloadError
from tests.support.s3 import CHUNKS, CREDENTIAL, DATE, SECRET, SEED

KEY = sigv4.signing_key(SECRET, CREDENTIAL)


async def feed(data: bytes, piece: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), piece):
        yield data[i : i + piece]


def run(payload: Payload, body: bytes, piece: int = 7000) -> bytes:
    async def collect() -> bytes:
        return b"".join([chunk async for chunk in payload.chunks(feed(body, piece))])

    return asyncio.run(collect())


def signed(payload_kind: str, signature: str = SEED) -> sigv4.Signed:
    return sigv4.Signed(CREDENTIAL, DATE, ("host",), signature, payload_kind)


def aws_example_body(corrupt: bool = False) -> bytes:
    body = b""
    for size, signature in CHUNKS:
        data = bytearray(b"a" * size)
        if corrupt and size == 1024:
            data[10] = ord("b")
        body += f"{size:x};chunk-signature={signature}\r\n".encode() + bytes(data) + b"\r\n"
    return body


@pytest.mark.parametrize("piece", [1, 13, 4096, 100_000])
def test_aws_signed_chunked_example_decodes(piece: int) -> None:
    headers = {"x-amz-decoded-content-length": "66560", "content-encoding": "aws-chunked"}
    payload = Payload(headers, signed(sigv4.STREAMING_SIGNED), KEY)
    assert run(payload, aws_example_body(), piece) == b"a" * 66560
    assert payload.content_length == 66560


def test_a_corrupted_chunk_fails_its_signature() -> None:
    payload = Payload({}, signed(sigv4.STREAMING_SIGNED), KEY)
    with pytest.raises(PayloadError) as failure:
        run(payload, aws_example_body(corrupt=True))
    assert failure.value.code == "SignatureDoesNotMatch"


def test_a_truncated_chunked_body_is_incomplete() -> None:
    payload = Payload({}, signed(sigv4.STREAMING_SIGNED), KEY)
    with pytest.raises(PayloadError) as failure:
        run(payload, aws_example_body()[:66000])
    assert failure.value.code == "IncompleteBody"


def crc32(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def unsigned_trailer_body(data: bytes, checksum: str) -> bytes:
    return (
        f"{len(data):x}\r\n".encode()
        + data
        + b"\r\n0\r\n"
        + f"x-amz-checksum-crc32:{checksum}\r\n\r\n".encode()
    )


def test_unsigned_payload_with_crc32_trailer() -> None:
    data = b"hello trailer" * 1000
    headers = {"x-amz-trailer": "x-amz-checksum-crc32", "content-encoding": "aws-chunked"}
    payload = Payload(headers, signed(sigv4.STREAMING_UNSIGNED_TRAILER), KEY)
    assert run(payload, unsigned_trailer_body(data, crc32(data))) == data
    assert payload.checksum is not None and payload.checksum.value == crc32(data)
    bad = Payload(headers, signed(sigv4.STREAMING_UNSIGNED_TRAILER), KEY)
    with pytest.raises(PayloadError) as failure:
        run(bad, unsigned_trailer_body(data, crc32(b"other")))
    assert failure.value.code == "BadDigest"


def test_signed_payload_with_signed_trailer() -> None:
    data = b"x" * 9000
    digest = hashlib.sha256(data).hexdigest()
    first = sigv4.sign(KEY, sigv4.chunk_string_to_sign(DATE, CREDENTIAL.scope, SEED, digest))
    final = sigv4.sign(
        KEY, sigv4.chunk_string_to_sign(DATE, CREDENTIAL.scope, first, sigv4.EMPTY_SHA256)
    )
    trailer = f"x-amz-checksum-crc32:{crc32(data)}\n".encode()
    trailer_signature = sigv4.sign(
        KEY, sigv4.trailer_string_to_sign(DATE, CREDENTIAL.scope, final, trailer)
    )
    body = (
        f"{len(data):x};chunk-signature={first}\r\n".encode()
        + data
        + b"\r\n"
        + f"0;chunk-signature={final}\r\n".encode()
        + f"x-amz-checksum-crc32:{crc32(data)}\r\n".encode()
        + f"x-amz-trailer-signature:{trailer_signature}\r\n\r\n".encode()
    )
    headers = {"x-amz-trailer": "x-amz-checksum-crc32"}
    payload = Payload(headers, signed(sigv4.STREAMING_SIGNED_TRAILER), KEY)
    assert run(payload, body) == data
    forged = body.replace(trailer_signature.encode(), b"0" * 64)
    with pytest.raises(PayloadError) as failure:
        run(Payload(headers, signed(sigv4.STREAMING_SIGNED_TRAILER), KEY), forged)
    assert failure.value.code == "SignatureDoesNotMatch"


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"])
def test_checksum_headers_are_verified(algorithm: str) -> None:
    from storage.rules.checksums import Hasher

    data = b"some content"
    hasher = Hasher(algorithm.upper())
    hasher.update(data)
    good = Payload({f"x-amz-checksum-{algorithm}": hasher.value()}, None, None)
    assert run(good, data) == data and good.checksum is not None
    bad = Payload({f"x-amz-checksum-{algorithm}": hasher.value()}, None, None)
    with pytest.raises(PayloadError):
        run(bad, data + b"!")


def test_payload_hash_and_content_md5() -> None:
    data = b"plain body"
    sha = hashlib.sha256(data).hexdigest()
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    assert run(Payload({"content-md5": md5}, signed(sha), KEY), data) == data
    with pytest.raises(PayloadError) as mismatch:
        run(Payload({}, signed(sha), KEY), b"other body")
    assert mismatch.value.code == "XAmzContentSHA256Mismatch"
    with pytest.raises(PayloadError) as digest:
        run(Payload({"content-md5": md5}, signed(sigv4.UNSIGNED), KEY), b"other body")
    assert digest.value.code == "BadDigest"
    with pytest.raises(PayloadError) as invalid:
        Payload({"content-md5": "not base64"}, None, None)
    assert invalid.value.code == "InvalidDigest"
