"""Browser form uploads (S3 POST Object) with policies boto3 signs, sent as a browser sends
them (multipart/form-data, the file last), and the hostile cases: tampered and expired
policies, fields outside the conditions, sizes outside the range, the bucket's own limits."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name
from tests.support.s3 import code, presign, send


@pytest.fixture
def s3(local_server: LiveServer) -> Any:
    """A client that signs POST policies with SigV4 (boto3 signs them with SigV2 by default
    for an endpoint of its own: that is tested too)."""
    return local_server.s3(signature_version="s3v4")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("form")
    s3.create_bucket(Bucket=name)
    return name


def error_code(answer: httpx.Response) -> str:
    return answer.text.split("<Code>")[1].split("</Code>")[0]


@pytest.mark.parametrize("version", ["s3v4", "default"])
def test_a_signed_form_upload_stores_the_file(
    local_server: LiveServer, s3: Any, bucket: str, version: str
) -> None:
    signer = s3 if version == "s3v4" else local_server.s3()
    answer = send(presign(signer, bucket))
    assert answer.status_code == 201, answer.text
    assert (
        "<Key>uploads/cat.jpg</Key>" in answer.text and f"<Bucket>{bucket}</Bucket>" in answer.text
    )
    got = s3.get_object(Bucket=bucket, Key="uploads/cat.jpg")
    assert got["Body"].read() == b"hello"
    assert got["ContentType"] == "image/jpeg"
    assert got["Metadata"] == {"owner": "ana"}
    assert answer.headers["etag"] == got["ETag"]


@pytest.mark.parametrize(
    ("change", "expected", "status"),
    [
        ({"key": "elsewhere/cat.jpg"}, "AccessDenied", 403),  # outside starts-with
        ({"Content-Type": "text/html"}, "AccessDenied", 403),
        ({"x-amz-meta-extra": "1"}, "AccessDenied", 403),  # a field no condition covers
        ({"x-amz-signature": "0" * 64}, "SignatureDoesNotMatch", 403),
        ({"policy": "tampered"}, "SignatureDoesNotMatch", 403),
    ],
)
def test_a_form_outside_its_policy_stores_nothing(
    s3: Any, bucket: str, change: dict, expected: str, status: int
) -> None:
    post = presign(s3, bucket)
    answer = send(post, **change)
    assert answer.status_code == status and error_code(answer) == expected, answer.text
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


@pytest.mark.parametrize(("prefix", "status"), [("", 201), ("AES", 403)])
def test_a_starts_with_condition_on_an_absent_field_holds_only_for_anything(
    s3: Any, bucket: str, prefix: str, status: int
) -> None:
    """`["starts-with", "$field", ""]` allows anything, the field left out included (forms
    that may or may not ask for encryption are signed so); any other prefix needs the field."""
    condition = ["starts-with", "$x-amz-server-side-encryption", prefix]
    answer = send(presign(s3, bucket, conditions=[condition]))
    assert answer.status_code == status, answer.text
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == (1 if status == 201 else 0)


def test_a_policy_with_tampered_conditions_fails_its_signature(s3: Any, bucket: str) -> None:
    post = presign(s3, bucket)
    document = json.loads(base64.b64decode(post["fields"]["policy"]))
    document["conditions"][1] = ["content-length-range", 1, 10**9]
    forged = base64.b64encode(json.dumps(document).encode()).decode()
    answer = send(post, content=b"x" * 200, policy=forged)
    assert error_code(answer) == "SignatureDoesNotMatch"


def test_sizes_outside_the_range_and_the_bucket_limits_are_refused(
    local_server: LiveServer, s3: Any, bucket: str
) -> None:
    post = presign(s3, bucket)
    assert error_code(send(post, content=b"x" * 101)) == "EntityTooLarge"
    assert error_code(send(post, content=b"")) == "EntityTooSmall"
    with local_server.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        http.patch(f"/buckets/{bucket_id}", json={"allowedContentTypes": ["image/png"]})
    refused = send(post)
    assert refused.status_code == 400 and error_code(refused) == "InvalidArgument"
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    expired = presign(s3, bucket, expires=-10)
    assert "expired" in send(expired).text


def test_redirects_and_statuses(s3: Any, bucket: str) -> None:
    redirect = "https://app.example.com/done?x=1"
    post = s3.generate_presigned_post(
        Bucket=bucket,
        Key="r/${filename}",
        Fields={"success_action_redirect": redirect},
        Conditions=[{"success_action_redirect": redirect}, ["starts-with", "$key", "r/"]],
    )
    answer = send(post, filename="a b.txt")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith(
        redirect + "&bucket=" + bucket + "&key=r%2Fa+b.txt&etag="
    )
    plain = s3.generate_presigned_post(Bucket=bucket, Key="plain.txt")
    assert send(plain).status_code == 204
    assert s3.get_object(Bucket=bucket, Key="r/a b.txt")["Body"].read() == b"hello"


def test_anonymous_form_uploads_need_the_buckets_policy(
    s3: Any, bucket: str, local_server: LiveServer
) -> None:
    url = f"{local_server.s3_url}/{bucket}"
    form = {"key": "drop/${filename}", "acl": "private"}
    refused = web.post(url, data=form, files={"file": ("n.txt", b"note", "text/plain")})
    assert refused.status_code == 403 and error_code(refused) == "AccessDenied"
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:PutObject",
        "Resource": f"arn:aws:s3:::{bucket}/drop/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": [statement]}))
    answer = web.post(url, data=form, files={"file": ("n.txt", b"note", "text/plain")})
    assert answer.status_code == 204, answer.text
    assert s3.get_object(Bucket=bucket, Key="drop/n.txt")["Body"].read() == b"note"
    outside = web.post(
        url, data={"key": "other/n.txt"}, files={"file": ("n.txt", b"x", "text/plain")}
    )
    assert error_code(outside) == "AccessDenied"
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="other/n.txt")
    assert code(missing.value) == "404"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"not a form", "MalformedPOSTRequest"),
        (
            b'--xx\r\nContent-Disposition: form-data; name="key"\r\n\r\nk\r\n--xx--\r\n',
            "MalformedPOSTRequest",
        ),
        (
            b'--xx\r\nContent-Disposition: form-data; name="key"\r\n\r\n' + b"k" * 70000,
            "MaxPostPreDataLengthExceeded",
        ),
    ],
)
def test_broken_forms_are_refused(
    local_server: LiveServer, bucket: str, body: bytes, expected: str
) -> None:
    answer = web.post(
        f"{local_server.s3_url}/{bucket}",
        content=body,
        headers={"Content-Type": "multipart/form-data; boundary=xx"},
    )
    assert answer.status_code == 400 and error_code(answer) == expected, answer.text


def test_form_fields_tag_share_and_lock_the_object(local_server: LiveServer, s3: Any) -> None:
    import datetime

    name = unique_name("formlk")
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    until = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    fields = {
        "acl": "public-read",
        "tagging": "<Tagging><TagSet><Tag><Key>team</Key><Value>web</Value></Tag></TagSet>"
        "</Tagging>",
        "x-amz-object-lock-mode": "GOVERNANCE",
        "x-amz-object-lock-retain-until-date": until,
    }
    post = s3.generate_presigned_post(
        Bucket=name, Key="f.txt", Fields=fields, Conditions=[{k: v} for k, v in fields.items()]
    )
    assert send(post).status_code == 204
    assert s3.get_object_tagging(Bucket=name, Key="f.txt")["TagSet"] == [
        {"Key": "team", "Value": "web"}
    ]
    assert web.get(f"{local_server.s3_url}/{name}/f.txt").content == b"hello"  # public-read
    retention = s3.get_object_retention(Bucket=name, Key="f.txt")["Retention"]
    assert retention["Mode"] == "GOVERNANCE"
    grant = s3.generate_presigned_post(
        Bucket=name,
        Key="g.txt",
        Fields={"x-amz-grant-read": 'id="x"'},
        Conditions=[{"x-amz-grant-read": 'id="x"'}],
    )
    refused = send(grant)
    assert refused.status_code == 501 and error_code(refused) == "NotImplemented"
