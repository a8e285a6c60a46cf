"""A hostile review of issue 38's S3 fidelity work (grants, ownership, policy condition keys,
GetObjectAttributes, partNumber reads, RenameObject, repeated completions, SigV2, bucket
creation and listing), attacking the real shared server with boto3 and raw requests as
another organization, an anonymous client, a narrower key or an old signature would.
Each test is an attack that held, or a hole fixed with it."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import os
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.access import policy, refused
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.orgs import make_org
from tests.support.s3 import code, status

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def _bucket(s3: Any, prefix: str) -> str:
    name = unique_name(prefix)
    s3.create_bucket(Bucket=name)
    return name


def _org_id(s3: Any) -> str:
    return str(s3.list_buckets()["Owner"]["ID"])


def _user(org: str, permission: str) -> dict:
    return {"Grantee": {"Type": "CanonicalUser", "ID": org}, "Permission": permission}


def _acl(s3: Any, grants: list[dict]) -> dict:
    return {"Owner": {"ID": _org_id(s3)}, "Grants": grants}


def _groups(grants: list[dict]) -> list[str]:
    return [g["Grantee"]["URI"] for g in grants if g["Grantee"]["Type"] == "Group"]


def _failed(call: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    return status(caught.value), code(caught.value)


def test_a_deny_on_a_canned_acl_holds_whatever_case_the_header_is_in(s3: Any) -> None:
    """Hole (fixed): a Deny on `s3:x-amz-acl` = `public-read` compared the header as sent,
    while the write takes a canned ACL in any case: `PUBLIC-READ` slipped past the Deny
    and made the object public. The condition key now holds the ACL as the write reads it.
    Hole (fixed): a POST upload's `acl` field was no condition key at all."""
    bucket = _bucket(s3, "rv38-acl")
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
    assert _failed(s3.head_object, Bucket=bucket, Key="posted")[0] == 404
    assert _groups(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == []


def test_a_deny_on_replace_holds_whatever_case_the_directive_is_in(s3: Any) -> None:
    """Hole (fixed): a Deny on `s3:x-amz-metadata-directive` = `REPLACE` compared the header
    as sent, while the copy takes the directive in any case: `replace` slipped past it."""
    bucket = _bucket(s3, "rv38-dir")
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
    bucket = _bucket(s3, "rv38-np")
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
                "NotPrincipal": {"AWS": [org, f"arn:aws:iam::{_org_id(s3)}:root"]},
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
        ),
    )
    assert theirs.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert _failed(anonymous.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")
    third = local_server.s3(*local_server.s3_credentials(make_org(local_server)))
    assert _failed(third.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")


def test_a_condition_key_of_another_action_never_satisfies_an_allow(
    s3: Any, anonymous: Any
) -> None:
    """Holds: `x-amz-acl` sent on a GET is no key of s3:GetObject, so an Allow on GetObject
    conditioned on it (plain or IfExists on a key the request does carry elsewhere) opens
    nothing; StringEqualsIfExists on a key the PUT lacks allows it, as AWS documents."""
    bucket = _bucket(s3, "rv38-ctx")
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
    bucket = _bucket(s3, "rv38-acp")
    for key in ("one", "two"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    s3.put_object_acl(
        Bucket=bucket, Key="one", AccessControlPolicy=_acl(s3, [_user(org, "WRITE_ACP")])
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
    assert _failed(theirs.get_object, Bucket=bucket, Key="one")[0] == 403
    assert refused(theirs.put_object_acl, Bucket=bucket, Key="one", ACL="public-read") == (
        "AccessDenied"
    )
    public = {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"}
    assert (
        refused(
            theirs.put_object_acl,
            Bucket=bucket,
            Key="one",
            AccessControlPolicy=_acl(s3, [_user(org, "WRITE_ACP"), public]),
        )
        == "AccessDenied"
    )
    assert (
        refused(
            theirs.put_object_acl,
            Bucket=bucket,
            Key="one",
            AccessControlPolicy={"Owner": {"ID": org}, "Grants": [_user(org, "FULL_CONTROL")]},
        )
        == "AccessDenied"
    )
    theirs.put_object_acl(
        Bucket=bucket, Key="one", AccessControlPolicy=_acl(s3, [_user(org, "FULL_CONTROL")])
    )
    assert theirs.get_object(Bucket=bucket, Key="one")["Body"].read() == b"one"
    assert _failed(theirs.get_object, Bucket=bucket, Key="two")[0] == 403
    assert _failed(theirs.put_object_acl, Bucket=bucket, Key="two", GrantRead=f"id={org}")[0] in (
        403,
        404,
    )
    assert _failed(theirs.put_bucket_acl, Bucket=bucket, GrantRead=f"id={org}")[0] in (403, 404)
    assert _groups(s3.get_object_acl(Bucket=bucket, Key="one")["Grants"]) == []


def test_grants_end_while_bucket_owner_enforced_and_no_acl_is_set_meanwhile(
    s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: BucketOwnerEnforced sets every grant aside (bucket and object) and refuses new
    ones, whether by PutObjectAcl, a grant header on a write or a PutBucketAcl; back to
    BucketOwnerPreferred, the grants kept apply again, as AWS restores them."""
    org, theirs = other
    bucket = _bucket(s3, "rv38-own")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", GrantRead=f"id={org}")
    assert theirs.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    controls = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=controls)
    assert _failed(theirs.get_object, Bucket=bucket, Key="k")[0] in (403, 404)
    assert _failed(s3.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={org}")[0] == 400
    assert _failed(s3.put_object, Bucket=bucket, Key="n", Body=b"n", GrantRead=f"id={org}")[0] == (
        400
    )
    assert _failed(s3.put_bucket_acl, Bucket=bucket, GrantRead=f"id={org}")[0] == 400
    preferred = {"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls=preferred)
    assert theirs.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert _failed(theirs.head_object, Bucket=bucket, Key="n")[0] in (403, 404)


def test_a_grant_names_only_real_organizations_and_never_moves_ownership(s3: Any) -> None:
    """Holds: a grant to an id no organization has is InvalidArgument (nothing stored); a
    grant by e-mail is UnresolvableGrantByEmailAddress; a body naming another Owner is
    AccessDenied."""
    bucket = _bucket(s3, "rv38-ids")
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
    assert _failed(s3.head_object, Bucket=bucket, Key="n")[0] == 404


def test_rename_needs_read_and_delete_of_the_source_in_the_same_bucket(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: a bucket WRITE grant (PutObject and DeleteObject) does not let another
    organization rename an object it may not read, nor a read grant one it may not
    delete (a Deny on s3:DeleteObject holds for the owner too); a source in another bucket, even the
    caller's own, is refused; a files:read key renames nothing; a key scoped to another
    bucket does not find this one."""
    org, theirs = other
    bucket = _bucket(s3, "rv38-ren")
    s3.put_object(Bucket=bucket, Key="secret", Body=b"s")
    s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy=_acl(s3, [_user(org, "WRITE")]))
    theirs.put_object(Bucket=bucket, Key="mine", Body=b"m")
    assert _rename(theirs, bucket, "taken", f"{bucket}/secret") == 403
    assert s3.get_object(Bucket=bucket, Key="secret")["Body"].read() == b"s"
    readable = {
        "Effect": "Allow",
        "Principal": {"AWS": [org]},
        "Action": ["s3:GetObject", "s3:PutObject"],
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    undeletable = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:DeleteObject",
        "Resource": f"arn:aws:s3:::{bucket}/secret",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, readable, undeletable))
    assert _rename(theirs, bucket, "taken", f"{bucket}/secret") == 403
    assert _rename(s3, bucket, "taken", f"{bucket}/secret") == 403
    assert s3.get_object(Bucket=bucket, Key="secret")["Body"].read() == b"s"
    s3.delete_bucket_policy(Bucket=bucket)
    mine = unique_name("rv38-mine")
    theirs.create_bucket(Bucket=mine)
    theirs.put_object(Bucket=mine, Key="x", Body=b"x")
    assert _rename(theirs, bucket, "moved", f"{mine}/x") == 400
    assert theirs.get_object(Bucket=mine, Key="x")["Body"].read() == b"x"
    reader = local_server.s3(*local_server.s3_credentials(None, "buckets:read,files:read"))
    assert _rename(reader, bucket, "moved", f"{bucket}/secret") == 403
    elsewhere = _bucket(s3, "rv38-else")
    scoped = local_server.s3(
        *local_server.s3_credentials(None, "files:read,files:write", "--bucket", elsewhere)
    )
    assert _rename(scoped, bucket, "moved", f"{bucket}/secret") == 404
    assert s3.get_object(Bucket=bucket, Key="secret")["Body"].read() == b"s"


def _rename(client: Any, bucket: str, key: str, source: str) -> int:
    """A RenameObject by the client's own signer (boto3 may not know the operation)."""
    from botocore.awsrequest import AWSRequest

    credentials = client._request_signer._credentials
    from botocore.auth import S3SigV4Auth

    url = f"{client.meta.endpoint_url}/{bucket}/{key}?renameObject"
    request = AWSRequest(
        "PUT",
        url,
        headers={"x-amz-rename-source": source, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
    )
    S3SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    return web.put(url, headers=dict(request.headers)).status_code


def test_object_attributes_reveal_nothing_without_the_right_to_read(
    s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: a policy granting another organization s3:GetObjectAttributes alone answers
    403 (AWS needs s3:GetObject too); an SSE-C object's attributes, and its parts by
    partNumber, need its key."""
    org, theirs = other
    bucket = _bucket(s3, "rv38-attr")
    s3.put_object(Bucket=bucket, Key="k", Body=b"attributes")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": {"AWS": [org]},
                "Action": "s3:GetObjectAttributes",
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
        ),
    )
    asked = ["ETag", "ObjectSize", "ObjectParts", "Checksum"]
    assert (
        _failed(theirs.get_object_attributes, Bucket=bucket, Key="k", ObjectAttributes=asked)[0]
        == 403
    )
    key = os.urandom(32)
    sse = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    s3.put_object(Bucket=bucket, Key="sealed", Body=b"sealed", **sse)
    assert (
        _failed(s3.get_object_attributes, Bucket=bucket, Key="sealed", ObjectAttributes=asked)[0]
        == 400
    )
    assert _failed(s3.head_object, Bucket=bucket, Key="sealed", PartNumber=1)[0] == 400
    assert _failed(s3.get_object, Bucket=bucket, Key="sealed", PartNumber=1)[0] == 400
    encoded = {  # botocore encodes the key for GetObject, not for GetObjectAttributes
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": base64.b64encode(key).decode(),
        "SSECustomerKeyMD5": base64.b64encode(hashlib.md5(key).digest()).decode(),
    }
    got = s3.get_object_attributes(Bucket=bucket, Key="sealed", ObjectAttributes=asked, **encoded)
    assert got["ObjectSize"] == 6


def test_a_completion_sent_again_answers_only_its_own_version(s3: Any) -> None:
    """Holds: once another write replaced the version an upload made, its completion sent
    again is NoSuchUpload, never the newer object's answer."""
    bucket = _bucket(s3, "rv38-done")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload, PartNumber=1, Body=b"p")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    first = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload, MultipartUpload=parts
    )
    again = s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=upload, MultipartUpload=parts
    )
    assert again["ETag"] == first["ETag"]
    other = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    etag2 = s3.upload_part(Bucket=bucket, Key="k", UploadId=other, PartNumber=1, Body=b"q")["ETag"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="k",
        UploadId=other,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag2}]},
    )
    assert (
        refused(
            s3.complete_multipart_upload,
            Bucket=bucket,
            Key="k",
            UploadId=upload,
            MultipartUpload=parts,
        )
        == "NoSuchUpload"
    )


