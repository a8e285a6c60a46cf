"""S3 write fidelity with boto3 against the shared server (issue 38, points 3, 4, 5 and 11):
a part uploaded again and listed again, a completion retried, If-Match with every ETag form
bucketd gives, the 404 of If-Match where there is no object, If-None-Match with ETags, no
version id from the writes of a null version (a bucket never versioned, or Suspended),
CreateBucket of one's own bucket in us-east-1 and elsewhere, ListBuckets' region filter and
ListDirectoryBuckets."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.s3 import code, status

MiB = 1024 * 1024


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("wf")
    s3.create_bucket(Bucket=name)
    return name


def refused(call: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    return status(caught.value), code(caught.value)


def _body(s3: Any, bucket: str, key: str) -> bytes:
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


# Point 3: multipart


def test_a_part_uploaded_again_and_listed_again_completes_with_the_last(
    s3: Any, bucket: str
) -> None:
    """Clients that record each UploadPart answer in the order they finished list a part
    sent twice twice: the last listing of the number names the part."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]

    def part(number: int, body: bytes) -> str:
        answer = s3.upload_part(
            Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=number, Body=body
        )
        return str(answer["ETag"])

    first = part(1, b"a" * (5 * MiB))
    second = part(2, b"tail")
    again = part(1, b"b" * (5 * MiB))  # part 1 re-sent after part 2
    listed = [
        {"PartNumber": 1, "ETag": first.strip('"')},
        {"PartNumber": 1, "ETag": again},
        {"PartNumber": 2, "ETag": second},
    ]
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload_id, MultipartUpload={"Parts": listed}
    )
    assert done["ETag"].endswith('-2"')
    assert _body(s3, bucket, "k") == b"b" * (5 * MiB) + b"tail"
    assert "VersionId" not in done  # a bucket never versioned (point 5)


def test_a_repeated_part_number_listed_last_with_a_stale_etag_is_refused(
    s3: Any, bucket: str
) -> None:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    stale = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1, Body=b"a")
    fresh = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1, Body=b"b")
    listed = [{"PartNumber": 1, "ETag": fresh["ETag"]}, {"PartNumber": 1, "ETag": stale["ETag"]}]
    answer = refused(
        s3.complete_multipart_upload,
        Bucket=bucket,
        Key="k",
        UploadId=upload_id,
        MultipartUpload={"Parts": listed},
    )
    assert answer == (400, "InvalidPart")
    s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id)


def test_a_part_sent_again_while_its_first_upload_runs_finishes_last_and_counts(
    s3: Any, bucket: str, local_server: LiveServer
) -> None:
    """Part 1 is uploaded twice at once: A starts, B starts and finishes, A finishes. Both
    are answered (A used to lose its temporary file to B's and get NoSuchUpload); the
    completion listing them as they finished makes the object A's bytes."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    url = s3.generate_presigned_url(
        "upload_part",
        Params={"Bucket": bucket, "Key": "k", "UploadId": upload_id, "PartNumber": 1},
        ExpiresIn=600,
    )
    folder = local_server.data_dir / "multipart" / upload_id
    first, second = b"A" * 64, b"B" * 64

    async def run() -> tuple[int, str]:
        gate = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield first[:1]
            await gate.wait()
            yield first[1:]

        async with web.async_client(timeout=30) as client:
            a = asyncio.create_task(client.put(url, content=body()))
            deadline = time.monotonic() + 10
            while not list(folder.glob("1*.tmp")):  # A is being written
                assert time.monotonic() < deadline, "part A never reached the part store"
                await asyncio.sleep(0.005)
            b = await asyncio.to_thread(
                s3.upload_part,
                Bucket=bucket,
                Key="k",
                UploadId=upload_id,
                PartNumber=1,
                Body=second,
            )
            gate.set()
            answer = await a
        return answer.status_code, str(b["ETag"])

    status_a, etag_b = asyncio.run(run())
    assert status_a == 200
    etag_a = f'"{hashlib.md5(first).hexdigest()}"'
    listed = [{"PartNumber": 1, "ETag": etag_b}, {"PartNumber": 1, "ETag": etag_a}]
    s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload_id, MultipartUpload={"Parts": listed}
    )
    assert _body(s3, bucket, "k") == first


def test_a_completion_retried_after_success_answers_as_the_first(s3: Any, bucket: str) -> None:
    """A client whose first CompleteMultipartUpload answer was lost retries it: S3 answers
    the retry as it answered the first; once the key holds another object, NoSuchUpload."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    tag = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1, Body=b"one")
    parts = {"Parts": [{"PartNumber": 1, "ETag": tag["ETag"]}]}
    first = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload_id, MultipartUpload=parts
    )
    again = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload_id, MultipartUpload=parts
    )
    assert (again["ETag"], again["Key"]) == (first["ETag"], "k")
    other = {"Parts": [{"PartNumber": 1, "ETag": '"ffffffffffffffffffffffffffffffff"'}]}
    answer = refused(
        s3.complete_multipart_upload,
        Bucket=bucket,
        Key="k",
        UploadId=upload_id,
        MultipartUpload=other,
    )
    assert answer == (404, "NoSuchUpload")
    s3.put_object(Bucket=bucket, Key="k", Body=b"replaced")
    answer = refused(
        s3.complete_multipart_upload,
        Bucket=bucket,
        Key="k",
        UploadId=upload_id,
        MultipartUpload=parts,
    )
    assert answer == (404, "NoSuchUpload")
    assert _body(s3, bucket, "k") == b"replaced"


