"""S3 object ownership with boto3: Put/Get/DeleteBucketOwnershipControls and
`x-amz-object-ownership` on CreateBucket. BucketOwnerEnforced disables ACLs (a write may
carry `bucket-owner-full-control` only; PutBucketAcl and PutObjectAcl are refused, and ACLs
set before grant nothing); ObjectWriter is refused, since the bucket's organization owns
every object in it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from storage.errors import AclsDisabled, InvalidInput
from tests.support.engines import engine_on, organization_with_bucket
from tests.support.names import unique_name
from tests.support.s3 import code, status

ENFORCED = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
PREFERRED = {"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}


def refusal(call: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as refused:
        call(**kwargs)
    return status(refused.value), code(refused.value)


def ownership(s3: Any, bucket: str) -> str:
    rules = s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]["Rules"]
    assert len(rules) == 1
    return str(rules[0]["ObjectOwnership"])


NOT_SUPPORTED = (400, "AccessControlListNotSupported")


def test_a_bucket_created_owner_enforced_takes_no_acl(s3: Any, other: tuple[str, Any]) -> None:
    bucket = unique_name("ow")
    s3.create_bucket(Bucket=bucket, ObjectOwnership="BucketOwnerEnforced")
    assert ownership(s3, bucket) == "BucketOwnerEnforced"
    org, outsider = other
    everyone = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": ["s3:PutObject", "s3:GetObject", "s3:GetObjectAcl"],
                "Resource": f"arn:aws:s3:::{bucket}/*",
            }
        ],
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(everyone))
    for writer in (s3, outsider):
        writer.put_object(Bucket=bucket, Key="plain", Body=b"x")
        writer.put_object(Bucket=bucket, Key="owned", Body=b"x", ACL="bucket-owner-full-control")
        owner = writer.get_object_acl(Bucket=bucket, Key="owned")["Owner"]["ID"]
        assert owner != org  # the bucket's organization owns what anyone writes
        for acl in ("private", "public-read"):
            assert refusal(writer.put_object, Bucket=bucket, Key="k", ACL=acl) == NOT_SUPPORTED
        assert (
            refusal(writer.create_multipart_upload, Bucket=bucket, Key="k", ACL="private")
            == NOT_SUPPORTED
        )
        source = {"Bucket": bucket, "Key": "plain"}
        assert (
            refusal(writer.copy_object, Bucket=bucket, Key="k", CopySource=source, ACL="private")
            == NOT_SUPPORTED
        )
        writer.copy_object(
            Bucket=bucket, Key="copied", CopySource=source, ACL="bucket-owner-full-control"
        )
    assert refusal(s3.put_bucket_acl, Bucket=bucket, ACL="private") == NOT_SUPPORTED
    assert refusal(s3.put_object_acl, Bucket=bucket, Key="plain", ACL="private") == NOT_SUPPORTED
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(o["Key"] for o in listed) == ["copied", "owned", "plain"]


def test_acls_set_before_grant_nothing_once_disabled(s3: Any, anonymous: Any) -> None:
    bucket = unique_name("ow")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="shared", Body=b"public", ACL="public-read")
    assert anonymous.get_object(Bucket=bucket, Key="shared")["Body"].read() == b"public"
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=ENFORCED)
    assert refusal(anonymous.get_object, Bucket=bucket, Key="shared") == (403, "AccessDenied")
    s3.delete_bucket_ownership_controls(Bucket=bucket)
    assert anonymous.get_object(Bucket=bucket, Key="shared")["Body"].read() == b"public"


def test_controls_are_put_read_and_deleted(s3: Any) -> None:
    bucket = unique_name("ow")
    s3.create_bucket(Bucket=bucket)
    not_found = (404, "OwnershipControlsNotFoundError")
    assert refusal(s3.get_bucket_ownership_controls, Bucket=bucket) == not_found
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=PREFERRED)
    assert ownership(s3, bucket) == "BucketOwnerPreferred"
    s3.put_bucket_acl(Bucket=bucket, ACL="private")  # ACLs still apply
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=ENFORCED)
    assert ownership(s3, bucket) == "BucketOwnerEnforced"
    s3.delete_bucket_ownership_controls(Bucket=bucket)
    assert refusal(s3.get_bucket_ownership_controls, Bucket=bucket) == not_found
    s3.delete_bucket_ownership_controls(Bucket=bucket)
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read")


def test_acls_cannot_be_disabled_while_the_bucket_acl_grants(s3: Any) -> None:
    bucket = unique_name("ow")
    s3.create_bucket(Bucket=bucket, ACL="public-read")
    conflict = (400, "InvalidBucketAclWithObjectOwnership")
    assert (
        refusal(s3.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls=ENFORCED)
        == conflict
    )
    assert refusal(s3.get_bucket_ownership_controls, Bucket=bucket)[0] == 404
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=ENFORCED)
    named = unique_name("ow")
    assert (
        refusal(
            s3.create_bucket, Bucket=named, ACL="public-read", ObjectOwnership="BucketOwnerEnforced"
        )
        == conflict
    )
    assert named not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_object_writer_is_refused_and_nothing_changes(s3: Any) -> None:
    named = unique_name("ow")
    assert refusal(s3.create_bucket, Bucket=named, ObjectOwnership="ObjectWriter")[0] == 501
    assert named not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    bucket = unique_name("ow")
    s3.create_bucket(Bucket=bucket, ObjectOwnership="BucketOwnerPreferred")
    writer = {"Rules": [{"ObjectOwnership": "ObjectWriter"}]}
    assert refusal(s3.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls=writer) == (
        501,
        "NotImplemented",
    )
    unknown = {"Rules": [{"ObjectOwnership": "Everyone"}]}
    assert (
        refusal(s3.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls=unknown)[0]
        == 400
    )
    assert ownership(s3, bucket) == "BucketOwnerPreferred"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "postgres"])
async def test_a_restored_snapshot_keeps_acls_disabled(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Restoring must not turn ACLs set before back on: the setting is part of the bucket's
    configuration a snapshot keeps (one taken before it existed restores none). On both
    databases: the column is a migration of each."""
    async with engine_on(kind, tmp_path, request) as engine:
        actor, bucket = await organization_with_bucket(
            engine, object_ownership="BucketOwnerEnforced"
        )
        snapshot = await engine.snapshots.create(actor, bucket, name="enforced")
        await engine.buckets.update(actor, bucket, {"object_ownership": None})
        await engine.buckets.update(actor, bucket, {"acl": "public-read"})
        with pytest.raises(AclsDisabled):
            await engine.buckets.update(actor, bucket, {"object_ownership": "BucketOwnerEnforced"})
        with pytest.raises(InvalidInput):
            await engine.buckets.update(actor, bucket, {"object_ownership": "Everyone"})
        await engine.buckets.update(actor, bucket, {"acl": "private"})
        restored = await engine.snapshots.restore(actor, snapshot.id)
        assert restored.object_ownership == "BucketOwnerEnforced"
        with pytest.raises(AclsDisabled):
            await engine.buckets.update(actor, bucket, {"acl": "public-read"})
