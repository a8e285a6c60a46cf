"""Signatures over the bytes as sent (issue 38 points 1 and 2): SigV2 header authentication
with boto3's own signer (`signature_version="s3"`) across the common operations, path- and
virtual-host-style; its refusals by raw request; and non-ASCII metadata, which botocore
sends as UTF-8 and signs as such, under SigV4 and SigV2."""

from __future__ import annotations

import base64
import email.header
import email.utils
import hashlib
import hmac
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.auth import HmacV1Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import raw_sigv4_put, status


@pytest.fixture(scope="module")
def credentials(local_server: LiveServer) -> tuple[str, str]:
    return local_server.s3_credentials()


@pytest.fixture(scope="module")
def v2(local_server: LiveServer, credentials: tuple[str, str]) -> Any:
    return local_server.s3(*credentials, signature_version="s3")


@pytest.fixture
def bucket(v2: Any) -> str:
    name = unique_name("v2")
    v2.create_bucket(Bucket=name)
    return name


def _error(answer: httpx.Response) -> tuple[int, str]:
    text = answer.text
    return answer.status_code, text.split("<Code>")[1].split("<")[0] if "<Code>" in text else ""


def _http_date(offset: float = 0.0) -> str:
    return email.utils.formatdate(time.time() + offset, usegmt=True)


def _v2_signature(secret: str, text: str) -> str:
    """SigV2 as AWS documents it, written out here rather than taken from the server."""
    digest = hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def test_boto3_sigv2_covers_the_common_operations(v2: Any, bucket: str) -> None:
    v2.put_object(Bucket=bucket, Key="a/one.txt", Body=b"one", ContentType="text/plain")
    head = v2.head_object(Bucket=bucket, Key="a/one.txt")
    assert (head["ContentLength"], head["ContentType"]) == (3, "text/plain")
    got = v2.get_object(Bucket=bucket, Key="a/one.txt", Range="bytes=1-", ResponseContentType="x/y")
    assert (got["Body"].read(), got["ContentType"]) == (b"ne", "x/y")
    v2.copy_object(
        Bucket=bucket, Key="b/two.txt", CopySource={"Bucket": bucket, "Key": "a/one.txt"}
    )
    listed = v2.list_objects(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["a/", "b/"]
    assert [c["Key"] for c in v2.list_objects_v2(Bucket=bucket)["Contents"]] == [
        "a/one.txt",
        "b/two.txt",
    ]
    v2.put_object_tagging(
        Bucket=bucket, Key="a/one.txt", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}
    )
    assert v2.get_object_tagging(Bucket=bucket, Key="a/one.txt")["TagSet"] == [
        {"Key": "k", "Value": "v"}
    ]
    assert v2.get_bucket_acl(Bucket=bucket)["Grants"]
    odd = "spaced key/ünï+%.txt"  # signed as sent: percent-encoded by botocore
    v2.put_object(Bucket=bucket, Key=odd, Body=b"odd")
    assert v2.get_object(Bucket=bucket, Key=odd)["Body"].read() == b"odd"
    v2.delete_object(Bucket=bucket, Key=odd)
    versioned = unique_name("v2v")
    v2.create_bucket(Bucket=versioned)
    v2.put_bucket_versioning(Bucket=versioned, VersioningConfiguration={"Status": "Enabled"})
    assert v2.get_bucket_versioning(Bucket=versioned)["Status"] == "Enabled"

    upload = v2.create_multipart_upload(Bucket=bucket, Key="big.bin")["UploadId"]
    parts = []
    for number, body in ((1, b"x" * 5 * 1024 * 1024), (2, b"tail")):
        etag = v2.upload_part(
            Bucket=bucket, Key="big.bin", UploadId=upload, PartNumber=number, Body=body
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    listed_parts = v2.list_parts(Bucket=bucket, Key="big.bin", UploadId=upload)["Parts"]
    assert [p["PartNumber"] for p in listed_parts] == [1, 2]
    v2.complete_multipart_upload(
        Bucket=bucket, Key="big.bin", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert v2.head_object(Bucket=bucket, Key="big.bin")["ContentLength"] == 5 * 1024 * 1024 + 4

    deleted = v2.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "a/one.txt"}, {"Key": "b/two.txt"}]}
    )
    assert sorted(d["Key"] for d in deleted["Deleted"]) == ["a/one.txt", "b/two.txt"]
    v2.delete_object(Bucket=bucket, Key="big.bin")
    assert v2.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    v2.delete_bucket(Bucket=bucket)
    assert bucket not in [b["Name"] for b in v2.list_buckets()["Buckets"]]


def test_sigv2_virtual_host_style_signs_the_bucket_in_the_resource(
    local_server: LiveServer, credentials: tuple[str, str], bucket: str
) -> None:
    host = f"{bucket}.localhost:{local_server.s3_port}"
    for method, body in (("PUT", b"by host"), ("GET", b"")):
        request = AWSRequest(method, f"http://{host}/vh.txt", data=body)
        request.auth_path = f"/{bucket}/vh.txt"  # the resource botocore signs for a vhost
        HmacV1Auth(Credentials(*credentials)).add_auth(request)
        answer = web.request(
            method,
            f"{local_server.s3_url}/vh.txt",
            headers={**dict(request.headers), "Host": host},
            content=body,
        )
        assert answer.status_code == 200, answer.text
    assert answer.content == b"by host"


