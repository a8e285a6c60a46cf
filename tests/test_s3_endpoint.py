"""The S3 endpoint with a real client (boto3): every operation, its errors, its limits."""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import botocore.auth
import botocore.crt.auth
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.s3 import code, status
from tests.tls import make_certificate

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("s3api") / "data", TEST_CONFIG).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3(live: LiveServer) -> Any:
    return live.s3()


_names = iter(range(10_000))


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"b{next(_names)}-{int(time.time() * 1000) % 100000}"
    s3.create_bucket(Bucket=name)
    return name


# buckets


def test_bucket_lifecycle(s3: Any, live: LiveServer) -> None:
    s3.create_bucket(
        Bucket="lifecycle", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    assert "lifecycle" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert (
        s3.head_bucket(Bucket="lifecycle")["ResponseMetadata"]["HTTPHeaders"]["x-amz-bucket-region"]
        == "eu-west-1"
    )
    assert s3.get_bucket_location(Bucket="lifecycle")["LocationConstraint"] == "eu-west-1"
    with pytest.raises(ClientError) as again:
        s3.create_bucket(Bucket="lifecycle")
    assert code(again.value) == "BucketAlreadyOwnedByYou" and status(again.value) == 409
    s3.put_object(Bucket="lifecycle", Key="k", Body=b"x")
    with pytest.raises(ClientError) as full:
        s3.delete_bucket(Bucket="lifecycle")
    assert code(full.value) == "BucketNotEmpty"
    s3.delete_object(Bucket="lifecycle", Key="k")
    s3.delete_bucket(Bucket="lifecycle")
    with pytest.raises(ClientError) as gone:
        s3.head_bucket(Bucket="lifecycle")
    assert status(gone.value) == 404
    with pytest.raises(ClientError) as missing:
        s3.list_objects_v2(Bucket="lifecycle")
    assert code(missing.value) == "NoSuchBucket"
    with pytest.raises(ClientError) as invalid:
        s3.create_bucket(Bucket="Bad_Name")
    assert code(invalid.value) == "InvalidBucketName"


def test_bucket_made_by_s3_is_a_bucketd_bucket(s3: Any, live: LiveServer, bucket: str) -> None:
    with live.client() as http:
        names = {b["name"]: b for b in http.get("/buckets", params={"limit": 100}).json()["data"]}
    assert names[bucket]["status"] == "active" and names[bucket]["region"] == "us-east-1"


# objects


def test_put_get_head_delete(s3: Any, bucket: str) -> None:
    put = s3.put_object(
        Bucket=bucket,
        Key="dir/a b+c.txt",
        Body=b"hello world",
        ContentType="text/plain",
        Metadata={"owner": "me", "purpose": "tests"},
    )
    assert put["ETag"] == f'"{hashlib.md5(b"hello world").hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="dir/a b+c.txt")
    assert got["Body"].read() == b"hello world"
    assert got["ContentType"] == "text/plain" and got["ContentLength"] == 11
    assert got["Metadata"] == {"owner": "me", "purpose": "tests"} and got["ETag"] == put["ETag"]
    assert "x-amz-request-id" in got["ResponseMetadata"]["HTTPHeaders"]
    head = s3.head_object(Bucket=bucket, Key="dir/a b+c.txt")
    assert head["ContentLength"] == 11 and head["ETag"] == put["ETag"]
    s3.delete_object(Bucket=bucket, Key="dir/a b+c.txt")
    s3.delete_object(Bucket=bucket, Key="dir/a b+c.txt")  # idempotent
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=bucket, Key="dir/a b+c.txt")
    assert code(missing.value) == "NoSuchKey" and status(missing.value) == 404
    with pytest.raises(ClientError) as missing_head:
        s3.head_object(Bucket=bucket, Key="dir/a b+c.txt")
    assert status(missing_head.value) == 404


