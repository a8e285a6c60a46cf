"""SSE-KMS with a local keyring (issue 37 point 3): `aws:kms` seals a content's key under
the keyring's named key (`storage.kms_keys`), by name, ARN or the default; GET and HEAD
say which; an unknown key is a 400 that stores nothing; bucket defaults, multipart and
copies use it; no plaintext and no key reaches the data dir. The shared servers have no
keyring: there aws:kms stays 501 (tests/test_bucket_encryption.py, test_s3_operations.py)."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import bucketd_client as bc
from tests.support import sealed, web
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.names import with_backend

_KEYS = {name: os.urandom(32) for name in ("alpha", "beta")}


_ENV = {
    "BUCKETD_STORAGE__KMS_KEYS": json.dumps(
        [f"{name}={base64.b64encode(key).decode()}" for name, key in _KEYS.items()]
    ),
    "BUCKETD_STORAGE__KMS_DEFAULT_KEY": "beta",
}


@pytest.fixture(scope="module")
def kms_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("kms") / "data", env=_ENV)
    live.start()
    try:
        yield live
    finally:
        live.stop()


def _bucket(s3: Any) -> str:
    name = f"kms-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    return name


def _code(error: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = error.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_a_named_key_seals_and_get_and_head_say_which(kms_server: LiveServer) -> None:
    s3: Any = kms_server.s3()
    bucket = _bucket(s3)
    mark = sealed.marker()
    body = sealed.content(mark, 200_000)
    put = s3.put_object(
        Bucket=bucket,
        Key="named",
        Body=body,
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId="alpha",
        BucketKeyEnabled=True,
    )
    assert (put["ServerSideEncryption"], put["SSEKMSKeyId"]) == ("aws:kms", "alpha")
    assert put["BucketKeyEnabled"] is True
    got = s3.get_object(Bucket=bucket, Key="named")
    assert got["Body"].read() == body
    assert (got["ServerSideEncryption"], got["SSEKMSKeyId"]) == ("aws:kms", "alpha")
    head = s3.head_object(Bucket=bucket, Key="named")
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alpha")
    ranged = s3.get_object(Bucket=bucket, Key="named", Range="bytes=70000-70009")
    assert ranged["Body"].read() == body[70000:70010]

    arn = "arn:aws:kms:us-east-1:000000000000:key/alpha"
    s3.put_object(
        Bucket=bucket, Key="arn", Body=b"a", ServerSideEncryption="aws:kms", SSEKMSKeyId=arn
    )
    assert s3.head_object(Bucket=bucket, Key="arn")["SSEKMSKeyId"] == "alpha"
    s3.put_object(Bucket=bucket, Key="default", Body=b"d", ServerSideEncryption="aws:kms")
    assert s3.head_object(Bucket=bucket, Key="default")["SSEKMSKeyId"] == "beta"

    assert sealed.found_on_disk(kms_server.data_dir, mark) == []
    index = (kms_server.data_dir / "index.db").read_bytes()
    assert not any(key in index for key in _KEYS.values())


def test_if_match_takes_the_etags_of_kms_sealed_objects(kms_server: LiveServer) -> None:
    """A conditional write over an aws:kms object takes the ETag its PUT or its completion
    answered, quoted or bare (issue 38 point 4)."""
    s3: Any = kms_server.s3()
    bucket = _bucket(s3)
    sealed_put = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alpha"}
    for quoted in (True, False):
        key = f"put-{quoted}"
        etag = s3.put_object(Bucket=bucket, Key=key, Body=b"one", **sealed_put)["ETag"]
        s3.put_object(Bucket=bucket, Key=key, Body=b"two", IfMatch=etag if quoted else etag[1:-1])
        upload = s3.create_multipart_upload(Bucket=bucket, Key=f"mp-{quoted}", **sealed_put)
        part = s3.upload_part(
            Bucket=bucket, Key=f"mp-{quoted}", UploadId=upload["UploadId"], PartNumber=1, Body=b"p"
        )
        done = s3.complete_multipart_upload(
            Bucket=bucket,
            Key=f"mp-{quoted}",
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
        etag = done["ETag"]
        assert etag.endswith('-1"')
        with pytest.raises(ClientError) as stale:
            s3.put_object(Bucket=bucket, Key=f"mp-{quoted}", Body=b"x", IfMatch='"0-1"')
        assert _code(stale) == (412, "PreconditionFailed")
        mine = etag if quoted else etag[1:-1]
        s3.put_object(Bucket=bucket, Key=f"mp-{quoted}", Body=b"two", IfMatch=mine)
        for name in (key, f"mp-{quoted}"):
            assert s3.get_object(Bucket=bucket, Key=name)["Body"].read() == b"two"


def test_an_unknown_key_or_a_context_is_refused_and_stores_nothing(
    kms_server: LiveServer,
) -> None:
    s3: Any = kms_server.s3()
    bucket = _bucket(s3)
    for key_id in ("gamma", "arn:aws:kms:us-east-1:000000000000:key/gamma", "no spaces"):
        with pytest.raises(ClientError) as unknown:
            s3.put_object(
                Bucket=bucket,
                Key="k",
                Body=b"x",
                ServerSideEncryption="aws:kms",
                SSEKMSKeyId=key_id,
            )
        assert _code(unknown) == (400, "KMS.NotFoundException"), key_id
    context = base64.b64encode(b'{"a": "b"}').decode()
    with pytest.raises(ClientError) as refused:
        s3.put_object(
            Bucket=bucket,
            Key="k",
            Body=b"x",
            ServerSideEncryption="aws:kms",
            SSEKMSEncryptionContext=context,
        )
    assert _code(refused) == (501, "NotImplemented")
    with pytest.raises(ClientError) as unknown_upload:
        s3.create_multipart_upload(
            Bucket=bucket, Key="k", ServerSideEncryption="aws:kms", SSEKMSKeyId="gamma"
        )
    assert _code(unknown_upload) == (400, "KMS.NotFoundException")
    for asked in ({"ServerSideEncryption": "AES256"}, {}):  # a key id needs aws:kms, as on AWS
        with pytest.raises(ClientError) as conflict:
            s3.put_object(Bucket=bucket, Key="k", Body=b"x", SSEKMSKeyId="alpha", **asked)
        assert _code(conflict) == (400, "InvalidArgument"), asked
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_bucket_default_multipart_and_copy_use_the_key(kms_server: LiveServer) -> None:
    s3: Any = kms_server.s3()
    bucket = _bucket(s3)
    rule = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "alpha"}
    config = {"Rules": [{"ApplyServerSideEncryptionByDefault": rule}]}
    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=config)
    got = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
    assert got["Rules"][0]["ApplyServerSideEncryptionByDefault"] == rule
    unknown = {"Rules": [{"ApplyServerSideEncryptionByDefault": {**rule, "KMSMasterKeyID": "x"}}]}
    with pytest.raises(ClientError) as refused:
        s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=unknown)
    assert _code(refused) == (400, "KMS.NotFoundException")

    s3.put_object(Bucket=bucket, Key="plain-ask", Body=b"p")
    assert s3.head_object(Bucket=bucket, Key="plain-ask")["SSEKMSKeyId"] == "alpha"

    mark = sealed.marker()
    parts_body = [sealed.content(mark, 5 * 1024 * 1024), sealed.content(mark, 1000)]
    upload = s3.create_multipart_upload(Bucket=bucket, Key="multi")
    assert (upload["ServerSideEncryption"], upload["SSEKMSKeyId"]) == ("aws:kms", "alpha")
    parts = []
    for number, chunk in enumerate(parts_body, 1):
        part = s3.upload_part(
            Bucket=bucket, Key="multi", UploadId=upload["UploadId"], PartNumber=number, Body=chunk
        )
        assert part["SSEKMSKeyId"] == "alpha"
        parts.append({"PartNumber": number, "ETag": part["ETag"]})
    s3.complete_multipart_upload(
        Bucket=bucket, Key="multi", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    got_multi = s3.get_object(Bucket=bucket, Key="multi")
    assert got_multi["Body"].read() == b"".join(parts_body)
    assert (got_multi["ServerSideEncryption"], got_multi["SSEKMSKeyId"]) == ("aws:kms", "alpha")
    assert sealed.found_on_disk(kms_server.data_dir, mark) == []

    s3.put_object(Bucket=bucket, Key="s3-sealed", Body=b"c", ServerSideEncryption="AES256")
    s3.copy_object(
        Bucket=bucket,
        Key="copied",
        CopySource={"Bucket": bucket, "Key": "s3-sealed"},
        ServerSideEncryption="aws:kms",
        SSEKMSKeyId="beta",
    )
    copied = s3.get_object(Bucket=bucket, Key="copied")
    assert (copied["Body"].read(), copied["SSEKMSKeyId"]) == (b"c", "beta")


def test_v1_bucket_encryption_takes_a_named_kms_key(kms_server: LiveServer) -> None:
    s3: Any = kms_server.s3()
    name = _bucket(s3)
    with bc.Client(kms_server.url, kms_server.admin_key) as client:
        bucket = client.get_bucket_by_name(name)
        assert client.update_bucket(bucket.id, encryption="aws:kms/alpha").encryption == (
            "aws:kms/alpha"
        )
        with pytest.raises(bc.BadRequest):
            client.update_bucket(bucket.id, encryption="aws:kms/gamma")
        assert client.get_bucket(bucket.id).encryption == "aws:kms/alpha"
        s3.put_object(Bucket=name, Key="k", Body=b"v")
        assert s3.head_object(Bucket=name, Key="k")["SSEKMSKeyId"] == "alpha"
        # /v1 says which key, in the file, the listing and the version listing alike
        s3.put_object(Bucket=name, Key="s", Body=b"v", ServerSideEncryption="AES256")
        sealed_as = {"k": ("aws:kms", "alpha"), "s": ("AES256", None)}
        shown = client.get_file(bucket.id, "k")
        assert (shown.encryption, shown.kms_key_id) == sealed_as["k"]
        listed = {f.key: (f.encryption, f.kms_key_id) for f in client.iter_files(bucket.id)}
        assert listed == sealed_as
        versions = client.list_versions(bucket.id).items
        assert {v.key: (v.encryption, v.kms_key_id) for v in versions} == sealed_as


def test_a_form_upload_asking_for_a_kms_key_is_sealed_under_it(kms_server: LiveServer) -> None:
    s3: Any = kms_server.s3(signature_version="s3v4")
    bucket = _bucket(s3)
    mark = sealed.marker()
    body = sealed.content(mark, 5000)
    sse = {
        "x-amz-server-side-encryption": "aws:kms",
        "x-amz-server-side-encryption-aws-kms-key-id": "alpha",
    }
    conditions: list[Any] = [{name: value} for name, value in sse.items()]
    post = s3.generate_presigned_post(
        Bucket=bucket, Key="form.bin", Fields=sse, Conditions=conditions
    )
    answer = web.post(post["url"], data=post["fields"], files={"file": ("f", body, "text/plain")})
    assert answer.status_code == 204, answer.text
    assert answer.headers["x-amz-server-side-encryption-aws-kms-key-id"] == "alpha"
    got = s3.get_object(Bucket=bucket, Key="form.bin")
    assert (got["SSEKMSKeyId"], got["Body"].read()) == ("alpha", body)
    assert sealed.found_on_disk(kms_server.data_dir, mark) == []


def test_a_round_trip_on_the_s3_backend(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", with_backend(request, "s3", TEST_CONFIG), env=_ENV)
    live.start()
    try:
        s3: Any = live.s3()
        bucket = _bucket(s3)
        mark = sealed.marker()
        body = sealed.content(mark, 150_000)
        s3.put_object(
            Bucket=bucket, Key="k", Body=body, ServerSideEncryption="aws:kms", SSEKMSKeyId="alpha"
        )
        got = s3.get_object(Bucket=bucket, Key="k", Range="bytes=65000-140000")
        assert (got["SSEKMSKeyId"], got["Body"].read()) == ("alpha", body[65000:140001])
        seaweed = request.getfixturevalue("seaweed")
        assert sealed.found_in_cluster(seaweed, bucket, mark) == []
        plain = sealed.marker()  # the search finds a plaintext content: it can fail
        s3.put_object(Bucket=bucket, Key="plain", Body=sealed.content(plain, 5000))
        assert sealed.found_in_cluster(seaweed, bucket, plain) != []
    finally:
        live.stop()


def test_a_kms_object_copied_asking_for_sse_s3_is_sse_s3(kms_server: LiveServer) -> None:
    """A copy's requested encryption is what the copy gets, not the source's (it was
    kept, the request ignored)."""
    s3: Any = kms_server.s3()
    bucket = _bucket(s3)
    s3.put_object(
        Bucket=bucket, Key="src", Body=b"kms", ServerSideEncryption="aws:kms", SSEKMSKeyId="alpha"
    )
    copied = s3.copy_object(
        Bucket=bucket,
        Key="dst",
        CopySource={"Bucket": bucket, "Key": "src"},
        ServerSideEncryption="AES256",
    )
    assert copied["ServerSideEncryption"] == "AES256" and "SSEKMSKeyId" not in copied
    head = s3.head_object(Bucket=bucket, Key="dst")
    assert head["ServerSideEncryption"] == "AES256" and "SSEKMSKeyId" not in head
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"kms"
