"""A hostile review of issue 38's access work (ACL grants, object ownership, bucket policy
condition keys, IfExists, NotPrincipal, key scopes), attacking the real shared server with
boto3 and raw requests as another organization, an anonymous client or a narrower key
would. Each test is an attack that held, or a hole fixed with it. The attacks on the new
object and bucket operations are in tests/test_review38_objects.py, those on signatures and
POST forms in tests/test_review38_signatures.py."""

from __future__ import annotations

import os
from typing import Any

from tests.support import web
from tests.support.access import (
    acl_body,
    failure,
    group_uris,
    org_id,
    policy,
    refused,
    s3_bucket,
    user_grant,
)
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.orgs import make_org

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def test_a_deny_on_a_canned_acl_holds_whatever_case_the_header_is_in(s3: Any) -> None:
    """Hole (fixed): a Deny on `s3:x-amz-acl` = `public-read` compared the header as sent,
    while the write takes a canned ACL in any case: `PUBLIC-READ` slipped past the Deny
    and made the object public. The condition key now holds the ACL as the write reads it.
    Hole (fixed): a POST upload's `acl` field was no condition key at all."""
    bucket = s3_bucket(s3, "rv38-acl")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": ["s3:PutObject", "s3:PutObjectAcl"],
                "Resource": f"arn:aws:s3:::{bucket}/*",
                "Condition": {"StringEquals": {"s3:x-amz-acl": ["public-read"]}},
            },
        ),
    )
    for given in ("public-read", "PUBLIC-READ", " Public-Read "):
        assert refused(s3.put_object, Bucket=bucket, Key="k", Body=b"x", ACL=given) == (
            "AccessDenied"
        )
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert refused(s3.put_object_acl, Bucket=bucket, Key="k", ACL="Public-Read") == "AccessDenied"
    # A POST upload's acl field is the x-amz-acl it stands for, to the policy too.
    form = s3.generate_presigned_post(
        Bucket=bucket,
        Key="posted",
        Fields={"acl": "public-read"},
        Conditions=[{"acl": "public-read"}],
    )
    files = {"file": ("f.txt", b"posted", "text/plain")}
    assert web.post(form["url"], data=form["fields"], files=files).status_code == 403
    assert failure(s3.head_object, Bucket=bucket, Key="posted")[0] == 404
    assert group_uris(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == []


def test_a_deny_on_replace_holds_whatever_case_the_directive_is_in(s3: Any) -> None:
    """Hole (fixed): a Deny on `s3:x-amz-metadata-directive` = `REPLACE` compared the header
    as sent, while the copy takes the directive in any case: `replace` slipped past it."""
    bucket = s3_bucket(s3, "rv38-dir")
    s3.put_object(Bucket=bucket, Key="src", Body=b"x", Metadata={"label": "kept"})
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
                "Condition": {"StringEquals": {"s3:x-amz-metadata-directive": "REPLACE"}},
            },
        ),
    )
    for given in ("REPLACE", "replace"):
        assert (
            refused(
                s3.copy_object,
                Bucket=bucket,
                Key="dst",
                CopySource={"Bucket": bucket, "Key": "src"},
                MetadataDirective=given,
                Metadata={"label": "changed"},
            )
            == "AccessDenied"
        )
    s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert s3.head_object(Bucket=bucket, Key="dst")["Metadata"] == {"label": "kept"}