def test_default_content_type_and_empty_object(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    got = s3.get_object(Bucket=bucket, Key="empty")
    assert got["Body"].read() == b"" and got["ContentType"] == "binary/octet-stream"
    assert got["ETag"] == f'"{hashlib.md5(b"").hexdigest()}"'


def test_content_md5_is_checked(s3: Any, bucket: str) -> None:
    good = base64.b64encode(hashlib.md5(b"checked").digest()).decode()
    s3.put_object(Bucket=bucket, Key="md5", Body=b"checked", ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as mismatch:
        s3.put_object(Bucket=bucket, Key="md5", Body=b"checked!", ContentMD5=bad)
    assert code(mismatch.value) == "BadDigest"
    assert s3.get_object(Bucket=bucket, Key="md5")["Body"].read() == b"checked"


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_checksums_are_stored_and_returned(s3: Any, bucket: str, algorithm: str) -> None:
    put = s3.put_object(
        Bucket=bucket,
        Key=f"sum-{algorithm}",
        Body=b"checksummed content",
        ChecksumAlgorithm=algorithm,
    )
    value = put[f"Checksum{algorithm}"]
    head = s3.head_object(Bucket=bucket, Key=f"sum-{algorithm}", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == value
    got = s3.get_object(Bucket=bucket, Key=f"sum-{algorithm}", ChecksumMode="ENABLED")
    assert got["Body"].read() == b"checksummed content"


def test_a_wrong_checksum_is_refused(live: LiveServer, bucket: str) -> None:
    access, secret = live.s3_credentials()
    url = f"{live.s3_url}/{bucket}/wrong"
    request = AWSRequest("PUT", url, data=b"payload", headers={"x-amz-checksum-crc32": "AAAAAA=="})
    S3SigV4Auth(Credentials(access, secret), "s3", "us-east-1").add_auth(request)
    response = web.put(url, content=b"payload", headers=dict(request.headers))
    assert response.status_code == 400 and b"<Code>BadDigest</Code>" in response.content


def test_conditional_writes(s3: Any, bucket: str) -> None:
    first = s3.put_object(Bucket=bucket, Key="cond", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket=bucket, Key="cond", Body=b"two", IfNoneMatch="*")
    assert status(exists.value) == 412 and code(exists.value) == "PreconditionFailed"
    s3.put_object(Bucket=bucket, Key="cond", Body=b"two", IfMatch=first["ETag"])
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket=bucket, Key="cond", Body=b"three", IfMatch=first["ETag"])
    assert status(stale.value) == 412
    assert s3.get_object(Bucket=bucket, Key="cond")["Body"].read() == b"two"


def test_get_ranges_conditions_and_overrides(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="r", Body=b"0123456789")["ETag"]
    part = s3.get_object(Bucket=bucket, Key="r", Range="bytes=2-5")
    assert part["Body"].read() == b"2345" and part["ContentRange"] == "bytes 2-5/10"
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=-3")["Body"].read() == b"789"
    with pytest.raises(ClientError) as beyond:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=20-")
    assert code(beyond.value) == "InvalidRange" and status(beyond.value) == 416
    with pytest.raises(ClientError) as not_matching:
        s3.get_object(Bucket=bucket, Key="r", IfMatch='"nope"')
    assert status(not_matching.value) == 412
    with pytest.raises(ClientError) as not_modified:
        s3.get_object(Bucket=bucket, Key="r", IfNoneMatch=etag)
    assert status(not_modified.value) == 304
    modified = s3.head_object(Bucket=bucket, Key="r")["LastModified"]
    with pytest.raises(ClientError) as since:
        s3.get_object(Bucket=bucket, Key="r", IfModifiedSince=modified)
    assert status(since.value) == 304
    with pytest.raises(ClientError) as unmodified:
        s3.get_object(Bucket=bucket, Key="r", IfUnmodifiedSince=modified.replace(year=2001))
    assert status(unmodified.value) == 412
    overridden = s3.get_object(
        Bucket=bucket,
        Key="r",
        ResponseContentType="text/csv",
        ResponseContentDisposition="attachment; filename=r.csv",
    )
    assert overridden["ContentType"] == "text/csv"
    assert overridden["ContentDisposition"] == "attachment; filename=r.csv"


# listings


def test_list_objects_v2_pagination_prefix_delimiter(s3: Any, bucket: str) -> None:
    keys = ["a", "b/1", "b/2", "b/c/3", "c", "d/1", "e"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    listed, prefixes, token = [], [], None
    while True:
        kwargs = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket=bucket, Delimiter="/", MaxKeys=2, **kwargs)
        listed += [c["Key"] for c in page.get("Contents", [])]
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        assert page["KeyCount"] <= 2
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
    assert listed == ["a", "c", "e"] and prefixes == ["b/", "d/"]
    inner = s3.list_objects_v2(Bucket=bucket, Prefix="b/", Delimiter="/")
    assert [c["Key"] for c in inner["Contents"]] == ["b/1", "b/2"]
    assert [p["Prefix"] for p in inner["CommonPrefixes"]] == ["b/c/"]
    after = s3.list_objects_v2(Bucket=bucket, StartAfter="b/2")
    assert [c["Key"] for c in after["Contents"]] == ["b/c/3", "c", "d/1", "e"]
    for item in s3.list_objects_v2(Bucket=bucket)["Contents"]:
        assert item["ETag"] == f'"{hashlib.md5(b"x").hexdigest()}"' and item["Size"] == 1
    assert s3.list_objects_v2(Bucket=bucket, MaxKeys=0)["KeyCount"] == 0


def test_list_objects_v1_with_markers(s3: Any, bucket: str) -> None:
    for key in ["k1", "k2", "k3", "k4"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    first = s3.list_objects(Bucket=bucket, MaxKeys=3)
    assert [c["Key"] for c in first["Contents"]] == ["k1", "k2", "k3"] and first["IsTruncated"]
    rest = s3.list_objects(Bucket=bucket, Marker="k3")
    assert [c["Key"] for c in rest["Contents"]] == ["k4"] and not rest["IsTruncated"]
    paginator = s3.get_paginator("list_objects")
    assert [
        c["Key"]
        for page in paginator.paginate(Bucket=bucket, PaginationConfig={"PageSize": 1})
        for c in page["Contents"]
    ] == ["k1", "k2", "k3", "k4"]


def test_encoding_type_url(s3: Any, bucket: str) -> None:
    key = "weird key/ü&<>.txt"
    s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    listed = s3.list_objects_v2(Bucket=bucket, EncodingType="url")  # asked for: not decoded
    assert [c["Key"] for c in listed["Contents"]] == [quote(key, safe="/")]
    decoded = s3.list_objects_v2(Bucket=bucket)  # botocore asks for url itself and decodes
    assert [c["Key"] for c in decoded["Contents"]] == [key]
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"x"


def test_delete_objects(s3: Any, bucket: str) -> None:
    for key in ["d1", "d2", "d3"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    result = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "d1"}, {"Key": "d2"}, {"Key": "absent"}]}
    )
    assert sorted(d["Key"] for d in result["Deleted"]) == ["absent", "d1", "d2"]
    quiet = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "d3"}], "Quiet": True})
    assert "Deleted" not in quiet
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_copy_object(s3: Any, bucket: str) -> None:
    s3.put_object(
        Bucket=bucket, Key="src", Body=b"copy me", ContentType="text/plain", Metadata={"a": "1"}
    )
    s3.copy_object(Bucket=bucket, Key="same-meta", CopySource={"Bucket": bucket, "Key": "src"})
    copied = s3.get_object(Bucket=bucket, Key="same-meta")
    assert copied["Body"].read() == b"copy me" and copied["Metadata"] == {"a": "1"}
    assert copied["ContentType"] == "text/plain"
    s3.copy_object(
        Bucket=bucket,
        Key="new-meta",
        CopySource=f"{bucket}/src",
        MetadataDirective="REPLACE",
        ContentType="application/x-thing",
        Metadata={"b": "2"},
    )
    replaced = s3.head_object(Bucket=bucket, Key="new-meta")
    assert replaced["Metadata"] == {"b": "2"} and replaced["ContentType"] == "application/x-thing"
    other = f"{bucket}-other"
    s3.create_bucket(Bucket=other)
    s3.copy_object(Bucket=other, Key="across", CopySource={"Bucket": bucket, "Key": "src"})
    assert s3.get_object(Bucket=other, Key="across")["Body"].read() == b"copy me"
    with pytest.raises(ClientError) as itself:
        s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"})
    assert code(itself.value) == "InvalidRequest"
    with pytest.raises(ClientError) as absent:
        s3.copy_object(Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "absent"})
    assert code(absent.value) == "NoSuchKey"