def test_create_bucket_never_reaches_a_name_another_organization_shares(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: CreateBucket of a name another organization's bucket shares makes the caller a
    private bucket of its own (names are per organization: docs/s3.md, deliberate
    differences), never an answer about theirs: what it writes stays in its own, and asking
    for a public ACL on it is 409 BucketAlreadyExists, the us-east-1 "you own it" 200 too.
    One's own bucket created again is 200 and left as it is (its ACL not changed by the
    request's); a bucket-scoped key cannot "ensure" even the bucket it is scoped to."""
    _, theirs = other
    shared = unique_name("rv38-shared")
    theirs.create_bucket(Bucket=shared, ACL="public-read")
    theirs.put_object(Bucket=shared, Key="k", Body=b"theirs")
    assert _failed(s3.create_bucket, Bucket=shared, ACL="public-read") == (
        409,
        "BucketAlreadyExists",
    )
    s3.create_bucket(Bucket=shared)
    s3.put_object(Bucket=shared, Key="k", Body=b"mine")
    assert theirs.get_object(Bucket=shared, Key="k")["Body"].read() == b"theirs"
    assert _failed(s3.create_bucket, Bucket=shared, ACL="public-read") == (
        409,
        "BucketAlreadyExists",
    )
    assert _groups(s3.get_bucket_acl(Bucket=shared)["Grants"]) == []
    mine = _bucket(s3, "rv38-mine")
    s3.create_bucket(Bucket=mine, ACL="authenticated-read")
    assert _groups(s3.get_bucket_acl(Bucket=mine)["Grants"]) == []
    scoped = local_server.s3(
        *local_server.s3_credentials(None, "buckets:read,buckets:write", "--bucket", mine)
    )
    assert _failed(scoped.create_bucket, Bucket=mine)[0] == 403


def test_list_buckets_pages_only_ones_own(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    """Holds: a continuation token is a bucket name, read within the caller's own buckets:
    another organization's token lists only the caller's; a bucket-scoped key lists its
    bucket alone; bucket-region filters within them."""
    org = make_org(local_server)
    theirs = local_server.s3(*local_server.s3_credentials(org))
    names = sorted(unique_name("rv38-lb") for _ in range(3))
    for name in names:
        theirs.create_bucket(Bucket=name)
    page = theirs.list_buckets(MaxBuckets=1)
    assert [b["Name"] for b in page["Buckets"]] == names[:1]
    token = page["ContinuationToken"]
    mine = s3.list_buckets(ContinuationToken=token, MaxBuckets=1000)["Buckets"]
    assert not {b["Name"] for b in mine} & set(names)
    assert [b["Name"] for b in theirs.list_buckets(ContinuationToken=token)["Buckets"]] == names[1:]
    assert theirs.list_buckets(BucketRegion="eu-west-1")["Buckets"] == []
    scoped = local_server.s3(
        *local_server.s3_credentials(org, "buckets:read", "--bucket", names[1])
    )
    assert [b["Name"] for b in scoped.list_buckets()["Buckets"]] == [names[1]]
    assert _failed(anonymous.list_buckets, ContinuationToken=token)[0] == 403


def _v2_put(live: LiveServer, credentials: tuple[str, str], path: str, date: str) -> Any:
    import hmac

    access, secret = credentials
    text = f"PUT\n\n\n{date}\n{path}"
    signature = base64.b64encode(
        hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()
    ).decode()
    return web.put(
        live.s3_url + path,
        content=b"v2",
        headers={"Date": date, "Authorization": f"AWS {access}:{signature}"},
    )


def test_sigv2_refuses_old_dates_revoked_keys_and_another_resource(
    local_server: LiveServer, s3: Any
) -> None:
    """Holds: a SigV2 header signature 16 minutes old is RequestTimeTooSkewed; a revoked
    key's is InvalidAccessKeyId; a signature of one object's PUT is not one of another's."""
    bucket = _bucket(s3, "rv38-v2")
    credentials = local_server.s3_credentials()
    now = email.utils.formatdate(time.time(), usegmt=True)
    old = email.utils.formatdate(time.time() - 16 * 60, usegmt=True)
    assert _v2_put(local_server, credentials, f"/{bucket}/a", now).status_code == 200
    stale = _v2_put(local_server, credentials, f"/{bucket}/a", old)
    assert (stale.status_code, "RequestTimeTooSkewed" in stale.text) == (403, True)
    signed = _v2_put(local_server, credentials, f"/{bucket}/a", now).request.headers
    moved = web.put(
        f"{local_server.s3_url}/{bucket}/b",
        content=b"v2",
        headers={"Date": signed["Date"], "Authorization": signed["Authorization"]},
    )
    assert (moved.status_code, "SignatureDoesNotMatch" in moved.text) == (403, True)
    # Virtual-host style signs the Host's bucket: a signature of /bucket/a is one of the
    # same object by Host, and of no other bucket's /a.
    headers = {"Date": signed["Date"], "Authorization": signed["Authorization"]}
    port = local_server.s3_port
    for host, expected in (
        (f"{bucket}.localhost:{port}", 200),
        (f"x{bucket}.localhost:{port}", 403),
    ):
        by_host = web.put(
            f"{local_server.s3_url}/a", content=b"v2", headers={**headers, "Host": host}
        )
        assert by_host.status_code == expected, by_host.text
    unused = local_server.s3_credentials()  # revoked before the gateway caches it
    local_server.cli("keys", "revoke", unused[0])
    revoked = _v2_put(local_server, unused, f"/{bucket}/a", now)
    assert (revoked.status_code, "InvalidAccessKeyId" in revoked.text) == (403, True)


LEGAL_HOLD = (
    b'<LegalHold xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>ON</Status></LegalHold>'
)


def test_a_sigv2_presigned_url_is_not_another_operation_by_an_unsigned_subresource(
    local_server: LiveServer,
) -> None:
    """Hole (fixed): SigV2 signs only the sub-resources of its list (botocore's), and
    `?legal-hold`, `?retention`, `?publicAccessBlock`, `?ownershipControls`, `?encryption`
    and the other flags that name an operation here are not on it: whoever held a
    presigned PUT URL of one object could add `&legal-hold` (or `&retention`, a
    COMPLIANCE date years away) and lock its version, and a presigned CreateBucket URL
    turned off the bucket's public access block. A presigned SigV2 URL now signs every
    flag that names an operation; a header signature, which botocore's SigV2 signer makes
    without them for these newer operations, is still taken either way."""
    v2: Any = local_server.s3(signature_version="s3")
    bucket = unique_name("rv38-v2sub")
    v2.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    v2.put_object(Bucket=bucket, Key="k", Body=b"x")
    put = v2.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "k"})
    held = web.put(put + "&legal-hold", content=LEGAL_HOLD)
    assert (held.status_code, "SignatureDoesNotMatch" in held.text) == (403, True)
    assert v2.get_object_legal_hold(Bucket=bucket, Key="k")["LegalHold"]["Status"] == "OFF"
    assert web.put(put, content=b"as signed").status_code == 200

    block = (
        b'<PublicAccessBlockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<BlockPublicAcls>false</BlockPublicAcls></PublicAccessBlockConfiguration>"
    )
    v2.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    create = v2.generate_presigned_url("create_bucket", Params={"Bucket": bucket})
    assert web.put(create + "&publicAccessBlock", content=block).status_code == 403
    config = v2.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert config["BlockPublicAcls"] is True

    # boto3's own SigV2 header signatures of these operations still hold.
    v2.put_object_legal_hold(Bucket=bucket, Key="k", LegalHold={"Status": "ON"})
    assert v2.get_object_legal_hold(Bucket=bucket, Key="k")["LegalHold"]["Status"] == "ON"
    v2.put_object_legal_hold(Bucket=bucket, Key="k", LegalHold={"Status": "OFF"})


