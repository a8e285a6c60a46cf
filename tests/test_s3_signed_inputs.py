"""Inputs taken only as signed, and each read once (issue 32's hostile review): x-amz-
headers outside the signature are refused, a presigned URL's x-amz- query parameters are
its headers, one checksum per request, numbers that are numbers, no repeated value read as
one of its copies."""

from __future__ import annotations

import base64
import hashlib
import zlib
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gateway.s3 import sigv4
from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name

SCOPES = "buckets:read,buckets:write,files:read,files:write,files:bypass-governance"


@pytest.fixture(scope="module")
def signer(local_server: LiveServer) -> tuple[LiveServer, tuple[str, str], Any, str]:
    credentials = local_server.s3_credentials(None, SCOPES)
    s3: Any = local_server.s3(*credentials)
    bucket = unique_name("signed")
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    s3.put_object(Bucket=bucket, Key="private/secret", Body=b"TOP SECRET")
    return local_server, credentials, s3, bucket


def presigned(live: LiveServer, credentials: tuple[str, str], method: str, path: str) -> str:
    request = AWSRequest(method, live.s3_url + path, {"Host": live.s3_url[7:]})
    S3SigV4QueryAuth(Credentials(*credentials), "s3", "us-east-1", expires=300).add_auth(request)
    return str(request.url)


def signed(
    live: LiveServer,
    credentials: tuple[str, str],
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes = b"",
    payload: str = "UNSIGNED-PAYLOAD",
    unsigned: list[tuple[str, str]] | None = None,
) -> httpx.Response:
    """A SigV4 request signing every header in `headers` (repeated names included), then
    sending `unsigned` beside them."""
    amz = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    pairs = [
        ("host", live.s3_url[7:]),
        ("x-amz-date", amz),
        ("x-amz-content-sha256", payload),
        *headers,
    ]
    names = tuple(sorted({name for name, _ in pairs}))
    credential = sigv4.Credential(credentials[0], amz[:8], "us-east-1", "s3")
    raw_path, _, raw_query = path.partition("?")
    canonical = sigv4.canonical_request(method, raw_path, raw_query, pairs, names, payload)
    signature = sigv4.sign(
        sigv4.signing_key(credentials[1], credential),
        sigv4.string_to_sign(amz, credential.scope, canonical),
    )
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={credentials[0]}/{credential.scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    sent = [*pairs, ("authorization", authorization), *(unsigned or [])]
    return web.request(method, live.s3_url + path, headers=sent, content=body)


def code(answer: httpx.Response) -> tuple[int, str]:
    text = answer.text
    return answer.status_code, text.split("<Code>")[1].split("<")[0] if "<Code>" in text else ""


def test_x_amz_headers_outside_the_signature_are_refused(signer: Any) -> None:
    """A presigned PUT for one key became a CopyObject of any object its signer could read,
    made public, or a COMPLIANCE lock until 2099 (AWS: 403, headers not signed)."""
    live, credentials, s3, bucket = signer
    url = presigned(live, credentials, "PUT", f"/{bucket}/uploads/avatar.png")
    stolen = web.put(
        url,
        content=b"",
        headers={"x-amz-copy-source": f"/{bucket}/private/secret", "x-amz-acl": "public-read"},
    )
    assert code(stolen) == (403, "AccessDenied") and "not signed" in stolen.text
    locked = web.put(url, content=b"x", headers={"x-amz-object-lock-mode": "COMPLIANCE"})
    assert code(locked) == (403, "AccessDenied")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="uploads/").get("Contents", [])
    assert listed == []
    extra = signed(
        live, credentials, "PUT", f"/{bucket}/k", [], b"k", unsigned=[("x-amz-meta-a", "b")]
    )
    assert code(extra) == (403, "AccessDenied")
    assert web.put(url, content=b"fine").status_code == 200


def test_a_presigned_urls_amz_parameters_are_its_headers(signer: Any) -> None:
    live, credentials, s3, bucket = signer
    query = "x-amz-acl=public-read&x-amz-meta-colour=blue&x-amz-tagging=t%3D1"
    url = presigned(live, credentials, "PUT", f"/{bucket}/hoisted?{query}")
    assert web.put(url, content=b"h").status_code == 200
    head = s3.head_object(Bucket=bucket, Key="hoisted")
    assert head["Metadata"] == {"colour": "blue"}
    assert web.get(f"{live.s3_url}/{bucket}/hoisted").content == b"h"  # public-read held
    assert s3.get_object_tagging(Bucket=bucket, Key="hoisted")["TagSet"] == [
        {"Key": "t", "Value": "1"}
    ]
    for refused in (
        "x-amz-storage-class=GLACIER",
        "x-amz-server-side-encryption=aws%3Akms",
        "x-amz-website-redirect-location=%2Fx",
    ):
        url = presigned(live, credentials, "PUT", f"/{bucket}/never?{refused}")
        assert code(web.put(url, content=b"n")) == (501, "NotImplemented"), refused
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="never")
    anonymous = web.put(f"{live.s3_url}/{bucket}/never?x-amz-storage-class=GLACIER")
    assert code(anonymous) == (501, "NotImplemented")  # a header without credentials too
    odd = presigned(live, credentials, "PUT", f"/{bucket}/never?x-amz-meta-%E5%90%8D=1")
    assert code(web.put(odd, content=b"n")) == (400, "InvalidArgument")


def _trailer_put(signer: Any, key: str, name: str, value: str, declared: str) -> httpx.Response:
    live, credentials, _, bucket = signer
    data = b"hello world"
    body = f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n" + f"{name}:{value}\r\n\r\n".encode()
    headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", str(len(data))),
        ("x-amz-trailer", declared),
    ]
    payload = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    return signed(live, credentials, "PUT", f"/{bucket}/{key}", headers, body, payload)