# multipart


def test_multipart_upload(s3: Any, bucket: str) -> None:
    parts_data = [b"a" * (5 * MiB), b"b" * (5 * MiB), b"tail"]
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="mp", ContentType="application/x-mp", Metadata={"m": "p"}
    )
    upload_id = upload["UploadId"]
    assert upload_id in [
        u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    ]
    etags = []
    for number, data in enumerate(parts_data, start=1):
        etags.append(
            s3.upload_part(
                Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=number, Body=data
            )["ETag"]
        )
    assert etags[0] == f'"{hashlib.md5(parts_data[0]).hexdigest()}"'
    listed = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload_id, MaxParts=2)
    assert [p["PartNumber"] for p in listed["Parts"]] == [1, 2] and listed["IsTruncated"]
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload_id,
        MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, start=1)]
        },
    )
    expected = hashlib.md5(b"".join(hashlib.md5(d).digest() for d in parts_data)).hexdigest() + "-3"
    assert done["ETag"] == f'"{expected}"'
    got = s3.get_object(Bucket=bucket, Key="mp")
    assert got["Body"].read() == b"".join(parts_data) and got["ETag"] == done["ETag"]
    assert got["Metadata"] == {"m": "p"} and got["ContentType"] == "application/x-mp"
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    with pytest.raises(ClientError) as finished:
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=1, Body=b"x")
    assert code(finished.value) == "NoSuchUpload"