def test_every_flag_that_names_an_operation_is_signed_by_a_sigv2_presigned_url() -> None:
    """The flags `operations.py` routes on are all among what a presigned SigV2 URL signs,
    so a new operation's flag cannot be added to an old URL unseen."""
    from gateway.s3 import sigv2
    from gateway.s3.operations import SUBRESOURCES

    assert SUBRESOURCES <= sigv2.SUBRESOURCES | sigv2.OPERATION_FLAGS


def test_a_missing_key_is_told_only_to_whoever_may_list(
    local_server: LiveServer, s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    """A reader granted s3:GetObject (and s3:GetObjectAttributes) but not s3:ListBucket
    learns of a missing key only `403 AccessDenied`, by GetObject, HeadObject,
    GetObjectAttributes, a partNumber read or a RenameObject's source, as AWS documents
    it; with s3:ListBucket, `404 NoSuchKey`."""
    org, theirs = other
    bucket = _bucket(s3, "rv38-miss")
    s3.put_object(Bucket=bucket, Key="here", Body=b"x")
    reads = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": ["s3:GetObject", "s3:GetObjectAttributes"],
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    writes = {
        "Effect": "Allow",
        "Principal": {"AWS": [org]},
        "Action": ["s3:PutObject", "s3:DeleteObject"],
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, reads, writes))
    asked = ["ObjectSize"]
    for client in (anonymous, theirs):
        assert client.get_object(Bucket=bucket, Key="here")["Body"].read() == b"x"
        assert _failed(client.get_object, Bucket=bucket, Key="gone")[0] == 403
        assert _failed(client.head_object, Bucket=bucket, Key="gone")[0] == 403
        assert _failed(client.get_object, Bucket=bucket, Key="gone", PartNumber=1)[0] == 403
        assert (
            _failed(
                client.get_object_attributes, Bucket=bucket, Key="gone", ObjectAttributes=asked
            )[0]
            == 403
        )
    assert _rename(theirs, bucket, "dest", f"{bucket}/gone") == 403
    lists = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:ListBucket",
        "Resource": f"arn:aws:s3:::{bucket}",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, reads, writes, lists))
    for client in (anonymous, theirs):
        assert _failed(client.get_object, Bucket=bucket, Key="gone") == (404, "NoSuchKey")
        assert _failed(
            client.get_object_attributes, Bucket=bucket, Key="gone", ObjectAttributes=asked
        ) == (404, "NoSuchKey")