def test_one_checksum_per_request_each_one_checked(signer: Any) -> None:
    live, credentials, s3, bucket = signer
    sha512 = "x-amz-checksum-sha512"
    assert code(_trailer_put(signer, "t1", sha512, "garbage", sha512))[0] == 501
    crc = "x-amz-checksum-crc32"
    assert code(_trailer_put(signer, "t2", crc, "AAAAAA==", "x-amz-meta-x"))[0] == 400
    data = b"hello world"
    right = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    headers = [(crc, right), ("x-amz-checksum-sha256", wrong)]
    assert code(signed(live, credentials, "PUT", f"/{bucket}/two", headers, data)) == (
        400,
        "InvalidRequest",
    )
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="t")


def test_a_checksum_type_is_read_as_written_or_refused(signer: Any) -> None:
    live, credentials, s3, bucket = signer
    lower = [("x-amz-checksum-algorithm", "CRC32"), ("x-amz-checksum-type", "full_object")]
    made = signed(live, credentials, "POST", f"/{bucket}/typed?uploads", lower)
    assert made.status_code == 200
    alone = [("x-amz-checksum-type", "FULL_OBJECT")]
    assert code(signed(live, credentials, "POST", f"/{bucket}/typed?uploads", alone)) == (
        400,
        "InvalidRequest",
    )
    upload = made.text.split("<UploadId>")[1].split("<")[0]
    part = s3.upload_part(
        Bucket=bucket,
        Key="typed",
        UploadId=upload,
        PartNumber=1,
        Body=b"p",
        ChecksumAlgorithm="CRC32",
    )
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="typed",
        UploadId=upload,
        MultipartUpload={
            "Parts": [
                {"PartNumber": 1, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]}
            ]
        },
    )
    assert done["ChecksumType"] == "FULL_OBJECT"


def test_part_one_of_an_empty_object_is_the_empty_object(signer: Any) -> None:
    """Java's and .NET's transfer managers read by parts; an empty file failed with 416."""
    _, _, s3, bucket = signer
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    got = s3.get_object(Bucket=bucket, Key="empty", PartNumber=1)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 200 and got["Body"].read() == b""


HUGE = "9" * 4301
SUPERSCRIPT_TWO = "\u00b2"


def test_numbers_that_are_not_numbers_are_400_never_500(signer: Any) -> None:
    live, credentials, s3, bucket = signer
    s3.put_object(Bucket=bucket, Key="n", Body=b"n")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="n")["UploadId"]
    for method, path, headers in [
        ("GET", f"/{bucket}/n?partNumber={HUGE}", []),
        ("GET", f"/?max-buckets={HUGE}", []),
        ("GET", f"/{bucket}?list-type=2&max-keys=%C2%B2", []),
        ("GET", f"/{bucket}/n?uploadId={upload}&part-number-marker={2**64}", []),
        ("PUT", f"/{bucket}/n?uploadId={upload}&partNumber=%C2%B2", []),
        ("DELETE", f"/{bucket}/n", [("x-amz-if-match-size", HUGE)]),
        ("POST", f"/{bucket}/n?uploadId={upload}", [("x-amz-mp-object-size", HUGE)]),
    ]:
        answer = signed(live, credentials, method, path, headers)
        assert 400 <= answer.status_code < 500, (path, headers, answer.text)
    for body in (
        "<CompleteMultipartUpload><Part><PartNumber>\u00b2</PartNumber><ETag>x</ETag></Part>"
        "</CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><PartNumber>\u0661</PartNumber><ETag>x</ETag></Part>"
        "</CompleteMultipartUpload>",
    ):
        answer = signed(
            live, credentials, "POST", f"/{bucket}/n?uploadId={upload}", [], body.encode()
        )
        assert code(answer) == (400, "MalformedXML"), body
    lifecycle = (
        "<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter/>"
        f"<Expiration><Days>{SUPERSCRIPT_TWO}</Days></Expiration></Rule></LifecycleConfiguration>"
    )
    answer = signed(live, credentials, "PUT", f"/{bucket}?lifecycle", [], lifecycle.encode())
    assert code(answer) == (400, "MalformedXML")
    with live.client() as http:
        for headers in ({"Last-Event-ID": "evt_9223372036854775808"}, {"Last-Event-ID": HUGE}):
            assert http.get("/events", headers=headers).status_code == 400


def test_a_value_given_twice_is_never_read_as_one_of_them(signer: Any) -> None:
    live, credentials, _, bucket = signer
    twice = [("x-amz-storage-class", "STANDARD"), ("x-amz-storage-class", "GLACIER")]
    assert code(signed(live, credentials, "PUT", f"/{bucket}/twice", twice, b"t"))[0] == 501
    status = (
        "<VersioningConfiguration><Status>Enabled</Status><Status>Suspended</Status>"
        "</VersioningConfiguration>"
    )
    answer = signed(live, credentials, "PUT", f"/{bucket}?versioning", [], status.encode())
    assert code(answer) == (400, "MalformedXML")
    token = signed(
        live, credentials, "GET", f"/{bucket}?list-type=2&continuation-token=%25%25%25", []
    )
    assert code(token) == (400, "InvalidArgument")


def test_a_post_names_its_acl_acl(signer: Any) -> None:
    """`x-amz-acl` in a POST form was listed as honoured and dropped: refused now."""
    _, _, s3, bucket = signer
    post = s3.generate_presigned_post(
        bucket,
        "posted",
        Fields={"x-amz-acl": "public-read"},
        Conditions=[{"x-amz-acl": "public-read"}],
    )
    sent = web.post(post["url"], data=post["fields"], files={"file": ("f", b"p")})
    assert code(sent) == (501, "NotImplemented")
