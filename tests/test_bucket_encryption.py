"""Bucket default encryption (issue 37): Put/Get/DeleteBucketEncryption in AWS's shapes and
errors, and the default given to every write into the bucket that names no encryption
(PutObject, POST form, multipart, CopyObject, a restored version, /v1 uploads)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

import bucketd_client as bc
from tests.support import sealed, web
from tests.support.live import LiveServer

_AES256 = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}


def test_the_configuration_is_set_read_and_deleted_in_aws_shapes(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = f"bde-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as none:
        s3.get_bucket_encryption(Bucket=bucket)
    assert none.value.response["Error"]["Code"] == "ServerSideEncryptionConfigurationNotFoundError"
    assert none.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404

    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=_AES256)
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}

    kms = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]}
    with pytest.raises(ClientError) as refused:
        s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=kms)
    assert refused.value.response["Error"]["Code"] == "NotImplemented"
    # The refused configuration changed nothing.
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}

    s3.delete_bucket_encryption(Bucket=bucket)
    with pytest.raises(ClientError) as gone:
        s3.get_bucket_encryption(Bucket=bucket)
    assert gone.value.response["Error"]["Code"] == "ServerSideEncryptionConfigurationNotFoundError"


def test_every_write_into_the_bucket_gets_its_default(server: LiveServer) -> None:
    s3: Any = server.s3(signature_version="s3v4")
    bucket, other = f"bde-w-{os.urandom(5).hex()}", f"bde-o-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=other)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    marker = sealed.marker()
    body = sealed.content(marker, 80_000)
    # Written before the default: stays plaintext (the default applies to new writes).
    old = s3.put_object(Bucket=bucket, Key="restored", Body=body)["VersionId"]
    s3.put_object(Bucket=other, Key="source", Body=body)
    s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=_AES256)
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="restored")

    put = s3.put_object(Bucket=bucket, Key="put", Body=body)
    assert put["ServerSideEncryption"] == "AES256"
    copied = s3.copy_object(Bucket=bucket, Key="copied", CopySource=f"{other}/source")
    assert copied["ServerSideEncryption"] == "AES256"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="multipart")
    assert upload["ServerSideEncryption"] == "AES256"
    part = s3.upload_part(
        Bucket=bucket, Key="multipart", UploadId=upload["UploadId"], PartNumber=1, Body=body
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="multipart",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    post = s3.generate_presigned_post(Bucket=bucket, Key="form")
    answer = web.post(post["url"], data=post["fields"], files={"file": ("f", body, "text/plain")})
    assert answer.status_code == 204, answer.text
    assert answer.headers["x-amz-server-side-encryption"] == "AES256"
    with bc.Client(server.url, server.admin_key) as client:
        bucket_id = client.get_bucket_by_name(bucket).id
        assert client.upload(bucket_id, "v1", body).encryption == "AES256"
        client.restore_version(bucket_id, "restored", old)

    for key in ("put", "copied", "multipart", "form", "v1", "restored"):
        got = s3.get_object(Bucket=bucket, Key=key)
        assert (key, got.get("ServerSideEncryption")) == (key, "AES256")
        assert got["Body"].read() == body
    # The other bucket has no default: its writes stay plaintext.
    assert "ServerSideEncryption" not in s3.put_object(Bucket=other, Key="plain", Body=b"p")


def test_v1_reads_and_sets_it_and_snapshots_carry_it(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    name = f"bde-v1-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    with bc.Client(local_server.url, local_server.admin_key) as client:
        bucket = client.get_bucket_by_name(name)
        assert bucket.encryption is None
        assert client.update_bucket(bucket.id, encryption="AES256").encryption == "AES256"
        rules = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]
        assert rules["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
        with pytest.raises(bc.BucketdError) as kms:
            client.update_bucket(bucket.id, encryption="aws:kms")
        assert kms.value.status == 501
        with pytest.raises(bc.BadRequest):
            client.update_bucket(bucket.id, encryption="rot13")
        assert client.get_bucket(bucket.id).encryption == "AES256"  # the refusals changed nothing

        made = client.create_bucket(
            f"bde-new-{os.urandom(4).hex()}", "us-east-1", encryption="AES256"
        )
        assert client.get_bucket(made.id).encryption == "AES256"
        with pytest.raises(bc.BucketdError) as kms_at_creation:
            client.create_bucket(
                f"bde-kms-{os.urandom(4).hex()}", "us-east-1", encryption="aws:kms"
            )
        assert kms_at_creation.value.status == 501

        taken = client.snapshots.create(bucket.id)
        assert client.update_bucket(bucket.id, encryption=None).encryption is None
        s3.put_object(Bucket=name, Key="plain", Body=b"p")
        assert "ServerSideEncryption" not in s3.head_object(Bucket=name, Key="plain")
        assert client.snapshots.restore(taken.id).encryption == "AES256"
        fork = client.snapshots.fork(taken.id, f"bde-fork-{os.urandom(4).hex()}")
        assert fork.encryption == "AES256"
    put = s3.put_object(Bucket=fork.name, Key="k", Body=b"x")
    assert put["ServerSideEncryption"] == "AES256"


def test_it_is_decided_as_aws_decides_it(local_server: LiveServer) -> None:
    """s3:GetEncryptionConfiguration and s3:PutEncryptionConfiguration, through the one
    access decision: the key's scopes, and a bucket policy's Deny on both protocols."""
    s3: Any = local_server.s3()
    name = f"bde-acc-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration=_AES256)
    reader: Any = local_server.s3(*local_server.s3_credentials(None, "buckets:read,files:read"))
    assert "ServerSideEncryptionConfiguration" in reader.get_bucket_encryption(Bucket=name)
    for call in (
        lambda: reader.put_bucket_encryption(
            Bucket=name, ServerSideEncryptionConfiguration=_AES256
        ),
        lambda: reader.delete_bucket_encryption(Bucket=name),
    ):
        with pytest.raises(ClientError) as denied:
            call()
        assert denied.value.response["Error"]["Code"] == "AccessDenied"

    deny = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutEncryptionConfiguration",
                "Resource": f"arn:aws:s3:::{name}",
            }
        ],
    }
    s3.put_bucket_policy(Bucket=name, Policy=json.dumps(deny))
    with pytest.raises(ClientError) as denied:
        s3.delete_bucket_encryption(Bucket=name)
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    with bc.Client(local_server.url, local_server.admin_key) as client:
        bucket_id = client.get_bucket_by_name(name).id
        with pytest.raises(bc.BucketdError) as refused:
            client.update_bucket(bucket_id, encryption=None)
        assert refused.value.status == 403
    assert "ServerSideEncryptionConfiguration" in s3.get_bucket_encryption(Bucket=name)
    s3.delete_bucket_policy(Bucket=name)