# Point 4: conditional writes


def _multipart(s3: Any, bucket: str, key: str, body: bytes, **condition: str) -> dict:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    tag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=body)
    parts = {"Parts": [{"PartNumber": 1, "ETag": tag["ETag"]}]}
    return dict(
        s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload=parts, **condition
        )
    )


def test_if_match_takes_every_etag_form_bucketd_gives(
    s3: Any, bucket: str, local_server: LiveServer
) -> None:
    customer = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": os.urandom(32)}
    makers = {
        "plain": lambda key: s3.put_object(Bucket=bucket, Key=key, Body=b"one"),
        "multipart": lambda key: _multipart(s3, bucket, key, b"one"),
        "sse-s3": lambda key: s3.put_object(
            Bucket=bucket, Key=key, Body=b"one", ServerSideEncryption="AES256"
        ),
        "sse-c": lambda key: s3.put_object(Bucket=bucket, Key=key, Body=b"one", **customer),
    }
    stale = '"ffffffffffffffffffffffffffffffff"'
    for kind, make in makers.items():
        extra = customer if kind == "sse-c" else {}
        for quoted in (True, False):
            key = f"{kind}-{quoted}"
            etag = make(key)["ETag"]
            assert s3.head_object(Bucket=bucket, Key=key, **extra)["ETag"] == etag
            form = etag if quoted else etag.strip('"')
            answer = refused(
                s3.put_object, Bucket=bucket, Key=key, Body=b"x", IfMatch=stale, **extra
            )
            assert answer == (412, "PreconditionFailed"), key
            s3.put_object(Bucket=bucket, Key=key, Body=b"two", IfMatch=form, **extra)
            assert s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read() == b"two", key
    with local_server.client() as http:  # an object of /v1: its listed and its S3 ETag
        api = new_bucket(http, unique_name("wf"))
        made_v1 = http.put(
            f"/buckets/{api['id']}/files/doc",
            content=b"v1",
            headers={"Content-Type": "text/plain"},
        )
        assert made_v1.status_code == 201, made_v1.text
    listed = s3.list_objects_v2(Bucket=api["name"])["Contents"][0]["ETag"]
    s3.put_object(Bucket=api["name"], Key="doc", Body=b"two", IfMatch=listed)
    etag = s3.head_object(Bucket=api["name"], Key="doc")["ETag"]
    s3.put_object(Bucket=api["name"], Key="doc", Body=b"three", IfMatch=etag)
    assert _body(s3, api["name"], "doc") == b"three"


def test_if_match_where_there_is_no_object_is_no_such_key(s3: Any, bucket: str) -> None:
    for value in ("*", '"0123456789abcdef0123456789abcdef"'):
        assert refused(s3.put_object, Bucket=bucket, Key="k", Body=b"x", IfMatch=value) == (
            404,
            "NoSuchKey",
        )
    with pytest.raises(ClientError) as missing:
        _multipart(s3, bucket, "k", b"x", IfMatch="*")
    assert (status(missing.value), code(missing.value)) == (404, "NoSuchKey")
    s3.put_object(Bucket=bucket, Key="k", Body=b"one")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.delete_object(Bucket=bucket, Key="k")  # a delete marker is no object
    answer = refused(s3.put_object, Bucket=bucket, Key="k", Body=b"x", IfMatch="*")
    assert answer == (404, "NoSuchKey")
    with pytest.raises(ClientError):
        s3.get_object(Bucket=bucket, Key="k")


