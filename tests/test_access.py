"""Who may do what on the S3 endpoint: bucket policies, canned ACLs, the public access block
and requests without credentials, with boto3 (signed and unsigned) and the aws CLI, between
organizations that probe each other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import web
from tests.support.access import policy, refused
from tests.support.commands import aws
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name
from tests.support.orgs import make_org


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("acc")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="public/cat.jpg", Body=b"cat")
    s3.put_object(Bucket=name, Key="private/plan.txt", Body=b"plan")
    return name


def test_without_credentials_nothing_is_served_until_granted(
    local_server: LiveServer, anonymous: Any, s3: Any, bucket: str
) -> None:
    assert refused(anonymous.get_object, Bucket=bucket, Key="public/cat.jpg") == "AccessDenied"
    assert refused(anonymous.list_objects_v2, Bucket=bucket) == "AccessDenied"
    assert refused(anonymous.list_buckets) == "AccessDenied"
    assert refused(anonymous.get_object, Bucket="no-such-bucket-x", Key="k") == "AccessDenied"
    read_public = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/public/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, read_public))
    assert json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"] == [read_public]
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is True
    got = anonymous.get_object(Bucket=bucket, Key="public/cat.jpg")
    assert got["Body"].read() == b"cat"
    assert anonymous.head_object(Bucket=bucket, Key="public/cat.jpg")["ContentLength"] == 3
    assert refused(anonymous.get_object, Bucket=bucket, Key="private/plan.txt") == "AccessDenied"
    assert refused(anonymous.list_objects_v2, Bucket=bucket) == "AccessDenied"
    assert refused(anonymous.put_object, Bucket=bucket, Key="public/x", Body=b"x") == "AccessDenied"
    assert refused(anonymous.delete_object, Bucket=bucket, Key="public/cat.jpg") == "AccessDenied"
    with local_server.client() as http:  # its policy names it: the name stays while it has one
        bucket_id = bucket_id_named(http, bucket)
        renamed = http.patch(f"/buckets/{bucket_id}", json={"name": bucket + "-x"})
        assert renamed.json()["error"]["code"] == "invalid_bucket_state"
    s3.delete_bucket_policy(Bucket=bucket)
    assert refused(anonymous.get_object, Bucket=bucket, Key="public/cat.jpg") == "AccessDenied"
    assert refused(s3.get_bucket_policy, Bucket=bucket) == "NoSuchBucketPolicy"


def test_deny_wins_and_conditions_narrow(
    local_server: LiveServer, anonymous: Any, s3: Any, bucket: str
) -> None:
    statements = [
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        },
        {
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{bucket}/*",
            "Condition": {"StringEquals": {"s3:ExistingObjectTag/secret": "yes"}},
        },
        {
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:ListBucket",
            "Resource": f"arn:aws:s3:::{bucket}",
            "Condition": {"StringNotLike": {"s3:prefix": "public/*"}},
        },
    ]
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, *statements))
    s3.put_object_tagging(
        Bucket=bucket, Key="public/cat.jpg", Tagging={"TagSet": [{"Key": "secret", "Value": "yes"}]}
    )
    assert refused(anonymous.get_object, Bucket=bucket, Key="public/cat.jpg") == "AccessDenied"
    assert anonymous.get_object(Bucket=bucket, Key="private/plan.txt")["Body"].read() == b"plan"
    listed = anonymous.list_objects_v2(Bucket=bucket, Prefix="public/")
    assert [o["Key"] for o in listed["Contents"]] == ["public/cat.jpg"]
    assert refused(anonymous.list_objects_v2, Bucket=bucket) == "AccessDenied"
    # The owner's keys obey an explicit Deny too, but never lose the policy itself.
    assert refused(s3.get_object, Bucket=bucket, Key="public/cat.jpg") == "AccessDenied"
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
            },
        ),
    )
    assert refused(s3.list_objects_v2, Bucket=bucket) == "AccessDenied"
    s3.delete_bucket_policy(Bucket=bucket)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 2
    only_here = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
        "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, only_here))
    assert refused(anonymous.get_object, Bucket=bucket, Key="private/plan.txt") == "AccessDenied"
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is False


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("not json", "MalformedPolicy"),
        ('{"Statement": []}', "MalformedPolicy"),
        (
            '{"Statement": [{"Effect": "Maybe", "Principal": "*", "Action": "s3:*", '
            '"Resource": "*"}]}',
            "MalformedPolicy",
        ),
        (
            '{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", '
            '"Resource": "arn:aws:s3:::someone-elses-bucket/*"}]}',
            "MalformedPolicy",
        ),
        (
            '{"Statement": [{"Effect": "Allow", "NotPrincipal": "*", "Action": "s3:GetObject", '
            '"Resource": "arn:aws:s3:::BUCKET/*"}]}',
            "MalformedPolicy",
        ),
        (
            '{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", '
            '"Resource": "arn:aws:s3:::BUCKET/*", "Condition": {"DateGreaterThan": '
            '{"aws:CurrentTime": "2020-01-01T00:00:00Z"}}}]}',
            "NotImplemented",
        ),
        (
            '{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", '
            '"Resource": "arn:aws:s3:::BUCKET/*", "Sid": "' + "x" * 21000 + '"}]}',
            "MalformedPolicy",
        ),
    ],
)
def test_malformed_policies_are_refused_and_change_nothing(
    s3: Any, bucket: str, document: str, expected: str
) -> None:
    assert (
        refused(s3.put_bucket_policy, Bucket=bucket, Policy=document.replace("BUCKET", bucket))
        == expected
    )
    assert refused(s3.get_bucket_policy, Bucket=bucket) == "NoSuchBucketPolicy"


def test_organizations_reach_each_other_only_where_named(
    local_server: LiveServer, s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    # A bucket that shares nothing looks missing from another organization.
    assert refused(theirs.get_object, Bucket=bucket, Key="public/cat.jpg") == "NoSuchBucket"
    assert refused(theirs.list_objects_v2, Bucket=bucket) == "NoSuchBucket"
    weak = local_server.s3(*local_server.s3_credentials(org, "buckets:read"))
    assert refused(weak.get_object, Bucket=bucket, Key="public/cat.jpg") == "NoSuchBucket"
    grant = {
        "Effect": "Allow",
        "Principal": {"AWS": [f"arn:aws:iam::{org}:root"]},
        "Action": ["s3:GetObject", "s3:PutObject"],
        "Resource": f"arn:aws:s3:::{bucket}/shared/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, grant))
    theirs.put_object(Bucket=bucket, Key="shared/from-them.txt", Body=b"hi")
    assert theirs.get_object(Bucket=bucket, Key="shared/from-them.txt")["Body"].read() == b"hi"
    assert refused(theirs.get_object, Bucket=bucket, Key="private/plan.txt") == "AccessDenied"
    assert (
        refused(theirs.delete_object, Bucket=bucket, Key="shared/from-them.txt") == "AccessDenied"
    )
    assert (  # the policy is its owner's alone, as on AWS
        refused(theirs.put_bucket_policy, Bucket=bucket, Policy=policy(bucket, grant))
        == "MethodNotAllowed"
    )
    # What they wrote is the bucket's organization's.
    assert s3.get_object(Bucket=bucket, Key="shared/from-them.txt")["Body"].read() == b"hi"
    third_org = make_org(local_server)
    third = local_server.s3(*local_server.s3_credentials(third_org))
    assert refused(third.get_object, Bucket=bucket, Key="shared/from-them.txt") == "AccessDenied"
    # Their own bucket of the same name is theirs: names stay per organization.
    theirs.create_bucket(Bucket=bucket)
    assert theirs.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    # A key of theirs restricted to one bucket never reaches another organization's.
    scoped = local_server.s3(*local_server.s3_credentials(org, "files:read,files:write"))
    assert refused(scoped.list_objects_v2, Bucket=unique_name("none")) == "NoSuchBucket"


def test_canned_acls_on_buckets_and_objects(
    local_server: LiveServer, anonymous: Any, s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    s3.put_object(Bucket=bucket, Key="open.txt", Body=b"open", ACL="public-read")
    assert anonymous.get_object(Bucket=bucket, Key="open.txt")["Body"].read() == b"open"
    grants = s3.get_object_acl(Bucket=bucket, Key="open.txt")["Grants"]
    assert {(g["Grantee"].get("URI"), g["Permission"]) for g in grants} == {
        (None, "FULL_CONTROL"),
        ("http://acs.amazonaws.com/groups/global/AllUsers", "READ"),
    }
    assert grants[1]["Grantee"]["Type"] == "Group"
    s3.put_object_acl(Bucket=bucket, Key="open.txt", ACL="private")
    assert refused(anonymous.get_object, Bucket=bucket, Key="open.txt") == "AccessDenied"
    assert len(s3.get_object_acl(Bucket=bucket, Key="open.txt")["Grants"]) == 1
    s3.copy_object(
        Bucket=bucket, Key="copy.txt", CopySource=f"{bucket}/open.txt", ACL="public-read"
    )
    assert anonymous.get_object(Bucket=bucket, Key="copy.txt")["Body"].read() == b"open"
    # Bucket ACLs: authenticated-read lets any key list, public-read-write anyone write.
    _, theirs = other
    s3.put_bucket_acl(Bucket=bucket, ACL="authenticated-read")
    assert theirs.list_objects_v2(Bucket=bucket)["KeyCount"] == 4
    assert refused(anonymous.list_objects_v2, Bucket=bucket) == "AccessDenied"
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    anonymous.put_object(Bucket=bucket, Key="dropbox/note.txt", Body=b"note")
    assert s3.get_object(Bucket=bucket, Key="dropbox/note.txt")["Body"].read() == b"note"
    owner = s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
    body = {
        "Owner": {"ID": owner},
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": owner}, "Permission": "FULL_CONTROL"}
        ],
    }
    s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy=body)
    assert (
        refused(anonymous.put_object, Bucket=bucket, Key="dropbox/again", Body=b"x")
        == "AccessDenied"
    )
    body["Grants"].append(
        {"Grantee": {"Type": "CanonicalUser", "ID": "someone"}, "Permission": "READ"}
    )
    assert refused(s3.put_bucket_acl, Bucket=bucket, AccessControlPolicy=body) == "InvalidArgument"
    assert (
        refused(s3.put_object, Bucket=bucket, Key="k", Body=b"", ACL="nonsense")
        == "InvalidArgument"
    )


def test_the_public_access_block_sets_public_grants_aside(
    local_server: LiveServer, anonymous: Any, s3: Any, bucket: str
) -> None:
    assert (
        refused(s3.get_public_access_block, Bucket=bucket) == "NoSuchPublicAccessBlockConfiguration"
    )
    s3.put_object(Bucket=bucket, Key="open.txt", Body=b"open", ACL="public-read")
    read_all = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, read_all))
    everything = {
        "BlockPublicAcls": True,
        "IgnorePublicAcls": True,
        "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True,
    }
    s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=everything)
    assert s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == everything
    assert refused(anonymous.get_object, Bucket=bucket, Key="open.txt") == "AccessDenied"
    assert (
        refused(s3.put_object, Bucket=bucket, Key="k", Body=b"", ACL="public-read")
        == "AccessDenied"
    )
    assert (
        refused(s3.put_bucket_policy, Bucket=bucket, Policy=policy(bucket, read_all))
        == "AccessDenied"
    )
    with local_server.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        made_public = http.patch(f"/buckets/{bucket_id}", json={"public": True})
        assert made_public.json()["error"]["code"] == "public_access_blocked"
    s3.delete_public_access_block(Bucket=bucket)
    assert anonymous.get_object(Bucket=bucket, Key="open.txt")["Body"].read() == b"open"


def test_a_v1_public_bucket_is_readable_over_s3_without_credentials(
    local_server: LiveServer, anonymous: Any, s3: Any, bucket: str
) -> None:
    with local_server.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        assert http.patch(f"/buckets/{bucket_id}", json={"public": True}).status_code == 200
    assert anonymous.get_object(Bucket=bucket, Key="private/plan.txt")["Body"].read() == b"plan"
    assert refused(anonymous.list_objects_v2, Bucket=bucket) == "AccessDenied"
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is True


@pytest.mark.slow  # the aws CLI
def test_the_aws_cli_sets_a_policy_and_reads_without_signing(
    local_server: LiveServer, s3: Any, bucket: str, tmp_path: Path
) -> None:
    credentials = local_server.s3_credentials()
    document = tmp_path / "policy.json"
    document.write_text(
        policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/public/*",
            },
        )
    )
    put = aws(
        local_server,
        credentials,
        "s3api",
        "put-bucket-policy",
        "--bucket",
        bucket,
        "--policy",
        f"file://{document}",
    )
    assert put.returncode == 0, put.stderr
    target = tmp_path / "cat.jpg"
    got = aws(
        local_server,
        ("", ""),
        "s3",
        "cp",
        "--no-sign-request",
        f"s3://{bucket}/public/cat.jpg",
        str(target),
    )
    assert got.returncode == 0, got.stderr
    assert target.read_bytes() == b"cat"
    denied = aws(
        local_server,
        ("", ""),
        "s3",
        "cp",
        "--no-sign-request",
        f"s3://{bucket}/private/plan.txt",
        str(target),
    )
    assert denied.returncode != 0 and "403" in denied.stderr
    acl = aws(
        local_server,
        credentials,
        "s3api",
        "put-object-acl",
        "--bucket",
        bucket,
        "--key",
        "private/plan.txt",
        "--acl",
        "public-read",
    )
    assert acl.returncode == 0, acl.stderr
    assert web.get(f"{local_server.s3_url}/{bucket}/private/plan.txt").content == b"plan"


@pytest.mark.slow  # the aws CLI
def test_the_aws_cli_sets_cors_tags_conditions_and_the_access_block(
    local_server: LiveServer, bucket: str, tmp_path: Path
) -> None:
    credentials = local_server.s3_credentials()

    def run(*args: str) -> str:
        done = aws(local_server, credentials, "s3api", *args, "--bucket", bucket)
        assert done.returncode == 0, done.stderr
        return done.stdout

    rules = tmp_path / "cors.json"
    rules.write_text(
        json.dumps({"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]})
    )
    run("put-bucket-cors", "--cors-configuration", f"file://{rules}")
    assert json.loads(run("get-bucket-cors"))["CORSRules"][0]["AllowedMethods"] == ["GET"]
    run(
        "put-object-tagging",
        "--key",
        "public/cat.jpg",
        "--tagging",
        "TagSet=[{Key=team,Value=web}]",
    )
    assert json.loads(run("get-object-tagging", "--key", "public/cat.jpg"))["TagSet"] == [
        {"Key": "team", "Value": "web"}
    ]
    body = tmp_path / "body.txt"
    body.write_bytes(b"once")
    run("put-object", "--key", "once.txt", "--body", str(body), "--if-none-match", "*")
    again = aws(
        local_server,
        credentials,
        "s3api",
        "put-object",
        "--bucket",
        bucket,
        "--key",
        "once.txt",
        "--body",
        str(body),
        "--if-none-match",
        "*",
    )
    assert again.returncode != 0 and "PreconditionFailed" in again.stderr
    run(
        "put-public-access-block",
        "--public-access-block-configuration",
        "BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true",
    )
    blocked = aws(
        local_server,
        credentials,
        "s3api",
        "put-object-acl",
        "--bucket",
        bucket,
        "--key",
        "once.txt",
        "--acl",
        "public-read",
    )
    assert blocked.returncode != 0 and "AccessDenied" in blocked.stderr


def test_every_operation_names_an_action_policies_accept() -> None:
    from gateway.s3.operations import OPERATIONS
    from storage.rules.access import VERSIONED as VERSIONED_ACTIONS
    from storage.rules.policy import ACTIONS

    assert {op.action for op in OPERATIONS} | set(VERSIONED_ACTIONS.values()) <= ACTIONS
