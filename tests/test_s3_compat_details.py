"""Details a compatibility suite trips on (issue 38): Content-Encoding with `aws-chunked` over
a plain body, the delete-marker header of a missing key, ListObjects v1's Prefix, and
NoSuchKey for a missing key to whoever may list the bucket."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import code, status


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("cd")
    s3.create_bucket(Bucket=name)
    return name


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("gzip", "gzip"),
        ("deflate, gzip", "deflate, gzip"),
        ("gzip, aws-chunked", "gzip"),
        ("aws-chunked, gzip", "gzip"),
        ("aws-chunked", None),
        ("aws-chunked, aws-chunked", None),
    ],
)
def test_content_encoding_is_stored_less_aws_chunked(
    s3: Any, bucket: str, sent: str, stored: str | None
) -> None:
    """boto3 passes a caller's `aws-chunked` through over a plain, fully signed body: the
    framing is what x-amz-content-sha256 says (STREAMING-*), not what Content-Encoding says."""
    s3.put_object(Bucket=bucket, Key="encoded", Body=b"content", ContentEncoding=sent)
    head = s3.head_object(Bucket=bucket, Key="encoded")
    assert head.get("ContentEncoding") == stored
    assert s3.get_object(Bucket=bucket, Key="encoded")["Body"].read() == b"content"


def test_a_signed_plain_body_named_aws_chunked_is_kept_whole(
    local_server: LiveServer, s3: Any, bucket: str
) -> None:
    body = b"3\r\nabc\r\n0\r\n\r\n"  # looks like framing, but nothing says it is
    url = f"{local_server.s3_url}/{bucket}/plain"
    credentials = Credentials(*local_server.s3_credentials())
    for encoding, stored in (("aws-chunked", None), ("aws-chunked, br", "br")):
        request = AWSRequest("PUT", url, {"Content-Encoding": encoding}, data=body)
        S3SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
        assert request.headers["X-Amz-Content-SHA256"] == hashlib.sha256(body).hexdigest()
        sent = web.put(url, content=body, headers=dict(request.headers))
        assert sent.status_code == 200, sent.text
        got = s3.get_object(Bucket=bucket, Key="plain")
        assert (got["Body"].read(), got.get("ContentEncoding")) == (body, stored)


def _delete_marker_header(s3: Any, bucket: str, key: str) -> str | None:
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key=key)
    assert status(missing.value) == 404
    headers = missing.value.response["ResponseMetadata"]["HTTPHeaders"]
    value: str | None = headers.get("x-amz-delete-marker")
    return value


def test_a_missing_key_says_it_is_no_delete_marker(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="plain", Body=b"x")
    deleted = s3.delete_object(Bucket=bucket, Key="plain")
    assert "DeleteMarker" not in deleted and "VersionId" not in deleted
    assert _delete_marker_header(s3, bucket, "plain") == "false"
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="versioned", Body=b"x")
    marker = s3.delete_object(Bucket=bucket, Key="versioned")
    assert marker["DeleteMarker"] is True
    assert _delete_marker_header(s3, bucket, "versioned") == "true"
    s3.delete_object(Bucket=bucket, Key="versioned", VersionId=marker["VersionId"])
    assert s3.head_object(Bucket=bucket, Key="versioned")["ContentLength"] == 1
    assert _delete_marker_header(s3, bucket, "never-written") == "false"


def test_list_objects_v1_returns_its_prefix_as_sent(s3: Any, bucket: str) -> None:
    """botocore asks every listing for encoding-type=url and decodes v1's Prefix never, as S3
    leaves it unencoded there; v2 and version listings encode it."""
    s3.put_object(Bucket=bucket, Key="line\nbreak", Body=b"x")
    s3.put_object(Bucket=bucket, Key="other", Body=b"x")
    v1 = s3.list_objects(Bucket=bucket, Prefix="line\n")
    assert v1["Prefix"] == "line\n"
    assert [c["Key"] for c in v1["Contents"]] == ["line\nbreak"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="line\n")["Prefix"] == "line\n"
    assert s3.list_object_versions(Bucket=bucket, Prefix="line\n")["Prefix"] == "line\n"
    raw = s3.list_objects(Bucket=bucket, Prefix="a b", EncodingType="url")
    assert raw["Prefix"] == "a b"


def test_a_missing_key_is_404_to_whoever_may_list_and_403_to_others(
    s3: Any, bucket: str, anonymous: Any, other: tuple[str, Any]
) -> None:
    """AWS's rule: a read of a key that does not exist is NoSuchKey to a requester who may
    list the bucket there (the listing would tell), AccessDenied to anyone else."""
    s3.put_object(Bucket=bucket, Key="public/gone", Body=b"x", ACL="public-read")
    s3.delete_object(Bucket=bucket, Key="public/gone")
    with pytest.raises(ClientError) as private:
        anonymous.get_object(Bucket=bucket, Key="public/gone")
    assert (status(private.value), code(private.value)) == (403, "AccessDenied")
    s3.put_bucket_acl(Bucket=bucket, ACL="public-read")
    with pytest.raises(ClientError) as listed:
        anonymous.get_object(Bucket=bucket, Key="public/gone")
    assert (status(listed.value), code(listed.value)) == (404, "NoSuchKey")

    prefixed = unique_name("cd")
    s3.create_bucket(Bucket=prefixed)
    statement = {
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": "s3:ListBucket",
        "Resource": f"arn:aws:s3:::{prefixed}",
        "Condition": {"StringLike": {"s3:prefix": "public/*"}},
    }
    policy = {"Version": "2012-10-17", "Statement": [statement]}
    s3.put_bucket_policy(Bucket=prefixed, Policy=json.dumps(policy))
    _, outsider = other
    with pytest.raises(ClientError) as under:
        outsider.head_object(Bucket=prefixed, Key="public/object")
    assert status(under.value) == 404
    with pytest.raises(ClientError) as elsewhere:
        outsider.head_object(Bucket=prefixed, Key="private/object")
    assert status(elsewhere.value) == 403


def test_an_anonymous_request_for_a_missing_bucket_is_refused_as_for_a_private_one(
    s3: Any, anonymous: Any
) -> None:
    """The deliberate difference of docs/s3.md: an outsider learns nothing of a bucket that
    shares nothing, so a missing bucket and a private one get one answer (anonymous: 403)."""
    private = unique_name("cd")
    s3.create_bucket(Bucket=private)
    answers = []
    for name in (private, unique_name("cd-never")):
        with pytest.raises(ClientError) as refused:
            anonymous.get_object(Bucket=name, Key="foo")
        answers.append((status(refused.value), code(refused.value)))
    assert answers == [(403, "AccessDenied")] * 2
