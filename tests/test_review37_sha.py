"""Review of c720ccc: an SSE PutObject whose body is signed keeps, as its plaintext's SHA-256
(the /v1 `sha256`), the hash the S3 layer verified rather than hashing again. These probes try
to make that stored hash differ from the stored plaintext's, or to read it before the body
ended (an AssertionError, a 500)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import bucketd_client as bc
from gateway.s3 import sigv4
from gateway.s3.payload import Payload, PayloadError
from tests.support import web
from tests.support.live import LiveServer
from tests.support.s3 import CREDENTIAL, DATE, SECRET, SEED

KEY = sigv4.signing_key(SECRET, CREDENTIAL)


def _bucket(live: LiveServer) -> tuple[Any, str]:
    s3: Any = live.s3(
        s3={"addressing_style": "path", "payload_signing_enabled": True},
        request_checksum_calculation="when_required",
    )
    bucket = f"r37sha-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    return s3, bucket


def _sha256_of(live: LiveServer, bucket: str, key: str) -> str:
    with bc.Client(live.url, live.admin_key) as client:
        return client.get_file(client.get_bucket_by_name(bucket).id, key).sha256


def _put(
    live: LiveServer, bucket: str, key: str, body: bytes, declared: str, **extra: str
) -> web.httpx.Response:
    """A signed PUT whose x-amz-content-sha256 is `declared`, whatever `body` is."""
    return web.put(
        live.s3_url + f"/{bucket}/{key}",
        content=body,
        headers=_signed(live, f"/{bucket}/{key}", body, declared, extra),
    )


def _signed(
    live: LiveServer, path: str, body: bytes, declared: str, extra: dict[str, str]
) -> dict[str, str]:
    """SigV4 headers over `declared` as the payload hash (botocore signs the header's value
    when the request carries one and a body)."""
    request = AWSRequest(
        "PUT",
        live.s3_url + path,
        data=body,
        headers={
            "Host": live.s3_url.removeprefix("http://"),
            "x-amz-content-sha256": declared,
            "x-amz-server-side-encryption": "AES256",
            **extra,
        },
    )
    _Declaring(declared, Credentials(*live.s3_credentials()), "s3", "us-east-1").add_auth(request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    headers["x-amz-content-sha256"] = declared
    return headers


class _Declaring(S3SigV4Auth):
    """botocore's signer with the payload hash a test declares, true or not."""

    def __init__(self, declared: str, *args: Any) -> None:
        super().__init__(*args)
        self._declared = declared

    def payload(self, request: AWSRequest) -> str:
        return self._declared

    def _modify_request_before_signing(self, request: AWSRequest) -> None:
        super()._modify_request_before_signing(request)
        del request.headers["X-Amz-Content-SHA256"]
        request.headers["X-Amz-Content-SHA256"] = self._declared


def test_a_signed_body_that_is_not_the_declared_one_stores_nothing(
    local_server: LiveServer,
) -> None:
    s3, bucket = _bucket(local_server)
    body = os.urandom(70_000)
    other = hashlib.sha256(body[:-1] + b"x").hexdigest()
    answer = _put(local_server, bucket, "k", body, other)
    assert answer.status_code == 400 and b"XAmzContentSHA256Mismatch" in answer.content
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_an_uppercase_declared_hash_never_becomes_the_files_sha256(
    local_server: LiveServer,
) -> None:
    """A hex digest in capitals names the same bytes; whether the write is taken or refused,
    the file's sha256 is never the client's spelling of it."""
    s3, bucket = _bucket(local_server)
    body = os.urandom(1000)
    real = hashlib.sha256(body).hexdigest()
    answer = _put(local_server, bucket, "k", body, real.upper())
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 200:
        assert _sha256_of(local_server, bucket, "k") == real
    else:
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_aws_chunked_encoding_over_a_plain_signed_body_hashes_what_is_stored(
    local_server: LiveServer,
) -> None:
    """`Content-Encoding: aws-chunked` alone says nothing (the body is taken as it is): the
    stored bytes and the stored hash are the same bytes' ones."""
    s3, bucket = _bucket(local_server)
    body = b"5;chunk-signature=" + SEED.encode() + b"\r\nhello\r\n0;chunk-signature=x\r\n\r\n"
    real = hashlib.sha256(body).hexdigest()
    answer = _put(local_server, bucket, "k", body, real, **{"content-encoding": "aws-chunked"})
    assert answer.status_code == 200, answer.text
    stored = s3.get_object(Bucket=bucket, Key="k")["Body"].read()
    assert hashlib.sha256(stored).hexdigest() == _sha256_of(local_server, bucket, "k") == real