def test_not_principal_denies_anonymous_and_every_unnamed_organization(
    local_server: LiveServer, s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    """Holds: a Deny with NotPrincipal naming one organization (and the owner) leaves a
    public Allow to that organization alone; anonymous requests and a third organization
    are refused, as on AWS."""
    org, theirs = other
    bucket = s3_bucket(s3, "rv38-np")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
            {
                "Effect": "Deny",
                "NotPrincipal": {"AWS": [org, f"arn:aws:iam::{org_id(s3)}:root"]},
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
        ),
    )
    assert theirs.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert failure(anonymous.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")
    third = local_server.s3(*local_server.s3_credentials(make_org(local_server)))
    assert failure(third.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")


def test_a_condition_key_of_another_action_never_satisfies_an_allow(
    s3: Any, anonymous: Any
) -> None:
    """Holds: `x-amz-acl` sent on a GET is no key of s3:GetObject, so an Allow on GetObject
    conditioned on it (plain or IfExists on a key the request does carry elsewhere) opens
    nothing; StringEqualsIfExists on a key the PUT lacks allows it, as AWS documents."""
    bucket = s3_bucket(s3, "rv38-ctx")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
                "Condition": {"StringEquals": {"s3:x-amz-acl": "public-read"}},
            },
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{bucket}/drop/*",
                "Condition": {"StringEqualsIfExists": {"s3:x-amz-acl": "private"}},
            },
        ),
    )
    url = f"{anonymous.meta.endpoint_url}/{bucket}/k"
    assert web.get(url, headers={"x-amz-acl": "public-read"}).status_code == 403
    drop = f"{anonymous.meta.endpoint_url}/{bucket}/drop/a"
    assert web.put(drop, content=b"d").status_code == 200
    assert web.put(drop, content=b"d", headers={"x-amz-acl": "public-read"}).status_code == 403
    assert web.put(f"{anonymous.meta.endpoint_url}/{bucket}/k", content=b"d").status_code == 403


def test_write_acp_lets_a_grantee_widen_its_own_grant_but_not_past_the_block_or_the_object(
    s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: WRITE_ACP on one object is FULL_CONTROL of that object's ACL, as on AWS: the
    grantee may grant itself READ there; it cannot make it public while BlockPublicAcls
    says no, cannot name another owner, and reaches no other object of the bucket."""
    org, theirs = other
    bucket = s3_bucket(s3, "rv38-acp")
    for key in ("one", "two"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    s3.put_object_acl(
        Bucket=bucket, Key="one", AccessControlPolicy=acl_body(s3, [user_grant(org, "WRITE_ACP")])
    )
    s3.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": False,
            "BlockPublicPolicy": False,
            "RestrictPublicBuckets": False,
        },
    )
    assert failure(theirs.get_object, Bucket=bucket, Key="one")[0] == 403
    assert refused(theirs.put_object_acl, Bucket=bucket, Key="one", ACL="public-read") == (
        "AccessDenied"
    )
    public = {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"}
    assert (
        refused(
            theirs.put_object_acl,
            Bucket=bucket,
            Key="one",
            AccessControlPolicy=acl_body(s3, [user_grant(org, "WRITE_ACP"), public]),
        )
        == "AccessDenied"
    )
    assert (
        refused(
            theirs.put_object_acl,
            Bucket=bucket,
            Key="one",
            AccessControlPolicy={"Owner": {"ID": org}, "Grants": [user_grant(org, "FULL_CONTROL")]},
        )
        == "AccessDenied"
    )
    theirs.put_object_acl(
        Bucket=bucket,
        Key="one",
        AccessControlPolicy=acl_body(s3, [user_grant(org, "FULL_CONTROL")]),
    )
    assert theirs.get_object(Bucket=bucket, Key="one")["Body"].read() == b"one"
    assert failure(theirs.get_object, Bucket=bucket, Key="two")[0] == 403
    assert failure(theirs.put_object_acl, Bucket=bucket, Key="two", GrantRead=f"id={org}")[0] in (
        403,
        404,
    )
    assert failure(theirs.put_bucket_acl, Bucket=bucket, GrantRead=f"id={org}")[0] in (403, 404)
    assert group_uris(s3.get_object_acl(Bucket=bucket, Key="one")["Grants"]) == []


def test_grants_end_while_bucket_owner_enforced_and_no_acl_is_set_meanwhile(
    s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: BucketOwnerEnforced sets every grant aside (bucket and object) and refuses new
    ones, whether by PutObjectAcl, a grant header on a write or a PutBucketAcl; back to
    BucketOwnerPreferred, the grants kept apply again, as AWS restores them."""
    org, theirs = other
    bucket = s3_bucket(s3, "rv38-own")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", GrantRead=f"id={org}")
    assert theirs.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    controls = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=controls)
    assert failure(theirs.get_object, Bucket=bucket, Key="k")[0] in (403, 404)
    assert failure(s3.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={org}")[0] == 400
    assert failure(s3.put_object, Bucket=bucket, Key="n", Body=b"n", GrantRead=f"id={org}")[0] == (
        400
    )
    assert failure(s3.put_bucket_acl, Bucket=bucket, GrantRead=f"id={org}")[0] == 400
    preferred = {"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=preferred)
    assert theirs.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert failure(theirs.head_object, Bucket=bucket, Key="n")[0] in (403, 404)


def test_a_grant_names_only_real_organizations_and_never_moves_ownership(s3: Any) -> None:
    """Holds: a grant to an id no organization has is InvalidArgument (nothing stored); a
    grant by e-mail is UnresolvableGrantByEmailAddress; a body naming another Owner is
    AccessDenied."""
    bucket = s3_bucket(s3, "rv38-ids")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    ghost = "org_" + os.urandom(8).hex()
    assert refused(s3.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={ghost}") == (
        "InvalidArgument"
    )
    assert refused(s3.put_object, Bucket=bucket, Key="n", Body=b"", GrantRead=f"id={ghost}") == (
        "InvalidArgument"
    )
    assert refused(s3.put_object_acl, Bucket=bucket, Key="k", GrantRead='emailAddress="a@b.c"') == (
        "UnresolvableGrantByEmailAddress"
    )
    assert len(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == 1
    assert failure(s3.head_object, Bucket=bucket, Key="n")[0] == 404


TAGGING = (
    b'<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>'
    b"<Tag><Key>class</Key><Value>public</Value></Tag></TagSet></Tagging>"
)


def test_a_deny_on_request_tags_sees_the_tags_of_a_body_or_a_form(
    local_server: LiveServer, s3: Any
) -> None:
    """Hole (fixed): `s3:RequestObjectTag/<key>` was read from `x-amz-tagging` alone, so a
    Deny of a tag value held for PutObject's header but not for PutObjectTagging, whose
    tags come in its body, nor for a POST upload's `tagging` field: the tag AWS's
    condition would refuse was set. The tags of a body or a form are now the request's."""
    bucket = s3_bucket(s3, "rv38-tags")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:PutObject", "s3:PutObjectTagging"],
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": ["s3:PutObject", "s3:PutObjectTagging"],
                "Resource": f"arn:aws:s3:::{bucket}/*",
                "Condition": {"StringEquals": {"s3:RequestObjectTag/class": "public"}},
            },
        ),
    )
    assert refused(s3.put_object, Bucket=bucket, Key="k", Body=b"x", Tagging="class=public") == (
        "AccessDenied"
    )
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="class=private")
    public = {"TagSet": [{"Key": "class", "Value": "public"}]}
    assert refused(s3.put_object_tagging, Bucket=bucket, Key="k", Tagging=public) == (
        "AccessDenied"
    )
    assert s3.get_object_tagging(Bucket=bucket, Key="k")["TagSet"] == [
        {"Key": "class", "Value": "private"}
    ]
    files = {"file": ("f.txt", b"posted", "text/plain")}
    form = {"key": "posted", "tagging": TAGGING.decode()}
    answer = web.post(f"{local_server.s3_url}/{bucket}", data=form, files=files)
    assert answer.status_code == 403, answer.text
    assert failure(s3.head_object, Bucket=bucket, Key="posted")[0] == 404


def test_a_bucket_created_with_acls_off_takes_no_grant(s3: Any, other: tuple[str, Any]) -> None:
    """Holds: CreateBucket with BucketOwnerEnforced and a grant header is refused, as on AWS
    (InvalidBucketAclWithObjectOwnership), so no grant waits in it for ACLs to come back."""
    org, _ = other
    name = unique_name("rv38-enf")
    assert failure(
        s3.create_bucket, Bucket=name, ObjectOwnership="BucketOwnerEnforced", GrantRead=f"id={org}"
    ) == (400, "InvalidBucketAclWithObjectOwnership")
    assert failure(s3.head_bucket, Bucket=name)[0] == 404


def test_acl_and_ownership_operations_need_their_scopes(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: a files:read key sets no object ACL (by PutObjectAcl or a grant header on a
    write it may not make), a key without buckets:write sets no bucket ACL nor ownership
    controls, and a grantee's key without files:write uses no WRITE_ACP it was given."""
    org, _ = other
    bucket = s3_bucket(s3, "rv38-scopes")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    reader = local_server.s3(*local_server.s3_credentials(None, "buckets:read,files:read"))
    writer = local_server.s3(*local_server.s3_credentials(None, "buckets:read,files:write"))
    assert failure(reader.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={org}")[0] == 403
    assert failure(writer.put_bucket_acl, Bucket=bucket, GrantRead=f"id={org}")[0] == 403
    controls = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert (
        failure(writer.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls=controls)[0]
        == 403
    )
    assert len(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == 1
    s3.put_object_acl(
        Bucket=bucket, Key="k", AccessControlPolicy=acl_body(s3, [user_grant(org, "WRITE_ACP")])
    )
    narrow = local_server.s3(*local_server.s3_credentials(org, "files:read"))
    assert failure(narrow.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={org}")[0] == 403
    assert len(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == 1


def test_a_read_acp_grantee_learns_no_other_organizations_name(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: GetObjectAcl shows an organization's DisplayName only to the bucket's
    organization and to that organization itself; a READ_ACP grantee sees the other
    grantees' canonical ids (as on AWS) but not their names, and reads nothing else."""
    reader, theirs = other
    third = make_org(local_server)
    bucket = s3_bucket(s3, "rv38-names")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    grants = [user_grant(reader, "READ_ACP"), user_grant(third, "READ")]
    s3.put_object_acl(Bucket=bucket, Key="k", AccessControlPolicy=acl_body(s3, grants))
    shown = {
        g["Grantee"]["ID"]: g["Grantee"].get("DisplayName")
        for g in theirs.get_object_acl(Bucket=bucket, Key="k")["Grants"]
    }
    assert shown[third] is None and shown[reader] is not None
    mine = {
        g["Grantee"]["ID"]: g["Grantee"].get("DisplayName")
        for g in s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]
    }
    assert mine[third] is not None
    assert failure(theirs.get_object, Bucket=bucket, Key="k")[0] == 403
    assert failure(theirs.get_bucket_acl, Bucket=bucket)[0] in (403, 404)
