"""S3 fidelity details with boto3: headers stored with objects, non-ASCII metadata, owners
and key encoding in listings, the names CreateBucket refuses, UploadPartCopy ranges."""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import code, status


@pytest.fixture
def live(local_server: LiveServer) -> LiveServer:
    return local_server


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("fd")
    s3.create_bucket(Bucket=name)
    return name


@pytest.mark.parametrize(
    ("copy_range", "expected"),
    [
        ("bytes=5-", (400, "InvalidArgument")),
        ("bytes=-5", (400, "InvalidArgument")),
        ("bytes=9-3", (400, "InvalidArgument")),
        ("items=0-3", (400, "InvalidArgument")),
        ("bytes=0-3,5-6", (400, "InvalidArgument")),
        ("bytes=0-10", (416, "InvalidRange")),
        ("bytes=10-10", (416, "InvalidRange")),
    ],
)
def test_upload_part_copy_refuses_ranges_as_s3_does(
    s3: Any, bucket: str, copy_range: str, expected: tuple[int, str]
) -> None:
    s3.put_object(Bucket=bucket, Key="ten", Body=b"0123456789")
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="ranged")["UploadId"]
    with pytest.raises(ClientError) as refused:
        s3.upload_part_copy(
            Bucket=bucket,
            Key="ranged",
            UploadId=upload_id,
            PartNumber=1,
            CopySource=f"{bucket}/ten",
            CopySourceRange=copy_range,
        )
    assert (status(refused.value), code(refused.value)) == expected
    assert "Parts" not in s3.list_parts(Bucket=bucket, Key="ranged", UploadId=upload_id)
    s3.abort_multipart_upload(Bucket=bucket, Key="ranged", UploadId=upload_id)


@pytest.mark.parametrize("name", ["192.168.5.4", "two..dots", "xn--punycode", "files-s3alias"])
def test_create_bucket_refuses_names_s3_refuses(s3: Any, name: str) -> None:
    with pytest.raises(ClientError) as refused:
        s3.create_bucket(Bucket=name)
    assert (status(refused.value), code(refused.value)) == (400, "InvalidBucketName")
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_stored_headers_come_back_and_change_only_by_a_replacing_copy(s3: Any, bucket: str) -> None:
    stored = {
        "CacheControl": "max-age=60",
        "ContentDisposition": 'attachment; filename="report.pdf"',
        "ContentEncoding": "gzip",
        "ContentLanguage": "fr",
    }
    s3.put_object(
        Bucket=bucket, Key="kept", Body=b"x", Expires=datetime.datetime(2030, 1, 1), **stored
    )
    head = s3.head_object(Bucket=bucket, Key="kept")
    assert {name: head[name] for name in stored} == stored
    assert head["ExpiresString"] == "Tue, 01 Jan 2030 00:00:00 GMT"
    s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{bucket}/kept")
    copied = s3.head_object(Bucket=bucket, Key="copied")
    assert {name: copied[name] for name in stored} == stored
    s3.copy_object(
        Bucket=bucket,
        Key="copied",
        CopySource=f"{bucket}/kept",
        MetadataDirective="REPLACE",
        CacheControl="no-cache",
    )
    replaced = s3.head_object(Bucket=bucket, Key="copied")
    assert replaced["CacheControl"] == "no-cache" and "ContentLanguage" not in replaced
    overridden = s3.get_object(Bucket=bucket, Key="kept", ResponseCacheControl="no-store")
    assert overridden["CacheControl"] == "no-store"
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="parts", ContentLanguage="de")[
        "UploadId"
    ]
    part = s3.upload_part(Bucket=bucket, Key="parts", UploadId=upload_id, PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="parts",
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.head_object(Bucket=bucket, Key="parts")["ContentLanguage"] == "de"
    # A streamed (aws-chunked) upload keeps the content's own encoding only.
    s3.put_object(Bucket=bucket, Key="plain", Body=b"y")
    assert "ContentEncoding" not in s3.head_object(Bucket=bucket, Key="plain")


def test_an_active_type_stays_an_attachment_whatever_is_stored(s3: Any, bucket: str) -> None:
    s3.put_object(
        Bucket=bucket,
        Key="page.html",
        Body=b"<script>alert(1)</script>",
        ContentType="text/html",
        ContentDisposition="inline",
    )
    assert s3.head_object(Bucket=bucket, Key="page.html")["ContentDisposition"] == "attachment"


def test_listings_name_the_owner_and_encode_keys_on_request(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="a b/ü.txt", Body=b"x")
    v2 = s3.list_objects_v2(Bucket=bucket)["Contents"][0]
    assert "Owner" not in v2
    owner = s3.list_objects_v2(Bucket=bucket, FetchOwner=True)["Contents"][0]["Owner"]
    assert owner["ID"] and owner["DisplayName"]
    assert s3.list_objects(Bucket=bucket)["Contents"][0]["Owner"] == owner
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="a b/ü.bin")["UploadId"]
    raw = s3.list_multipart_uploads(Bucket=bucket, EncodingType="url")
    assert raw["Uploads"][0]["Key"] == "a%20b/%C3%BC.bin"
    assert raw["Uploads"][0]["Owner"] == owner and raw["Uploads"][0]["Initiator"] == owner
    parts = s3.list_parts(Bucket=bucket, Key="a b/ü.bin", UploadId=upload_id)
    assert parts["Owner"] == owner and parts["Initiator"] == owner
    with pytest.raises(ClientError) as refused:
        s3.list_multipart_uploads(Bucket=bucket, EncodingType="base64")
    assert code(refused.value) == "InvalidArgument"
    s3.abort_multipart_upload(Bucket=bucket, Key="a b/ü.bin", UploadId=upload_id)


def test_non_ascii_metadata_comes_back_rfc_2047_encoded(live: LiveServer, bucket: str) -> None:
    """A header value is bytes: UTF-8 ones are the text they encode (sent here in a presigned
    URL's query, where they are its headers, and signed with it). Other bytes are refused:
    tests/test_s3_sigv2.py."""
    signer = live.s3(signature_version="s3v4")

    def put(value: str) -> httpx.Response:
        path = f"/{bucket}/meta?x-amz-meta-name={value}"
        request = AWSRequest("PUT", live.s3_url + path, {"Host": live.s3_url[7:]})
        S3SigV4QueryAuth(Credentials(*live.s3_credentials()), "s3", "us-east-1", 300).add_auth(
            request
        )
        return web.put(str(request.url), content=b"x")

    sent = put(quote("ünïcode"))
    assert sent.status_code == 200, sent.text
    metadata = signer.head_object(Bucket=bucket, Key="meta")["Metadata"]
    assert metadata == {"name": "=?UTF-8?B?w7xuw69jb2Rl?="}  # S3's form for non-ASCII values
