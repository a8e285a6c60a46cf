"""Bucket policy condition keys a request carries in its headers, the `IfExists` operators and
`NotPrincipal` in a Deny, with boto3 against the shared server (issue 38, point 8): each
decides what it names, for another organization, an anonymous client and the owner alike."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.access import policy, refused
from tests.support.names import unique_name


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("pc")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="public/a.txt", Body=b"a")
    s3.put_object(Bucket=name, Key="private/b.txt", Body=b"b")
    return name


def _statement(
    effect: str, principal: object, action: str | list[str], resource: str, **condition: dict
) -> dict:
    found: dict = {"Effect": effect, "Principal": principal, "Action": action}
    found["Resource"] = resource
    if condition:
        found["Condition"] = condition
    return found


def test_x_amz_acl_and_request_object_tags_decide_another_organizations_writes(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    them = {"AWS": f"arn:aws:iam::{org}:root"}
    objects = f"arn:aws:s3:::{bucket}/*"
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement(
                "Allow",
                them,
                "s3:PutObject",
                objects,
                StringEquals={"s3:x-amz-acl": "bucket-owner-full-control"},
            ),
            _statement(
                "Allow",
                them,
                "s3:PutObjectTagging",
                objects,
                StringEquals={"s3:RequestObjectTag/team": "blue"},
            ),
        ),
    )
    assert refused(theirs.put_object, Bucket=bucket, Key="up/1", Body=b"1") == "AccessDenied"
    theirs.put_object(Bucket=bucket, Key="up/1", Body=b"1", ACL="bucket-owner-full-control")
    assert s3.get_object(Bucket=bucket, Key="up/1")["Body"].read() == b"1"
    assert (
        refused(theirs.put_object, Bucket=bucket, Key="up/2", Body=b"2", ACL="private")
        == "AccessDenied"
    )
    # Tags a write sets need s3:PutObjectTagging, which the policy gives for team=blue only.
    owner_acl = "bucket-owner-full-control"
    theirs.put_object(Bucket=bucket, Key="up/3", Body=b"3", ACL=owner_acl, Tagging="team=blue")
    assert s3.get_object_tagging(Bucket=bucket, Key="up/3")["TagSet"] == [
        {"Key": "team", "Value": "blue"}
    ]
    assert (
        refused(
            theirs.put_object,
            Bucket=bucket,
            Key="up/4",
            Body=b"4",
            ACL=owner_acl,
            Tagging="team=red",
        )
        == "AccessDenied"
    )
    assert refused(s3.head_object, Bucket=bucket, Key="up/4") == "404"


def test_a_grant_header_condition_makes_uploaders_give_the_owner_full_control(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    owner = s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement(
                "Allow",
                {"AWS": org},
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/*",
                StringEquals={"s3:x-amz-grant-full-control": f"id={owner}"},
            ),
        ),
    )
    assert refused(theirs.put_object, Bucket=bucket, Key="g/1", Body=b"1") == "AccessDenied"
    theirs.put_object(Bucket=bucket, Key="g/1", Body=b"1", GrantFullControl=f"id={owner}")
    assert s3.get_object(Bucket=bucket, Key="g/1")["Body"].read() == b"1"


def test_a_request_key_is_absent_from_actions_it_does_not_belong_to(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    """s3:x-amz-acl is a key of the ACL writes: sent on a GetObject, it satisfies nothing."""
    org, theirs = other
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement(
                "Allow",
                {"AWS": org},
                "s3:GetObject",
                f"arn:aws:s3:::{bucket}/*",
                StringEquals={"s3:x-amz-acl": "private"},
            ),
        ),
    )

    def add_acl(request: Any, **_: Any) -> None:
        request.headers["x-amz-acl"] = "private"

    theirs.meta.events.register("before-sign.s3.GetObject", add_acl)
    assert refused(theirs.get_object, Bucket=bucket, Key="public/a.txt") == "AccessDenied"


def test_copy_source_and_metadata_directive_decide_copies(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    them = {"AWS": org}
    objects = f"arn:aws:s3:::{bucket}/*"
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement("Allow", them, "s3:GetObject", objects),
            _statement(
                "Allow",
                them,
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/copies/*",
                StringLike={"s3:x-amz-copy-source": f"{bucket}/public/*"},
            ),
            _statement(
                "Deny",
                "*",
                "s3:PutObject",
                objects,
                StringEquals={"s3:x-amz-metadata-directive": "REPLACE"},
            ),
        ),
    )
    theirs.copy_object(Bucket=bucket, Key="copies/a", CopySource=f"{bucket}/public/a.txt")
    assert s3.get_object(Bucket=bucket, Key="copies/a")["Body"].read() == b"a"
    source = {"Bucket": bucket, "Key": "private/b.txt"}
    assert (
        refused(theirs.copy_object, Bucket=bucket, Key="copies/b", CopySource=source)
        == "AccessDenied"
    )
    assert refused(theirs.put_object, Bucket=bucket, Key="copies/c", Body=b"c") == "AccessDenied"
    # The Deny takes from the owner too: a copy that replaces metadata is refused to all.
    replace = {"MetadataDirective": "REPLACE", "Metadata": {"k": "v"}}
    assert (
        refused(s3.copy_object, Bucket=bucket, Key="d", CopySource=source, **replace)
        == "AccessDenied"
    )
    s3.copy_object(Bucket=bucket, Key="d", CopySource=source, MetadataDirective="COPY")
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == b"b"


def test_encryption_keys_and_if_exists(s3: Any, bucket: str, other: tuple[str, Any]) -> None:
    org, theirs = other
    objects = f"arn:aws:s3:::{bucket}/*"
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement(
                "Deny",
                "*",
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/sealed/*",
                StringNotEquals={"s3:x-amz-server-side-encryption": "AES256"},
            ),
            _statement(
                "Deny",
                "*",
                "s3:PutObject",
                objects,
                StringEquals={"s3:x-amz-server-side-encryption-aws-kms-key-id": "retired-key"},
            ),
            _statement(
                "Allow",
                {"AWS": org},
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/inbox/*",
                StringEqualsIfExists={"s3:x-amz-acl": "bucket-owner-full-control"},
            ),
        ),
    )
    assert refused(s3.put_object, Bucket=bucket, Key="sealed/x", Body=b"x") == "AccessDenied"
    s3.put_object(Bucket=bucket, Key="sealed/x", Body=b"x", ServerSideEncryption="AES256")
    assert s3.head_object(Bucket=bucket, Key="sealed/x")["ServerSideEncryption"] == "AES256"
    assert (  # refused before the key is looked for: the policy decides first
        refused(
            s3.put_object,
            Bucket=bucket,
            Key="kms",
            Body=b"k",
            ServerSideEncryption="aws:kms",
            SSEKMSKeyId="retired-key",
        )
        == "AccessDenied"
    )
    # IfExists: no header holds the condition; the header must then have the value.
    theirs.put_object(Bucket=bucket, Key="inbox/1", Body=b"1")
    theirs.put_object(Bucket=bucket, Key="inbox/2", Body=b"2", ACL="bucket-owner-full-control")
    assert (
        refused(theirs.put_object, Bucket=bucket, Key="inbox/3", Body=b"3", ACL="private")
        == "AccessDenied"
    )
    assert s3.get_object(Bucket=bucket, Key="inbox/1")["Body"].read() == b"1"
    assert refused(s3.head_object, Bucket=bucket, Key="inbox/3") == "404"


def test_null_requires_a_header_and_sse_c_has_its_key(s3: Any, bucket: str) -> None:
    """The classic "uploads must be encrypted" policy: a Deny where the header is Null."""
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement(
                "Deny",
                "*",
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/enc/*",
                Null={"s3:x-amz-server-side-encryption": "true"},
            ),
            _statement(
                "Deny",
                "*",
                "s3:PutObject",
                f"arn:aws:s3:::{bucket}/customer/*",
                StringNotEquals={"s3:x-amz-server-side-encryption-customer-algorithm": "AES256"},
            ),
        ),
    )
    assert refused(s3.put_object, Bucket=bucket, Key="enc/1", Body=b"1") == "AccessDenied"
    s3.put_object(Bucket=bucket, Key="enc/1", Body=b"1", ServerSideEncryption="AES256")
    s3.put_object(Bucket=bucket, Key="plain/1", Body=b"1")
    assert refused(s3.put_object, Bucket=bucket, Key="customer/1", Body=b"1") == "AccessDenied"
    key = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}
    s3.put_object(Bucket=bucket, Key="customer/1", Body=b"1", **key)
    assert s3.get_object(Bucket=bucket, Key="customer/1", **key)["Body"].read() == b"1"


def test_not_principal_denies_everyone_it_does_not_name(
    s3: Any, anonymous: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    objects = f"arn:aws:s3:::{bucket}/*"
    owner = s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement("Allow", "*", "s3:GetObject", objects),
            {
                "Effect": "Deny",
                "NotPrincipal": {"AWS": [f"arn:aws:iam::{owner}:root"]},
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/private/*",
            },
        ),
    )
    assert anonymous.get_object(Bucket=bucket, Key="public/a.txt")["Body"].read() == b"a"
    assert theirs.get_object(Bucket=bucket, Key="public/a.txt")["Body"].read() == b"a"
    assert refused(anonymous.get_object, Bucket=bucket, Key="private/b.txt") == "AccessDenied"
    assert refused(theirs.get_object, Bucket=bucket, Key="private/b.txt") == "AccessDenied"
    assert s3.get_object(Bucket=bucket, Key="private/b.txt")["Body"].read() == b"b"
    # Naming them lifts the Deny for them alone.
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            _statement("Allow", "*", "s3:GetObject", objects),
            {
                "Effect": "Deny",
                "NotPrincipal": {"AWS": [owner, org]},
                "Action": "s3:GetObject",
                "Resource": objects,
            },
        ),
    )
    assert theirs.get_object(Bucket=bucket, Key="private/b.txt")["Body"].read() == b"b"
    assert refused(anonymous.get_object, Bucket=bucket, Key="public/a.txt") == "AccessDenied"


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            {"Effect": "Allow", "NotPrincipal": {"AWS": "x"}, "Action": "s3:GetObject"},
            "MalformedPolicy",
        ),
        (
            {"Effect": "Deny", "NotPrincipal": "*", "Action": "s3:GetObject"},
            "MalformedPolicy",
        ),
        (
            {
                "Effect": "Deny",
                "Principal": "*",
                "NotPrincipal": {"AWS": "x"},
                "Action": "s3:GetObject",
            },
            "MalformedPolicy",
        ),
        (
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Condition": {"StringEqualsIgnoreCaseIfExists": {"s3:x-amz-acl": "private"}},
            },
            "NotImplemented",
        ),
        (
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Condition": {"StringEquals": {"s3:x-amz-grant-foo": "x"}},
            },
            "NotImplemented",
        ),
        (
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Condition": {"Null": {"s3:x-amz-acl": "maybe"}},
            },
            "MalformedPolicy",
        ),
        (
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Condition": {"NullIfExists": {"s3:x-amz-acl": "true"}},
            },
            "MalformedPolicy",
        ),
    ],
)
def test_what_the_language_does_not_take_is_refused(
    s3: Any, bucket: str, statement: dict, expected: str
) -> None:
    statement["Resource"] = f"arn:aws:s3:::{bucket}/*"
    assert refused(s3.put_bucket_policy, Bucket=bucket, Policy=policy(bucket, statement)) == (
        expected
    )
    assert refused(s3.get_bucket_policy, Bucket=bucket) == "NoSuchBucketPolicy"