def _v4_raw_put(
    live: LiveServer, credentials: tuple[str, str], path: str, signed: bytes, sent: bytes
) -> Any:
    """A SigV4 PUT whose `content-disposition` is signed as `signed` and sent as `sent`
    (bytes that need not be UTF-8), its canonical request written out here."""
    from datetime import UTC, datetime

    from gateway.s3 import sigv4

    access, secret = credentials
    amz = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    host = live.s3_url.removeprefix("http://").encode()
    headers = [
        (b"content-disposition", signed),
        (b"host", host),
        (b"x-amz-content-sha256", b"UNSIGNED-PAYLOAD"),
        (b"x-amz-date", amz.encode()),
    ]
    canonical = b"\n".join(
        [
            b"PUT",
            path.encode(),
            b"",
            b"".join(k + b":" + v + b"\n" for k, v in headers),
            b";".join(k for k, _ in headers),
            b"UNSIGNED-PAYLOAD",
        ]
    )
    credential = sigv4.Credential(access, amz[:8], "us-east-1", "s3")
    to_sign = f"AWS4-HMAC-SHA256\n{amz}\n{credential.scope}\n" + (
        hashlib.sha256(canonical).hexdigest()
    )
    signature = sigv4.sign(sigv4.signing_key(secret, credential), to_sign)
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={access}/{credential.scope}, "
        "SignedHeaders=content-disposition;host;x-amz-content-sha256;x-amz-date, "
        f"Signature={signature}"
    )
    sent_headers = [(b"content-disposition", sent), *headers[2:]]
    return web.put(
        live.s3_url + path,
        content=b"x",
        headers=[*sent_headers, (b"authorization", authorization.encode())],
    )