def test_multipart_errors_and_abort(s3: Any, bucket: str, live: LiveServer) -> None:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="bad")["UploadId"]
    small = s3.upload_part(
        Bucket=bucket, Key="bad", UploadId=upload_id, PartNumber=1, Body=b"small"
    )["ETag"]
    last = s3.upload_part(Bucket=bucket, Key="bad", UploadId=upload_id, PartNumber=2, Body=b"last")[
        "ETag"
    ]
    parts = [{"PartNumber": 1, "ETag": small}, {"PartNumber": 2, "ETag": last}]
    with pytest.raises(ClientError) as too_small:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="bad", UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    assert code(too_small.value) == "EntityTooSmall"
    with pytest.raises(ClientError) as wrong:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="bad",
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": '"00"'}]},
        )
    assert code(wrong.value) == "InvalidPart"
    with pytest.raises(ClientError) as order:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="bad",
            UploadId=upload_id,
            MultipartUpload={"Parts": list(reversed(parts))},
        )
    assert code(order.value) == "InvalidPartOrder"
    s3.abort_multipart_upload(Bucket=bucket, Key="bad", UploadId=upload_id)
    with pytest.raises(ClientError) as aborted:
        s3.list_parts(Bucket=bucket, Key="bad", UploadId=upload_id)
    assert code(aborted.value) == "NoSuchUpload"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="bad")
    assert not (live.data_dir / "multipart" / upload_id).exists()


def test_upload_part_copy(s3: Any, bucket: str) -> None:
    source = bytes(range(256)) * (24 * 1024)  # 6 MiB
    s3.put_object(Bucket=bucket, Key="source", Body=source)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    first = s3.upload_part_copy(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload_id,
        PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "source"},
    )["CopyPartResult"]["ETag"]
    second = s3.upload_part_copy(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload_id,
        PartNumber=2,
        CopySource=f"{bucket}/source",
        CopySourceRange="bytes=0-99",
    )["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="assembled",
        UploadId=upload_id,
        MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": first}, {"PartNumber": 2, "ETag": second}]
        },
    )
    assert s3.get_object(Bucket=bucket, Key="assembled")["Body"].read() == source + source[:100]


