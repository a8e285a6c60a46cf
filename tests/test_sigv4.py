"""SigV4 against AWS's published examples, and against botocore's own signer."""

from __future__ import annotations

import hashlib

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.s3 import sigv4
from tests.support.s3 import CHUNKS, CREDENTIAL, DATE, SECRET, SEED


def signature_of(
    method: str,
    path: str,
    query: str,
    headers: list[tuple[str, str]],
    signed: tuple[str, ...],
    payload: str,
    presigned: bool = False,
) -> str:
    canonical = sigv4.canonical_request(method, path, query, headers, signed, payload, presigned)
    return sigv4.sign(
        sigv4.signing_key(SECRET, CREDENTIAL),
        sigv4.string_to_sign(DATE, CREDENTIAL.scope, canonical),
    )


def test_aws_example_get_object_with_range() -> None:
    headers = [
        ("Host", "examplebucket.s3.amazonaws.com"),
        ("Range", "bytes=0-9"),
        ("x-amz-content-sha256", sigv4.EMPTY_SHA256),
        ("x-amz-date", DATE),
    ]
    signed = ("host", "range", "x-amz-content-sha256", "x-amz-date")
    assert signature_of("GET", "/test.txt", "", headers, signed, sigv4.EMPTY_SHA256) == (
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def test_aws_example_presigned_get() -> None:
    query = (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F"
        "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
        "X-Amz-SignedHeaders=host&X-Amz-Signature=ignored"
    )
    headers = [("Host", "examplebucket.s3.amazonaws.com")]
    assert signature_of("GET", "/test.txt", query, headers, ("host",), sigv4.UNSIGNED, True) == (
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )


def test_aws_example_streaming_seed_chunks_and_trailer() -> None:
    headers = [
        ("Host", "s3.amazonaws.com"),
        ("x-amz-date", DATE),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", "66560"),
        ("content-length", "66824"),
        ("x-amz-content-sha256", sigv4.STREAMING_SIGNED),
    ]
    signed = (
        "content-encoding",
        "content-length",
        "host",
        "x-amz-content-sha256",
        "x-amz-date",
        "x-amz-decoded-content-length",
        "x-amz-storage-class",
    )
    previous = signature_of(
        "PUT", "/examplebucket/chunkObject.txt", "", headers, signed, sigv4.STREAMING_SIGNED
    )
    assert previous == SEED
    key = sigv4.signing_key(SECRET, CREDENTIAL)
    for size, expected in CHUNKS:
        digest = hashlib.sha256(b"a" * size).hexdigest()
        previous = sigv4.sign(
            key, sigv4.chunk_string_to_sign(DATE, CREDENTIAL.scope, previous, digest)
        )
        assert previous == expected
    trailer = b"first:1st\nsecond:2nd\nthird:3rd\n"
    assert sigv4.sign(
        key, sigv4.trailer_string_to_sign(DATE, CREDENTIAL.scope, previous, trailer)
    ) == ("df5735bd9f3295cd9386572292562fefc93ba94e80a0a1ddcbd652c4e0a75e6c")


def test_botocore_signatures_verify() -> None:
    credentials = Credentials("AKID", "secret/with+odd=chars")
    request = AWSRequest(
        "PUT",
        "http://127.0.0.1:9000/my-bucket/dir/a%20b%2Bc.txt?uploadId=x%2By&partNumber=3",
        data=b"hello",
        headers={"Content-Type": "text/plain", "x-amz-meta-note": "  a   b "},
    )
    S3SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    header = request.headers["Authorization"]
    signed = sigv4.parse_header(
        header, request.headers["X-Amz-Date"], request.headers["X-Amz-Content-SHA256"]
    )
    path, _, query = request.url.split("127.0.0.1:9000", 1)[1].partition("?")
    canonical = sigv4.canonical_request(
        "PUT",
        path,
        query,
        [("Host", "127.0.0.1:9000"), *request.headers.items()],
        signed.signed_headers,
        signed.payload,
    )
    key = sigv4.signing_key("secret/with+odd=chars", signed.credential)
    assert (
        sigv4.sign(key, sigv4.string_to_sign(signed.amz_date, signed.credential.scope, canonical))
        == signed.signature
    )


def test_botocore_presigned_urls_verify() -> None:
    credentials = Credentials("AKID", "secret")
    request = AWSRequest(
        "GET", "http://localhost:9000/bucket/k%C3%A9y?response-content-type=text%2Fplain"
    )
    S3SigV4QueryAuth(credentials, "s3", "us-east-1", expires=600).add_auth(request)
    path, _, query = request.url.split("localhost:9000", 1)[1].partition("?")
    params = dict(pair.split("=", 1) for pair in query.split("&"))
    from urllib.parse import unquote

    signed = sigv4.parse_query({k: unquote(v) for k, v in params.items()})
    canonical = sigv4.canonical_request(
        "GET",
        path,
        query,
        [("Host", "localhost:9000")],
        signed.signed_headers,
        signed.payload,
        presigned=True,
    )
    key = sigv4.signing_key("secret", signed.credential)
    assert (
        sigv4.sign(key, sigv4.string_to_sign(signed.amz_date, signed.credential.scope, canonical))
        == signed.signature
    )