@pytest.mark.parametrize("signature", ["s3v4", "s3"], ids=["sigv4", "sigv2"])
def test_a_presigned_put_with_a_lying_payload_header_is_hashed_by_the_engine(
    local_server: LiveServer, signature: str
) -> None:
    """A presigned URL signs no payload hash (SigV4's query has no X-Amz-Content-Sha256; SigV2
    has none at all): a x-amz-content-sha256 header sent with it is no verified hash and must
    not become the file's sha256. Under SigV2 an x-amz-* header is signed, so it is signed."""
    _, bucket = _bucket(local_server)
    lie = hashlib.sha256(b"something else").hexdigest()
    params: dict[str, Any] = {"Bucket": bucket, "Key": "k", "ServerSideEncryption": "AES256"}
    if signature == "s3":
        signer: Any = local_server.s3(signature_version="s3")
        signer.meta.events.register(  # SigV2 signs every x-amz-* header the request sends
            "before-sign.s3.PutObject",
            lambda request, **_: request.headers.__setitem__("x-amz-content-sha256", lie),
        )
        url = signer.generate_presigned_url("put_object", Params=params, ExpiresIn=300)
        headers = {"x-amz-content-sha256": lie}
    else:
        signer = local_server.s3(signature_version="s3v4")
        url = signer.generate_presigned_url("put_object", Params=params, ExpiresIn=300)
        headers = {"x-amz-server-side-encryption": "AES256", "x-amz-content-sha256": lie}
    body = os.urandom(5000)
    answer = web.put(url, content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert _sha256_of(local_server, bucket, "k") == hashlib.sha256(body).hexdigest()


def test_a_failed_condition_on_a_signed_sse_put_is_412_not_500(
    local_server: LiveServer,
) -> None:
    s3, bucket = _bucket(local_server)
    s3.put_object(Bucket=bucket, Key="k", Body=b"first", ServerSideEncryption="AES256")
    body = b"second"
    answer = _put(
        local_server, bucket, "k", body, hashlib.sha256(body).hexdigest(), **{"if-none-match": "*"}
    )
    assert answer.status_code == 412, answer.text
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"


def test_a_signed_sse_body_cut_mid_way_stores_nothing_and_the_server_answers(
    local_server: LiveServer,
) -> None:
    s3, bucket = _bucket(local_server)
    body = os.urandom(200_000)
    path = f"/{bucket}/cut"
    headers = _signed(local_server, path, body, hashlib.sha256(body).hexdigest(), {})
    host, port = local_server.s3_url.removeprefix("http://").split(":")
    head = f"PUT {path} HTTP/1.1\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection((host, int(port))) as conn:
        conn.sendall(head.encode() + body[:50_000])
    with pytest.raises(Exception) as missing:
        s3.head_object(Bucket=bucket, Key="cut")
    assert "404" in str(missing.value)
    s3.put_object(Bucket=bucket, Key="after", Body=b"ok", ServerSideEncryption="AES256")


def _pieces(body: bytes) -> Iterator[bytes]:
    """The body as httpx sends an iterator: Transfer-Encoding chunked, no Content-Length, so
    the engine learns the size only as the body streams."""
    for i in range(0, len(body), 8192):
        yield body[i : i + 8192]


@pytest.mark.parametrize("limit", [None, 10_000], ids=["no-limit", "limit-cuts-it"])
def test_a_signed_sse_body_of_unknown_length_is_hashed_right_or_cut_cleanly(
    local_server: LiveServer, limit: int | None
) -> None:
    """A bucket's size limit that cuts a body mid-stream (no Content-Length to refuse it
    first) fails the write before the verified hash is read: a 413, never a 500."""
    s3, bucket = _bucket(local_server)
    if limit is not None:
        with bc.Client(local_server.url, local_server.admin_key) as client:
            client.update_bucket(client.get_bucket_by_name(bucket).id, max_upload_bytes=limit)
    body = os.urandom(50_000)
    real = hashlib.sha256(body).hexdigest()
    path = f"/{bucket}/k"
    headers = _signed(local_server, path, body, real, {})
    answer = web.put(local_server.s3_url + path, content=_pieces(body), headers=headers)
    if limit is None:
        assert answer.status_code == 200, answer.text
        assert _sha256_of(local_server, bucket, "k") == real
    else:
        assert answer.status_code == 400 and b"EntityTooLarge" in answer.content, answer.text
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_trailer_claim_over_a_signed_plain_body_fails_after_the_hash_matched(
    local_server: LiveServer,
) -> None:
    """x-amz-trailer names a checksum a plain (not aws-chunked) body cannot carry: the body's
    hash matches, then the missing checksum refuses the write; nothing is kept."""
    s3, bucket = _bucket(local_server)
    body = os.urandom(2000)
    extra = {"x-amz-trailer": "x-amz-checksum-crc32"}
    answer = _put(local_server, bucket, "k", body, hashlib.sha256(body).hexdigest(), **extra)
    assert answer.status_code == 400, answer.text
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_retry_on_the_same_connection_keeps_the_second_bodys_hash(
    local_server: LiveServer,
) -> None:
    """A refused body (its hash lied) then the right one, over one kept-alive connection:
    nothing of the first request's verification reaches the second's file."""
    s3, bucket = _bucket(local_server)
    first, second = os.urandom(4000), os.urandom(4000)
    path = f"/{bucket}/k"
    with web.client() as http:
        lied = _signed(local_server, path, first, hashlib.sha256(second).hexdigest(), {})
        assert http.put(local_server.s3_url + path, content=first, headers=lied).status_code == 400
        right = _signed(local_server, path, second, hashlib.sha256(second).hexdigest(), {})
        assert (
            http.put(local_server.s3_url + path, content=second, headers=right).status_code == 200
        )
    assert _sha256_of(local_server, bucket, "k") == hashlib.sha256(second).hexdigest()
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == second


def test_expect_100_continue_then_the_body(local_server: LiveServer) -> None:
    _, bucket = _bucket(local_server)
    body = os.urandom(30_000)
    real = hashlib.sha256(body).hexdigest()
    path = f"/{bucket}/k"
    headers = {**_signed(local_server, path, body, real, {}), "expect": "100-continue"}
    host, port = local_server.s3_url.removeprefix("http://").split(":")
    head = f"PUT {path} HTTP/1.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(head.encode())
        assert conn.recv(1024).startswith(b"HTTP/1.1 100")
        conn.sendall(body)
        answer = b""
        while piece := conn.recv(65536):
            answer += piece
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert _sha256_of(local_server, bucket, "k") == real


def test_sse_c_keeps_no_plaintext_hash_even_from_a_signed_body(local_server: LiveServer) -> None:
    """SSE-C keeps no fingerprint of the plaintext: a verified hash offered by the S3 layer
    must not become one."""
    s3, bucket = _bucket(local_server)
    body = os.urandom(3000)
    key = os.urandom(32)
    s3.put_object(
        Bucket=bucket, Key="k", Body=body, SSECustomerAlgorithm="AES256", SSECustomerKey=key
    )
    assert _sha256_of(local_server, bucket, "k") != hashlib.sha256(body).hexdigest()


def test_signed_sse_multipart_and_post_form_writes_answer(local_server: LiveServer) -> None:
    """The write paths that do not take the verified hash (UploadPart, a POST form) and a
    copy of an object that did: none reads `content_sha256` (a 500 if one did)."""
    s3, bucket = _bucket(local_server)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", ServerSideEncryption="AES256")
    part = s3.upload_part(
        Bucket=bucket, Key="mp", UploadId=upload["UploadId"], PartNumber=1, Body=b"p" * 1000
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"p" * 1000
    body = os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="src", Body=body, ServerSideEncryption="AES256")
    s3.copy_object(
        Bucket=bucket,
        Key="dst",
        CopySource={"Bucket": bucket, "Key": "src"},
        ServerSideEncryption="AES256",
    )
    assert _sha256_of(local_server, bucket, "dst") == hashlib.sha256(body).hexdigest()
    post = s3.generate_presigned_post(
        Bucket=bucket,
        Key="form",
        Fields={"x-amz-server-side-encryption": "AES256"},
        Conditions=[{"x-amz-server-side-encryption": "AES256"}],
    )
    answer = web.post(post["url"], data=post["fields"], files={"file": ("f", body, "text/plain")})
    assert answer.status_code in (200, 204), answer.text
    assert _sha256_of(local_server, bucket, "form") == hashlib.sha256(body).hexdigest()


async def _feed(data: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(data), 4096):
        yield data[i : i + 4096]


def _drain(payload: Payload, body: bytes) -> bytes:
    async def collect() -> bytes:
        return b"".join([chunk async for chunk in payload.chunks(_feed(body))])

    return asyncio.run(collect())


@pytest.mark.parametrize("kind", [*sigv4.STREAMING, sigv4.UNSIGNED])
def test_a_body_whose_hash_is_not_signed_offers_none(kind: str) -> None:
    """aws-chunked forms (a signed seed signs the chunks, not a whole-body hash) and
    UNSIGNED-PAYLOAD: the engine must hash the plaintext itself."""
    payload = Payload({}, sigv4.Signed(CREDENTIAL, DATE, ("host",), SEED, kind), KEY)
    assert not payload.signs_content


def test_the_verified_hash_is_offered_only_after_the_body_ended_and_matched() -> None:
    body = os.urandom(10_000)
    real = hashlib.sha256(body).hexdigest()
    payload = Payload({}, sigv4.Signed(CREDENTIAL, DATE, ("host",), SEED, real), KEY)
    assert payload.signs_content
    with pytest.raises(AssertionError):
        payload.content_sha256()
    assert _drain(payload, body) == body
    assert payload.content_sha256() == real
    longer = Payload({}, sigv4.Signed(CREDENTIAL, DATE, ("host",), SEED, real), KEY)
    with pytest.raises(PayloadError):
        _drain(longer, body + b"!")
    with pytest.raises(AssertionError):
        longer.content_sha256()