def test_header_bytes_that_are_not_utf8_never_sign_alike(local_server: LiveServer, s3: Any) -> None:
    """Holds: the canonical request holds a header's bytes as sent, so a signature over one
    byte that is not UTF-8 is not one over another (both would read as U+FFFD if decoded
    leniently): the altered request is SignatureDoesNotMatch; the signed one is served."""
    bucket = _bucket(s3, "rv38-raw")
    credentials = local_server.s3_credentials()
    signed, altered = b"attachment; filename=\xe9", b"attachment; filename=\xe8"
    forged = _v4_raw_put(local_server, credentials, f"/{bucket}/k", signed, altered)
    assert (forged.status_code, "SignatureDoesNotMatch" in forged.text) == (403, True)
    assert _failed(s3.head_object, Bucket=bucket, Key="k")[0] == 404
    honest = _v4_raw_put(local_server, credentials, f"/{bucket}/k", signed, signed)
    assert honest.status_code in (200, 400), honest.text


def test_an_anonymous_post_is_decided_on_the_key_its_filename_makes(
    local_server: LiveServer, s3: Any
) -> None:
    """Holds: `${filename}` is put in the key before the access decision, so a policy that
    lets anyone POST under `uploads/` does not let a form whose key is `${filename}` write
    elsewhere by its file's name, nor an `acl` field make the upload public."""
    bucket = _bucket(s3, "rv38-post")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{bucket}/uploads/*",
            },
        ),
    )
    url = f"{local_server.s3_url}/{bucket}"

    def post(key: str, filename: str, **extra: str) -> int:
        files = {"file": (filename, b"posted", "text/plain")}
        return web.post(url, data={"key": key, **extra}, files=files).status_code

    assert post("${filename}", "top.txt") == 403
    assert post("${filename}", "uploads/ok.txt") == 204
    assert post("uploads/${filename}", "a.txt", acl="public-read") == 403
    assert post("uploads/${filename}", "a.txt") == 204
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["uploads/a.txt", "uploads/ok.txt"]
    assert _groups(s3.get_object_acl(Bucket=bucket, Key="uploads/a.txt")["Grants"]) == []


def test_a_key_scoped_to_another_bucket_reaches_none_of_the_new_operations(
    local_server: LiveServer, s3: Any
) -> None:
    """Holds: a key restricted to one bucket gets NoSuchBucket from every operation issue
    38 added or changed on another bucket of its own organization: GetObjectAttributes,
    partNumber reads, ACL grants, ownership controls, the listing of buckets."""
    bucket, elsewhere = _bucket(s3, "rv38-scope"), _bucket(s3, "rv38-other")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    scoped = local_server.s3(
        *local_server.s3_credentials(
            None, "buckets:read,buckets:write,files:read,files:write", "--bucket", elsewhere
        )
    )
    org = _org_id(s3)
    attempts = [
        (scoped.get_object_attributes, {"Key": "k", "ObjectAttributes": ["ETag"]}),
        (scoped.get_object, {"Key": "k", "PartNumber": 1}),
        (scoped.put_object_acl, {"Key": "k", "GrantRead": f"id={org}"}),
        (scoped.put_bucket_acl, {"GrantRead": f"id={org}"}),
        (scoped.get_bucket_ownership_controls, {}),
        (
            scoped.put_bucket_ownership_controls,
            {"OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}},
        ),
    ]
    for call, extra in attempts:
        assert _failed(call, Bucket=bucket, **extra) == (404, "NoSuchBucket")
    assert [b["Name"] for b in scoped.list_buckets(Prefix="rv38-")["Buckets"]] == [elsewhere]


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
    bucket = _bucket(s3, "rv38-tags")
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
    assert _failed(s3.head_object, Bucket=bucket, Key="posted")[0] == 404


def test_a_bucket_created_with_acls_off_takes_no_grant(s3: Any, other: tuple[str, Any]) -> None:
    """Holds: CreateBucket with BucketOwnerEnforced and a grant header is refused, as on AWS
    (InvalidBucketAclWithObjectOwnership), so no grant waits in it for ACLs to come back."""
    org, _ = other
    name = unique_name("rv38-enf")
    assert _failed(
        s3.create_bucket, Bucket=name, ObjectOwnership="BucketOwnerEnforced", GrantRead=f"id={org}"
    ) == (400, "InvalidBucketAclWithObjectOwnership")
    assert _failed(s3.head_bucket, Bucket=name)[0] == 404


def test_acl_and_ownership_operations_need_their_scopes(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: a files:read key sets no object ACL (by PutObjectAcl or a grant header on a
    write it may not make), a key without buckets:write sets no bucket ACL nor ownership
    controls, and a grantee's key without files:write uses no WRITE_ACP it was given."""
    org, _ = other
    bucket = _bucket(s3, "rv38-scopes")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    reader = local_server.s3(*local_server.s3_credentials(None, "buckets:read,files:read"))
    writer = local_server.s3(*local_server.s3_credentials(None, "buckets:read,files:write"))
    assert _failed(reader.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={org}")[0] == 403
    assert _failed(writer.put_bucket_acl, Bucket=bucket, GrantRead=f"id={org}")[0] == 403
    controls = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert (
        _failed(writer.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls=controls)[0]
        == 403
    )
    assert len(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == 1
    s3.put_object_acl(
        Bucket=bucket, Key="k", AccessControlPolicy=_acl(s3, [_user(org, "WRITE_ACP")])
    )
    narrow = local_server.s3(*local_server.s3_credentials(org, "files:read"))
    assert _failed(narrow.put_object_acl, Bucket=bucket, Key="k", GrantRead=f"id={org}")[0] == 403
    assert len(s3.get_object_acl(Bucket=bucket, Key="k")["Grants"]) == 1
