"""A hostile review of what issue 38 added on objects and buckets (RenameObject,
GetObjectAttributes, partNumber reads, repeated completions, CreateBucket's us-east-1 200,
ListBuckets pagination, the 403 or 404 of a missing key), attacked through the real shared
server as another organization, an anonymous client or a narrower key would. Each test is
an attack that held, or a hole fixed with it (tests/test_review38.py holds the ACL and
policy attacks, tests/test_review38_signatures.py the signatures')."""

from __future__ import annotations

import base64
import hashlib
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


def test_rename_needs_read_and_delete_of_the_source_in_the_same_bucket(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: a bucket WRITE grant (PutObject and DeleteObject) does not let another
    organization rename an object it may not read, nor a read grant one it may not
    delete (a Deny on s3:DeleteObject holds for the owner too); a source in another bucket, even the
    caller's own, is refused; a files:read key renames nothing; a key scoped to another
    bucket does not find this one."""
    org, theirs = other
    bucket = s3_bucket(s3, "rv38-ren")
    s3.put_object(Bucket=bucket, Key="secret", Body=b"s")
    s3.put_bucket_acl(Bucket=bucket, AccessControlPolicy=acl_body(s3, [user_grant(org, "WRITE")]))
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
    elsewhere = s3_bucket(s3, "rv38-else")
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
    bucket = s3_bucket(s3, "rv38-attr")
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
        failure(theirs.get_object_attributes, Bucket=bucket, Key="k", ObjectAttributes=asked)[0]
        == 403
    )
    key = os.urandom(32)
    sse = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    s3.put_object(Bucket=bucket, Key="sealed", Body=b"sealed", **sse)
    assert (
        failure(s3.get_object_attributes, Bucket=bucket, Key="sealed", ObjectAttributes=asked)[0]
        == 400
    )
    assert failure(s3.head_object, Bucket=bucket, Key="sealed", PartNumber=1)[0] == 400
    assert failure(s3.get_object, Bucket=bucket, Key="sealed", PartNumber=1)[0] == 400
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
    bucket = s3_bucket(s3, "rv38-done")
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
    assert failure(s3.create_bucket, Bucket=shared, ACL="public-read") == (
        409,
        "BucketAlreadyExists",
    )
    s3.create_bucket(Bucket=shared)
    s3.put_object(Bucket=shared, Key="k", Body=b"mine")
    assert theirs.get_object(Bucket=shared, Key="k")["Body"].read() == b"theirs"
    assert failure(s3.create_bucket, Bucket=shared, ACL="public-read") == (
        409,
        "BucketAlreadyExists",
    )
    assert group_uris(s3.get_bucket_acl(Bucket=shared)["Grants"]) == []
    mine = s3_bucket(s3, "rv38-mine")
    s3.create_bucket(Bucket=mine, ACL="authenticated-read")
    assert group_uris(s3.get_bucket_acl(Bucket=mine)["Grants"]) == []
    scoped = local_server.s3(
        *local_server.s3_credentials(None, "buckets:read,buckets:write", "--bucket", mine)
    )
    assert failure(scoped.create_bucket, Bucket=mine)[0] == 403


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
    assert failure(anonymous.list_buckets, ContinuationToken=token)[0] == 403


def test_a_missing_key_is_told_only_to_whoever_may_list(
    local_server: LiveServer, s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    """A reader granted s3:GetObject (and s3:GetObjectAttributes) but not s3:ListBucket
    learns of a missing key only `403 AccessDenied`, by GetObject, HeadObject,
    GetObjectAttributes, a partNumber read or a RenameObject's source, as AWS documents
    it; with s3:ListBucket, `404 NoSuchKey`."""
    org, theirs = other
    bucket = s3_bucket(s3, "rv38-miss")
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
        assert failure(client.get_object, Bucket=bucket, Key="gone")[0] == 403
        assert failure(client.head_object, Bucket=bucket, Key="gone")[0] == 403
        assert failure(client.get_object, Bucket=bucket, Key="gone", PartNumber=1)[0] == 403
        assert (
            failure(
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
        assert failure(client.get_object, Bucket=bucket, Key="gone") == (404, "NoSuchKey")
        assert failure(
            client.get_object_attributes, Bucket=bucket, Key="gone", ObjectAttributes=asked
        ) == (404, "NoSuchKey")


def test_a_key_scoped_to_another_bucket_reaches_none_of_the_new_operations(
    local_server: LiveServer, s3: Any
) -> None:
    """Holds: a key restricted to one bucket gets NoSuchBucket from every operation issue
    38 added or changed on another bucket of its own organization: GetObjectAttributes,
    partNumber reads, ACL grants, ownership controls, the listing of buckets."""
    bucket, elsewhere = s3_bucket(s3, "rv38-scope"), s3_bucket(s3, "rv38-other")
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    scoped = local_server.s3(
        *local_server.s3_credentials(
            None, "buckets:read,buckets:write,files:read,files:write", "--bucket", elsewhere
        )
    )
    org = org_id(s3)
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
        assert failure(call, Bucket=bucket, **extra) == (404, "NoSuchBucket")
    assert [b["Name"] for b in scoped.list_buckets(Prefix="rv38-")["Buckets"]] == [elsewhere]