def test_upload_file_of_50_mib_goes_multipart_with_checksums(
    s3: Any, bucket: str, tmp_path: Path
) -> None:
    data = bytes(range(256)) * (200 * 1024) + b"end"
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    sent: list[str] = []
    s3.meta.events.register(
        "before-send.s3.UploadPart",
        lambda request, **_: sent.append(
            request.headers.get("x-amz-checksum-crc32", b"") and "crc32"
        ),
    )
    s3.upload_file(str(source), bucket, "big.bin")
    assert len(sent) >= 6 and all(sent)  # multipart, each part with its CRC32
    head = s3.head_object(Bucket=bucket, Key="big.bin", ChecksumMode="ENABLED")
    assert head["ContentLength"] == len(data) and head["ETag"].endswith(f'-{len(sent)}"')
    target = tmp_path / "back.bin"
    s3.download_file(bucket, "big.bin", str(target))
    assert target.read_bytes() == data


# presigned URLs


def test_presigned_get_and_put_sigv4_and_sigv2(live: LiveServer, bucket: str) -> None:
    access, secret = live.s3_credentials()
    for version in ("s3v4", "s3"):
        client = live.s3(access, secret, signature_version=version)
        put_url = client.generate_presigned_url(
            "put_object", Params={"Bucket": bucket, "Key": f"p-{version}"}, ExpiresIn=300
        )
        assert web.put(put_url, content=b"presigned body").status_code == 200
        get_url = client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": f"p-{version}"}
        )
        response = web.get(get_url)
        assert response.status_code == 200 and response.content == b"presigned body"
        tampered = web.get(get_url.replace(f"p-{version}", "other"))
        assert tampered.status_code == 403 and b"SignatureDoesNotMatch" in tampered.content


def test_presigned_urls_expire(
    live: LiveServer, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = live.s3(signature_version="s3v4")
    client.put_object(Bucket=bucket, Key="short", Body=b"x")
    signed_at = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=90)
    for signers in (botocore.auth, botocore.crt.auth):  # the CRT's signer when awscrt is there
        monkeypatch.setattr(signers, "get_current_datetime", lambda **_: signed_at)
    url = client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "short"}, ExpiresIn=60
    )
    monkeypatch.undo()
    assert web.get(url.replace("X-Amz-Expires=60", "X-Amz-Expires=120")).status_code == 403
    response = web.get(url)
    assert response.status_code == 403 and b"Request has expired" in response.content


# authentication


def test_bad_credentials(live: LiveServer, bucket: str) -> None:
    access, secret = live.s3_credentials()
    with pytest.raises(ClientError) as unknown:
        live.s3("BKDUNKNOWN0000000000", secret).list_buckets()
    assert code(unknown.value) == "InvalidAccessKeyId" and status(unknown.value) == 403
    with pytest.raises(ClientError) as wrong:
        live.s3(access, "not-the-secret").list_buckets()
    assert code(wrong.value) == "SignatureDoesNotMatch"
    anonymous = web.get(f"{live.s3_url}/{bucket}")
    assert anonymous.status_code == 403 and b"AccessDenied" in anonymous.content
    assert anonymous.headers["x-amz-request-id"]


def test_clock_skew_is_refused(live: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    access, secret = live.s3_credentials()
    request = AWSRequest("GET", f"{live.s3_url}/")
    skewed = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(
        minutes=16
    )
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: skewed)
    S3SigV4Auth(Credentials(access, secret), "s3", "us-east-1").add_auth(request)
    response = web.get(f"{live.s3_url}/", headers=dict(request.headers))
    assert response.status_code == 403 and b"RequestTimeTooSkewed" in response.content


