"""ACL grants beyond canned ACLs, with boto3 against the shared server (issue 38, point 9):
grants to an organization by its canonical user id, to S3's groups, by e-mail address
(refused as AWS refuses it in its newer regions), set by AccessControlPolicy bodies and
`x-amz-grant-*` headers; what each permission opens to the grantee, and nothing more."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import web
from tests.support.access import policy, refused, user_grant
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.orgs import make_org

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTHENTICATED = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("gr")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="doc.txt", Body=b"doc")
    s3.put_object(Bucket=name, Key="other.txt", Body=b"other")
    return name


def _group(uri: str, permission: str) -> dict:
    return {"Grantee": {"Type": "Group", "URI": uri}, "Permission": permission}


def _shown(grants: list[dict]) -> list[tuple[str, str, str | None, str]]:
    return [
        (
            g["Grantee"]["Type"],
            g["Grantee"].get("ID") or g["Grantee"].get("URI"),
            g["Grantee"].get("DisplayName"),
            g["Permission"],
        )
        for g in grants
    ]


def test_canned_acls_list_the_grants_s3_lists(s3: Any, bucket: str) -> None:
    owner = s3.get_bucket_acl(Bucket=bucket)["Owner"]
    me = ("CanonicalUser", owner["ID"], owner["DisplayName"], "FULL_CONTROL")
    assert _shown(s3.get_bucket_acl(Bucket=bucket)["Grants"]) == [me]
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    assert _shown(s3.get_bucket_acl(Bucket=bucket)["Grants"]) == [
        me,
        ("Group", ALL_USERS, None, "READ"),
        ("Group", ALL_USERS, None, "WRITE"),
    ]
    s3.put_object_acl(Bucket=bucket, Key="doc.txt", ACL="authenticated-read")
    assert _shown(s3.get_object_acl(Bucket=bucket, Key="doc.txt")["Grants"]) == [
        me,
        ("Group", AUTHENTICATED, None, "READ"),
    ]


def test_a_bucket_grant_opens_what_it_names_to_that_organization_only(
    local_server: LiveServer, s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    owner = s3.get_bucket_acl(Bucket=bucket)["Owner"]
    assert refused(theirs.list_objects_v2, Bucket=bucket) == "NoSuchBucket"
    body = {
        "Owner": {"ID": owner["ID"]},
        "Grants": [user_grant(org, "READ"), user_grant(owner["ID"], "FULL_CONTROL")],
    }
    s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy=body)
    listed = s3.get_bucket_acl(Bucket=bucket)["Grants"]
    assert [(t, i, p) for t, i, _, p in _shown(listed)] == [  # as set, in its order
        ("CanonicalUser", org, "READ"),
        ("CanonicalUser", owner["ID"], "FULL_CONTROL"),
    ]
    assert listed[0]["Grantee"]["DisplayName"]  # the grantee's name, to the owner
    assert theirs.list_objects_v2(Bucket=bucket)["KeyCount"] == 2
    theirs.head_bucket(Bucket=bucket)
    # READ on the bucket is a listing: not the objects, not writes, not the ACL.
    assert refused(theirs.get_object, Bucket=bucket, Key="doc.txt") == "AccessDenied"
    assert refused(theirs.put_object, Bucket=bucket, Key="x", Body=b"x") == "AccessDenied"
    assert refused(theirs.get_bucket_acl, Bucket=bucket) == "AccessDenied"
    assert refused(theirs.put_bucket_acl, Bucket=bucket, ACL="private") == "AccessDenied"
    third = local_server.s3(*local_server.s3_credentials(make_org(local_server)))
    assert refused(third.list_objects_v2, Bucket=bucket) == "AccessDenied"
    # READ_ACP reads the ACL; WRITE_ACP changes it (and nothing else), as on AWS.
    body["Grants"] = [user_grant(org, "READ_ACP"), user_grant(org, "WRITE_ACP")]
    s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy=body)
    assert refused(theirs.list_objects_v2, Bucket=bucket) == "AccessDenied"
    assert len(theirs.get_bucket_acl(Bucket=bucket)["Grants"]) == 2
    body["Grants"] = [user_grant(org, "WRITE")]
    theirs.put_bucket_acl(Bucket=bucket, AccessControlPolicy=body)
    theirs.put_object(Bucket=bucket, Key="from-them.txt", Body=b"hi")
    assert refused(theirs.get_bucket_acl, Bucket=bucket) == "AccessDenied"
    assert refused(theirs.delete_bucket_policy, Bucket=bucket) == "MethodNotAllowed"
    # An empty grant list reads back empty; the owner keeps everything.
    s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy={"Owner": body["Owner"], "Grants": []})
    assert s3.get_bucket_acl(Bucket=bucket)["Grants"] == []
    assert s3.get_object(Bucket=bucket, Key="from-them.txt")["Body"].read() == b"hi"
    assert refused(theirs.put_object, Bucket=bucket, Key="y", Body=b"y") == "AccessDenied"


def test_grant_headers_on_objects_give_each_permission_its_own(
    local_server: LiveServer, s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    s3.put_object(
        Bucket=bucket,
        Key="shared.txt",
        Body=b"shared",
        GrantRead=f'id="{org}"',
        GrantReadACP=f"id={org}",
    )
    listed = s3.get_object_acl(Bucket=bucket, Key="shared.txt")["Grants"]
    assert [(t, i, p) for t, i, _, p in _shown(listed)] == [
        ("CanonicalUser", org, "READ"),
        ("CanonicalUser", org, "READ_ACP"),
    ]
    assert theirs.get_object(Bucket=bucket, Key="shared.txt")["Body"].read() == b"shared"
    assert len(theirs.get_object_acl(Bucket=bucket, Key="shared.txt")["Grants"]) == 2
    assert (
        refused(theirs.put_object_acl, Bucket=bucket, Key="shared.txt", ACL="public-read")
        == "AccessDenied"
    )
    assert refused(theirs.get_object, Bucket=bucket, Key="doc.txt") == "AccessDenied"
    assert refused(theirs.list_objects_v2, Bucket=bucket) == "AccessDenied"
    assert refused(theirs.put_object, Bucket=bucket, Key="shared.txt", Body=b"x") == "AccessDenied"
    # WRITE_ACP on an object: its ACL, not its bytes.
    s3.put_object_acl(Bucket=bucket, Key="doc.txt", GrantWriteACP=f"id={org}")
    assert refused(theirs.get_object, Bucket=bucket, Key="doc.txt") == "AccessDenied"
    theirs.put_object_acl(Bucket=bucket, Key="doc.txt", GrantRead=f"id={org}")
    assert theirs.get_object(Bucket=bucket, Key="doc.txt")["Body"].read() == b"doc"
    # A copy and a multipart upload take grant headers too.
    s3.copy_object(
        Bucket=bucket,
        Key="copied.txt",
        CopySource=f"{bucket}/other.txt",
        GrantFullControl=f"id={org}",
    )
    assert theirs.get_object(Bucket=bucket, Key="copied.txt")["Body"].read() == b"other"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="big.bin", GrantRead=f"id={org}")
    part = s3.upload_part(
        Bucket=bucket, Key="big.bin", UploadId=upload["UploadId"], PartNumber=1, Body=b"p"
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="big.bin",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert theirs.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == b"p"


def test_create_bucket_takes_grant_headers(s3: Any, anonymous: Any, other: tuple[str, Any]) -> None:
    org, theirs = other
    name = unique_name("grc")
    s3.create_bucket(Bucket=name, GrantWrite=f"id={org}", GrantRead=f'uri="{ALL_USERS}"')
    assert [(i, p) for _, i, _, p in _shown(s3.get_bucket_acl(Bucket=name)["Grants"])] == [
        (ALL_USERS, "READ"),
        (org, "WRITE"),
    ]
    theirs.put_object(Bucket=name, Key="in.txt", Body=b"in")
    assert anonymous.list_objects_v2(Bucket=name)["KeyCount"] == 1
    assert refused(anonymous.put_object, Bucket=name, Key="x", Body=b"x") == "AccessDenied"
    # An uploader with WRITE sets the ACL of what it writes, with the write (AWS's ACL
    # model): that version only, never another's object nor the bucket's ACL.
    theirs.put_object(Bucket=name, Key="mine", Body=b"x", GrantRead=f"id={org}")
    assert theirs.get_object(Bucket=name, Key="mine")["Body"].read() == b"x"
    assert refused(theirs.get_object, Bucket=name, Key="in.txt") == "AccessDenied"
    assert refused(theirs.put_object_acl, Bucket=name, Key="mine", ACL="private") == (
        "AccessDenied"
    )
    assert refused(theirs.put_bucket_acl, Bucket=name, ACL="public-read-write") == ("AccessDenied")


def test_grants_that_name_nobody_or_mix_forms_are_refused_and_change_nothing(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    owner = s3.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
    before = s3.get_bucket_acl(Bucket=bucket)["Grants"]

    def put(*grants: dict, owner_id: str = owner) -> str:
        body = {"Owner": {"ID": owner_id}, "Grants": list(grants)}
        return refused(s3.put_bucket_acl, Bucket=bucket, AccessControlPolicy=body)

    assert put(user_grant("org_no_such_org", "READ")) == "InvalidArgument"
    assert put(_group("http://acs.amazonaws.com/groups/s3/LogDelivery", "WRITE")) == (
        "InvalidArgument"
    )
    email = {"Grantee": {"Type": "AmazonCustomerByEmail", "EmailAddress": "a@example.com"}}
    assert put({**email, "Permission": "READ"}) == "UnresolvableGrantByEmailAddress"
    assert put(user_grant(org, "READ"), owner_id=org) == "AccessDenied"
    assert (
        refused(s3.put_bucket_acl, Bucket=bucket, ACL="public-read", GrantRead=f"id={org}")
        == "InvalidRequest"
    )
    assert (
        refused(s3.put_object, Bucket=bucket, Key="k", Body=b"", GrantRead='emailAddress="a@b.c"')
        == "UnresolvableGrantByEmailAddress"
    )
    assert refused(s3.put_object, Bucket=bucket, Key="k", Body=b"", GrantRead="id=") == (
        "InvalidArgument"
    )
    assert s3.get_bucket_acl(Bucket=bucket)["Grants"] == before
    assert refused(s3.head_object, Bucket=bucket, Key="k") == "404"
    assert refused(theirs.list_objects_v2, Bucket=bucket) == "NoSuchBucket"


def test_the_public_access_block_weighs_group_grants_not_organizations(
    s3: Any, anonymous: Any, bucket: str, other: tuple[str, Any]
) -> None:
    org, theirs = other
    s3.put_object_acl(Bucket=bucket, Key="doc.txt", GrantRead=f'id="{org}", uri="{ALL_USERS}"')
    assert anonymous.get_object(Bucket=bucket, Key="doc.txt")["Body"].read() == b"doc"
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={"BlockPublicAcls": True, "IgnorePublicAcls": True},
    )
    assert refused(anonymous.get_object, Bucket=bucket, Key="doc.txt") == "AccessDenied"
    assert theirs.get_object(Bucket=bucket, Key="doc.txt")["Body"].read() == b"doc"
    assert (
        refused(s3.put_object_acl, Bucket=bucket, Key="other.txt", GrantRead=f"uri={ALL_USERS}")
        == "AccessDenied"
    )
    s3.put_object_acl(Bucket=bucket, Key="other.txt", GrantRead=f"id={org}")
    assert theirs.get_object(Bucket=bucket, Key="other.txt")["Body"].read() == b"other"


def _form(server: LiveServer, bucket: str, **fields: str) -> Any:
    """An anonymous browser form upload (no policy, no signature) of `b"bar"`."""
    return web.post(f"{server.s3_url}/{bucket}", data=fields, files={"file": b"bar"})


def test_a_write_granted_by_the_bucket_acl_sets_the_acl_of_its_own_version(
    local_server: LiveServer, s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    """AWS's ACL model: whoever the bucket's WRITE grant lets write sends the new object's
    ACL with it (`x-amz-acl`, a form's `acl`), authorized by that grant alone."""
    org, theirs = other
    name = unique_name("grw")
    s3.create_bucket(Bucket=name, ACL="public-read-write")
    s3.put_object(Bucket=name, Key="owners.txt", Body=b"owners")
    posted = _form(local_server, name, key="form.txt", acl="public-read")
    assert posted.status_code == 204, posted.text
    created = _form(
        local_server, name, key="made.txt", acl="public-read", success_action_status="201"
    )
    assert created.status_code == 201 and "<Key>made.txt</Key>" in created.text
    anonymous.put_object(Bucket=name, Key="put.txt", Body=b"put", ACL="public-read")
    for key, body in (("form.txt", b"bar"), ("made.txt", b"bar"), ("put.txt", b"put")):
        assert anonymous.get_object(Bucket=name, Key=key)["Body"].read() == body
    theirs.put_object(Bucket=name, Key="theirs.txt", Body=b"t", GrantFullControl=f"id={org}")
    assert theirs.get_object(Bucket=name, Key="theirs.txt")["Body"].read() == b"t"
    # Nothing beyond the version written: not another object, its ACL, or the bucket's.
    assert refused(anonymous.get_object, Bucket=name, Key="owners.txt") == "AccessDenied"
    assert refused(theirs.get_object, Bucket=name, Key="owners.txt") == "AccessDenied"
    for client in (anonymous, theirs):
        assert refused(client.put_object_acl, Bucket=name, Key="owners.txt", ACL="public-read") == (
            "AccessDenied"
        )
        assert refused(client.put_bucket_acl, Bucket=name, ACL="public-read") == "AccessDenied"
    assert refused(anonymous.put_object_acl, Bucket=name, Key="put.txt", ACL="private") == (
        "AccessDenied"
    )
    assert s3.get_object_acl(Bucket=name, Key="owners.txt")["Grants"][1:] == []
    # A policy's Deny of s3:PutObjectAcl still refuses it, and the write with it.
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:PutObjectAcl",
        "Resource": f"arn:aws:s3:::{name}/*",
    }
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    denied = _form(local_server, name, key="late.txt", acl="public-read")
    assert denied.status_code == 403 and "AccessDenied" in denied.text
    anonymous.put_object(Bucket=name, Key="plain.txt", Body=b"p")  # no ACL: the write stands
    assert refused(s3.head_object, Bucket=name, Key="late.txt") == "404"