def test_sigv2_with_x_amz_date_signs_an_empty_date_line(
    local_server: LiveServer, credentials: tuple[str, str], bucket: str
) -> None:
    """Clients that cannot set Date send x-amz-date; the Date line is then empty and
    x-amz-date is signed among the x-amz- headers (in either date form)."""
    access, secret = credentials
    for key, date in (
        ("rfc.txt", _http_date()),
        ("iso.txt", datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")),
    ):
        text = f"PUT\n\ntext/plain\n\nx-amz-date:{date}\nx-amz-meta-a:b\n/{bucket}/{key}"
        answer = web.put(
            f"{local_server.s3_url}/{bucket}/{key}",
            content=b"dated",
            headers={
                "Content-Type": "text/plain",
                "x-amz-date": date,
                "x-amz-meta-a": "b",
                "Authorization": f"AWS {access}:{_v2_signature(secret, text)}",
            },
        )
        assert answer.status_code == 200, answer.text


def test_boto3_sigv2_with_x_amz_date_signs_the_date_line_it_sends(v2: Any, bucket: str) -> None:
    """botocore keeps Date's value on the date line when x-amz-date is added: accepted."""

    def add_date(params: dict[str, Any], **_: Any) -> None:
        params["headers"]["x-amz-date"] = _http_date()

    v2.meta.events.register("before-call.s3.PutObject", add_date)
    try:
        v2.put_object(Bucket=bucket, Key="dated.txt", Body=b"d")
    finally:
        v2.meta.events.unregister("before-call.s3.PutObject", add_date)
    assert v2.get_object(Bucket=bucket, Key="dated.txt")["Body"].read() == b"d"


def test_sigv2_refusals(
    local_server: LiveServer, credentials: tuple[str, str], v2: Any, bucket: str
) -> None:
    access, secret = credentials
    url = f"{local_server.s3_url}/{bucket}/refused.txt"

    def put(authorization: str, date: str | None = None) -> httpx.Response:
        headers = {"Authorization": authorization}
        if date is not None:
            headers["Date"] = date
        return web.put(url, content=b"nope", headers=headers)

    def signed_by(key: str, key_secret: str, date: str) -> str:
        text = f"PUT\n\n\n{date}\n/{bucket}/refused.txt"
        return f"AWS {key}:{_v2_signature(key_secret, text)}"

    now = _http_date()
    assert _error(put(signed_by(access, secret + "x", now), now)) == (
        403,
        "SignatureDoesNotMatch",
    )
    assert _error(put(signed_by("AKNOSUCHKEY000000000", secret, now), now)) == (
        403,
        "InvalidAccessKeyId",
    )
    stale = _http_date(-16 * 60)
    assert _error(put(signed_by(access, secret, stale), stale)) == (403, "RequestTimeTooSkewed")
    ahead = _http_date(16 * 60)
    assert _error(put(signed_by(access, secret, ahead), ahead)) == (403, "RequestTimeTooSkewed")
    assert _error(put(signed_by(access, secret, now))) == (403, "AccessDenied")  # no Date
    for bad in ("Bad Date", "", "Tue, 07 Jul 1950 21:53:04 GMT"):
        answer = web.put(
            url,
            content=b"nope",
            headers={"Authorization": signed_by(access, secret, now), "x-amz-date": bad},
        )
        assert _error(answer) == (403, "AccessDenied"), bad
    assert _error(put(f"AWS {access}", now)) == (400, "InvalidArgument")
    with pytest.raises(ClientError) as missing:
        v2.head_object(Bucket=bucket, Key="refused.txt")
    assert status(missing.value) == 404  # nothing was stored
    within = _http_date(-14 * 60)
    assert put(signed_by(access, secret, within), within).status_code == 200


UNICODE = "ünï 中文 ✓"


@pytest.mark.parametrize("version", ["s3v4", "s3"])
def test_non_ascii_metadata_is_verified_over_the_bytes_boto3_sends(
    local_server: LiveServer, credentials: tuple[str, str], version: str
) -> None:
    """botocore refuses non-ASCII metadata unless told otherwise (here: the header set
    before signing, as an application that bypasses the check does); it sends the value
    as UTF-8 and signs those bytes. It comes back RFC 2047-encoded, as S3 returns it."""
    s3 = local_server.s3(*credentials, signature_version=version)
    name = unique_name("meta")
    s3.create_bucket(Bucket=name)

    def add_header(params: dict[str, Any], **_: Any) -> None:
        params["headers"]["x-amz-meta-name"] = UNICODE

    s3.meta.events.register("before-call.s3.PutObject", add_header)
    s3.put_object(Bucket=name, Key="k", Body=b"x")
    sent = s3.head_object(Bucket=name, Key="k")["Metadata"]["name"]
    assert sent.startswith("=?UTF-8?B?")
    [(decoded, charset)] = email.header.decode_header(sent)
    assert (decoded.decode(charset or "ascii"), charset) == (UNICODE, "utf-8")


def test_metadata_that_is_not_utf8_is_refused_when_signed_as_sent(
    local_server: LiveServer, credentials: tuple[str, str]
) -> None:
    """The canonical request holds the header's bytes: a correct signature over bytes that
    are not UTF-8 passes, and the value is then refused (400), nothing stored."""
    name = unique_name("raw")
    local_server.s3(*credentials).create_bucket(Bucket=name)
    latin = [(b"x-amz-meta-name", b"caf\xe9")]  # Latin-1, not UTF-8
    answer = raw_sigv4_put(local_server.s3_url, credentials, f"/{name}/k", latin)
    assert _error(answer) == (400, "InvalidArgument"), answer.text
    listed = local_server.s3(*credentials).list_objects_v2(Bucket=name)
    assert listed["KeyCount"] == 0