def test_scopes_and_bucket_restriction(live: LiveServer, s3: Any) -> None:
    s3.create_bucket(Bucket="scoped-one")
    s3.create_bucket(Bucket="scoped-two")
    s3.put_object(Bucket="scoped-two", Key="secret", Body=b"s")
    with live.client() as http:
        org = http.get("/organization").json()["data"]["id"]
        bucket_id = next(
            b["id"]
            for b in http.get("/buckets", params={"limit": 100}).json()["data"]
            if b["name"] == "scoped-one"
        )
    reader = live.s3(*live.s3_credentials(org, "buckets:read,files:read"))
    with pytest.raises(ClientError) as denied:
        reader.put_object(Bucket="scoped-one", Key="k", Body=b"x")
    assert code(denied.value) == "AccessDenied"
    narrow = live.s3(
        *live.s3_credentials(org, "buckets:read,files:read,files:write", "--bucket", bucket_id)
    )
    assert [b["Name"] for b in narrow.list_buckets()["Buckets"]] == ["scoped-one"]
    narrow.put_object(Bucket="scoped-one", Key="k", Body=b"x")
    with pytest.raises(ClientError) as hidden:
        narrow.get_object(Bucket="scoped-two", Key="secret")
    assert code(hidden.value) == "NoSuchBucket"


# the same data through both APIs


def test_s3_and_v1_see_the_same_files(live: LiveServer, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="from-s3.txt", Body=b"via s3", ContentType="text/plain")
    with live.client() as http:
        bucket_id = next(
            b["id"]
            for b in http.get("/buckets", params={"limit": 100}).json()["data"]
            if b["name"] == bucket
        )
        assert http.get(f"/buckets/{bucket_id}/files/from-s3.txt").content == b"via s3"
        http.put(
            f"/buckets/{bucket_id}/files/from-v1.txt",
            content=b"via v1",
            headers={"Content-Type": "text/plain"},
        )
    got = s3.get_object(Bucket=bucket, Key="from-v1.txt")
    assert (
        got["Body"].read() == b"via v1" and got["ETag"] == f'"{hashlib.md5(b"via v1").hexdigest()}"'
    )
    listed = {c["Key"]: c["ETag"] for c in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed["from-v1.txt"] == got["ETag"]  # the MD5, computed once, is kept


def test_virtual_host_addressing(live: LiveServer, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="vhost.txt", Body=b"by host")
    access, secret = live.s3_credentials()
    url = f"http://{bucket}.localhost:{live.s3_port}/vhost.txt"
    request = AWSRequest("GET", url)
    S3SigV4Auth(Credentials(access, secret), "s3", "us-east-1").add_auth(request)
    response = web.get(
        f"{live.s3_url}/vhost.txt",
        headers={**dict(request.headers), "Host": f"{bucket}.localhost:{live.s3_port}"},
    )
    assert response.status_code == 200 and response.content == b"by host"


def test_unsupported_operations_say_so(live: LiveServer, s3: Any, bucket: str) -> None:
    with pytest.raises(ClientError) as website:
        s3.get_bucket_website(Bucket=bucket)
    assert code(website.value) == "NotImplemented" and status(website.value) == 501
    with pytest.raises(ClientError) as replication:
        s3.get_bucket_replication(Bucket=bucket)
    assert code(replication.value) == "NotImplemented"


# limits


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    config = """
[uploads]
default_max_bytes = 1000
deadline_seconds = 1.5
[plans.free]
requests_per_minute = 60
max_storage_bytes = 1500
"""
    server = LiveServer(tmp_path_factory.mktemp("s3limits") / "data", config).start()
    yield server
    server.stop()


def test_limits_of_v1_apply(limited: LiveServer) -> None:
    org = limited.cli("orgs", "create", "small", "--plan", "free").strip().splitlines()[-1]
    client = limited.s3(*limited.s3_credentials(org))
    client.create_bucket(Bucket="limits")
    with pytest.raises(ClientError) as large:
        client.put_object(Bucket="limits", Key="big", Body=b"x" * 1001)
    assert code(large.value) == "EntityTooLarge"
    client.put_object(Bucket="limits", Key="ok", Body=b"x" * 1000)
    with pytest.raises(ClientError) as quota:
        client.put_object(Bucket="limits", Key="more", Body=b"x" * 600)
    assert code(quota.value) == "QuotaExceeded" and status(quota.value) == 403
    with limited.client() as http:
        admin_org = http.get("/organization").json()["data"]["id"]
    assert admin_org != org
    statuses = []
    for _ in range(70):
        try:
            client.list_objects_v2(Bucket="limits")
            statuses.append(200)
        except ClientError as error:
            statuses.append(status(error))
            if status(error) == 503:
                assert code(error) == "SlowDown"
    assert 503 in statuses


def test_https_with_aws_chunked_trailers(tmp_path: Path) -> None:
    """Over HTTPS boto3 streams with STREAMING-UNSIGNED-PAYLOAD-TRAILER and a checksum trailer."""
    cert, key = make_certificate(tmp_path)
    live = LiveServer(
        tmp_path / "data", f's3_tls_cert = "{cert}"\ns3_tls_key = "{key}"\n' + TEST_CONFIG
    ).start()
    try:
        access, secret = live.s3_credentials()
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=f"https://127.0.0.1:{live.s3_port}",
            aws_access_key_id=access,
            aws_secret_access_key=secret,
            region_name="us-east-1",
            verify=str(cert),
            config=Config(s3={"addressing_style": "path"}),
        )
        seen: list[str] = []
        client.meta.events.register(
            "before-send.s3.PutObject",
            lambda request, **_: seen.append(
                request.headers.get("x-amz-content-sha256", b"").decode()
                if isinstance(request.headers.get("x-amz-content-sha256"), bytes)
                else request.headers.get("x-amz-content-sha256", "")
            ),
        )
        client.create_bucket(Bucket="tls")
        put = client.put_object(
            Bucket="tls", Key="k", Body=io.BytesIO(b"z" * 100_000), ChecksumAlgorithm="CRC32C"
        )
        assert seen == ["STREAMING-UNSIGNED-PAYLOAD-TRAILER"]
        head = client.head_object(Bucket="tls", Key="k", ChecksumMode="ENABLED")
        assert head["ChecksumCRC32C"] == put["ChecksumCRC32C"] and head["ContentLength"] == 100_000
        assert client.get_object(Bucket="tls", Key="k")["Body"].read() == b"z" * 100_000
        large = os.urandom(3 * 1024 * 1024)  # sent from the file, never by sendfile past TLS
        client.put_object(Bucket="tls", Key="large", Body=large)
        assert client.get_object(Bucket="tls", Key="large")["Body"].read() == large
        # An encrypted one is opened block by block and sent as chunks (no FILLED past TLS).
        client.put_object(Bucket="tls", Key="sealed", Body=large, ServerSideEncryption="AES256")
        assert client.get_object(Bucket="tls", Key="sealed")["Body"].read() == large
        part = client.get_object(Bucket="tls", Key="sealed", Range="bytes=70000-")["Body"]
        assert part.read() == large[70000:]
        client.close()
    finally:
        live.stop()