def test_the_writes_acl_needs_a_write_grant_to_the_requester_itself(
    local_server: LiveServer, s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    """Refused, nothing stored: anyone the WRITE grant does not name (anonymous, a third
    organization, a revoked key of the grantee), and a group's grant under IgnorePublicAcls."""
    org, theirs = other
    name = unique_name("grn")
    s3.create_bucket(Bucket=name, GrantWrite=f"id={org}", GrantRead=f"uri={ALL_USERS}")
    theirs.put_object(Bucket=name, Key="ok.txt", Body=b"ok", ACL="public-read")
    assert anonymous.get_object(Bucket=name, Key="ok.txt")["Body"].read() == b"ok"
    third = local_server.s3(*local_server.s3_credentials(make_org(local_server)))
    revoked = local_server.s3_credentials(org)
    local_server.cli("keys", "revoke", revoked[0])
    gone = local_server.s3(*revoked)
    for client, expected in (
        (anonymous, "AccessDenied"),
        (third, "AccessDenied"),
        (gone, "InvalidAccessKeyId"),
    ):
        assert (
            refused(client.put_object, Bucket=name, Key="no.txt", Body=b"x", ACL="public-read")
            == expected
        )
    posted = _form(local_server, name, key="no.txt", acl="public-read")
    assert posted.status_code == 403 and "AccessDenied" in posted.text
    # IgnorePublicAcls: AllUsers' WRITE grants nothing, the ACL with it neither.
    public = unique_name("gri")
    s3.create_bucket(Bucket=public, ACL="public-read-write")
    s3.put_public_access_block(
        Bucket=public, PublicAccessBlockConfiguration={"IgnorePublicAcls": True}
    )
    posted = _form(local_server, public, key="no.txt", acl="public-read")
    assert posted.status_code == 403 and "AccessDenied" in posted.text
    for bucket in (name, public):
        assert refused(s3.head_object, Bucket=bucket, Key="no.txt") == "404"


def test_a_bucket_whose_acl_grants_a_group_is_public(
    s3: Any, bucket: str, other: tuple[str, Any]
) -> None:
    """GetBucketPolicyStatus weighs the bucket's ACL as AWS's "meaning of public" does: a
    grant to AllUsers or AuthenticatedUsers is public, one to an organization is not, and
    IgnorePublicAcls sets the group grants aside."""
    org, _ = other

    def public() -> bool:
        return bool(s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"])

    assert public() is False
    for canned in ("public-read", "authenticated-read", "public-read-write"):
        s3.put_bucket_acl(Bucket=bucket, ACL=canned)
        assert public() is True, canned
    s3.put_bucket_acl(Bucket=bucket, GrantRead=f"id={org}")
    assert public() is False
    s3.put_bucket_acl(Bucket=bucket, GrantReadACP=f"uri={AUTHENTICATED}")
    assert public() is True
    s3.put_public_access_block(
        Bucket=bucket, PublicAccessBlockConfiguration={"IgnorePublicAcls": True}
    )
    assert public() is False
    s3.delete_public_access_block(Bucket=bucket)
    s3.put_bucket_acl(Bucket=bucket, ACL="private")
    assert public() is False