def test_if_none_match_with_etags_refuses_only_a_matching_object(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["ETag"]
    for value in (etag, etag.strip('"'), f'"other", {etag}'):
        answer = refused(s3.put_object, Bucket=bucket, Key="k", Body=b"x", IfNoneMatch=value)
        assert answer == (412, "PreconditionFailed")
    assert _body(s3, bucket, "k") == b"one"
    s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfNoneMatch='"other"')
    assert _body(s3, bucket, "k") == b"two"
    s3.put_object(Bucket=bucket, Key="new", Body=b"x", IfNoneMatch=etag)  # nothing to match
    assert _body(s3, bucket, "new") == b"x"


# Point 5: versioning headers and CreateBucket


def test_a_bucket_never_versioned_answers_no_version_id(s3: Any, bucket: str) -> None:
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    copied = s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k")
    done = _multipart(s3, bucket, "m", b"x")
    for answer in (put, copied, done):
        assert "x-amz-version-id" not in answer["ResponseMetadata"]["HTTPHeaders"]
    assert (
        "x-amz-version-id"
        not in s3.head_object(Bucket=bucket, Key="k")["ResponseMetadata"]["HTTPHeaders"]
    )
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    versioned = s3.put_object(Bucket=bucket, Key="k", Body=b"y")["VersionId"]
    assert versioned not in ("", "null")
    assert _multipart(s3, bucket, "m", b"y")["VersionId"] not in ("", "null")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    for answer in (  # the null version: no header on its writes, "null" on its reads
        s3.put_object(Bucket=bucket, Key="k", Body=b"z"),
        s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k"),
        _multipart(s3, bucket, "m", b"z"),
    ):
        assert "x-amz-version-id" not in answer["ResponseMetadata"]["HTTPHeaders"]
    assert s3.head_object(Bucket=bucket, Key="k")["VersionId"] == "null"


def test_create_bucket_of_ones_own_bucket_is_200_in_us_east_1_only(
    s3: Any, other: tuple[str, Any]
) -> None:
    name = unique_name("own")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"kept")
    again = s3.create_bucket(Bucket=name)  # "ensure the bucket exists"
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert again["Location"] == f"/{name}"
    assert _body(s3, name, "k") == b"kept"
    assert [b["Name"] for b in s3.list_buckets(Prefix=name)["Buckets"]] == [name]
    located = {"LocationConstraint": "us-east-1"}
    assert s3.create_bucket(Bucket=name, CreateBucketConfiguration=located)
    elsewhere = {"LocationConstraint": "eu-west-1"}
    answer = refused(s3.create_bucket, Bucket=name, CreateBucketConfiguration=elsewhere)
    assert answer == (409, "BucketAlreadyOwnedByYou")
    european = unique_name("own")
    s3.create_bucket(Bucket=european, CreateBucketConfiguration=elsewhere)
    answer = refused(s3.create_bucket, Bucket=european, CreateBucketConfiguration=elsewhere)
    assert answer == (409, "BucketAlreadyOwnedByYou")
    assert refused(s3.create_bucket, Bucket=european) == (409, "BucketAlreadyOwnedByYou")
    _, theirs = other
    theirs.create_bucket(Bucket=name)  # names are each organization's own
    assert theirs.list_objects_v2(Bucket=name)["KeyCount"] == 0
    assert _body(s3, name, "k") == b"kept"


# Point 11: ListBuckets and ListDirectoryBuckets


def test_list_buckets_filters_by_region_in_name_order(other: tuple[str, Any]) -> None:
    _, s3 = other
    names = [unique_name(stem) for stem in ("zz", "aa", "mm")]
    for name in names:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    s3.create_bucket(Bucket=unique_name("us"))
    found = s3.list_buckets(BucketRegion="eu-west-1", MaxBuckets=2)
    assert [b["Name"] for b in found["Buckets"]] == sorted(names)[:2]
    rest = s3.list_buckets(
        BucketRegion="eu-west-1", MaxBuckets=2, ContinuationToken=found["ContinuationToken"]
    )
    assert [b["Name"] for b in rest["Buckets"]] == sorted(names)[2:]
    assert "ContinuationToken" not in rest
    assert {b["BucketRegion"] for b in found["Buckets"] + rest["Buckets"]} == {"eu-west-1"}


def test_list_directory_buckets_is_refused_cleanly(s3: Any) -> None:
    assert refused(s3.list_directory_buckets) == (501, "NotImplemented")