def test_signed_streaming_chunks_end_to_end(live: LiveServer, bucket: str, s3: Any) -> None:
    """STREAMING-AWS4-HMAC-SHA256-PAYLOAD, signed with the chain AWS documents."""
    from gateway.s3 import sigv4

    access, secret = live.s3_credentials()
    data = [b"a" * 65536, b"b" * 1000]
    now = datetime.datetime.now(datetime.UTC)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    credential = sigv4.Credential(access, amz_date[:8], "us-east-1", "s3")
    host = f"127.0.0.1:{live.s3_port}"
    body_length = sum(len(f"{len(c):x};chunk-signature=") + 64 + 4 + len(c) for c in [*data, b""])
    headers = [
        ("host", host),
        ("x-amz-date", amz_date),
        ("x-amz-content-sha256", sigv4.STREAMING_SIGNED),
        ("content-encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", str(sum(map(len, data)))),
        ("content-length", str(body_length)),
        ("content-type", "text/plain"),
    ]
    signed = tuple(sorted(name for name, _ in headers))
    canonical = sigv4.canonical_request(
        "PUT", f"/{bucket}/streamed", "", headers, signed, sigv4.STREAMING_SIGNED
    )
    key = sigv4.signing_key(secret, credential)
    seed = sigv4.sign(key, sigv4.string_to_sign(amz_date, credential.scope, canonical))
    body, previous = b"", seed
    for chunk in [*data, b""]:
        previous = sigv4.sign(
            key,
            sigv4.chunk_string_to_sign(
                amz_date, credential.scope, previous, hashlib.sha256(chunk).hexdigest()
            ),
        )
        body += f"{len(chunk):x};chunk-signature={previous}\r\n".encode() + chunk + b"\r\n"
    assert len(body) == body_length
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={access}/{credential.scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={seed}"
    )
    request_headers = {name: value for name, value in headers if name != "host"}
    response = web.put(
        f"{live.s3_url}/{bucket}/streamed",
        content=body,
        headers={**request_headers, "Authorization": authorization},
    )
    assert response.status_code == 200, response.text
    assert s3.get_object(Bucket=bucket, Key="streamed")["Body"].read() == b"".join(data)
    forged = body.replace(b"b" * 1000, b"c" * 1000)
    refused = web.put(
        f"{live.s3_url}/{bucket}/streamed",
        content=forged,
        headers={**request_headers, "Authorization": authorization},
    )
    assert refused.status_code == 403 and b"SignatureDoesNotMatch" in refused.content
    assert s3.get_object(Bucket=bucket, Key="streamed")["Body"].read() == b"".join(data)


def test_secrets_are_sealed_at_rest(live: LiveServer) -> None:
    _, secret = live.s3_credentials()
    assert secret.encode() not in (live.data_dir / "index.db").read_bytes()
    for wal in live.data_dir.glob("index.db-wal"):
        assert secret.encode() not in wal.read_bytes()
    assert (live.data_dir / "secrets.key").stat().st_mode & 0o077 == 0


def test_mime_allow_list_and_deadline_apply(live: LiveServer, s3: Any, bucket: str) -> None:
    with live.client() as http:
        bucket_id = next(
            b["id"]
            for b in http.get("/buckets", params={"limit": 100}).json()["data"]
            if b["name"] == bucket
        )
        http.patch(f"/buckets/{bucket_id}", json={"allowedContentTypes": ["image/*"]})
    s3.put_object(Bucket=bucket, Key="ok.png", Body=b"png", ContentType="image/png")
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key="no.txt", Body=b"text", ContentType="text/plain")
    assert (
        code(refused.value) == "InvalidArgument"
        and "not allowed" in refused.value.response["Error"]["Message"]
    )


def test_every_answer_has_a_request_id(live: LiveServer, s3: Any, bucket: str) -> None:
    for response in (
        web.get(f"{live.s3_url}/"),
        web.put(f"{live.s3_url}/{bucket}/x", content=b"x"),
        web.head(f"{live.s3_url}/{bucket}"),
    ):
        request_id = response.headers["x-amz-request-id"]
        assert len(request_id) == 32 and request_id == response.headers["x-request-id"]
    assert "x-amz-request-id" in s3.list_buckets()["ResponseMetadata"]["HTTPHeaders"]


def test_a_stalled_upload_meets_the_deadline(limited: LiveServer) -> None:
    from tests.support.rawhttp import connect, read_response, request_head

    client = limited.s3(signature_version="s3v4")
    client.create_bucket(Bucket="slow")
    url = client.generate_presigned_url("put_object", Params={"Bucket": "slow", "Key": "k"})
    path = url.split(str(limited.s3_port), 1)[1]
    started = time.monotonic()
    with connect(limited.s3_url) as sock:
        head = request_head(
            "PUT", path, {"Host": f"127.0.0.1:{limited.s3_port}", "Content-Length": "500"}
        )
        sock.sendall(head + b"x" * 100)
        response = read_response(sock)
    assert response.status == 400 and b"<Code>RequestTimeout</Code>" in response.body
    assert time.monotonic() - started < 10
