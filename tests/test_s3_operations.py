"""The S3 dispatch table and docs/s3.md name the same operations, supported and refused;
a request finds its operation as S3 decides it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.s3.errors import S3Error
from gateway.s3.operations import OPERATIONS, SUBRESOURCES, operation_for
from gateway.s3.refusals import UNSUPPORTED_SUBRESOURCES
from tests.support.live import LiveServer

DOCS = (Path(__file__).parent.parent / "docs" / "s3.md").read_text("utf-8")


def _first_column(heading: str) -> list[str]:
    section = DOCS.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \|", section, re.M)
    return [row for row in rows if row not in ("operation", "query flag", "---")]


def test_docs_list_every_supported_operation() -> None:
    documented = {name for row in _first_column("Supported operations") for name in row.split(", ")}
    assert documented == {name for operation in OPERATIONS for name in operation.names}


def test_docs_list_every_refused_query_flag() -> None:
    documented = {row.strip("`") for row in _first_column("Refused operations")}
    assert documented == set(UNSUPPORTED_SUBRESOURCES)


@pytest.mark.parametrize(
    ("method", "bucket", "key", "params", "copy", "name"),
    [
        ("GET", None, None, {}, False, "ListBuckets"),
        ("GET", "b", None, {"list-type": "2"}, False, "ListObjects"),
        ("GET", "b", None, {"location": ""}, False, "GetBucketLocation"),
        ("GET", "b", None, {"uploads": ""}, False, "ListMultipartUploads"),
        ("POST", "b", None, {"delete": ""}, False, "DeleteObjects"),
        ("PUT", "b", "k", {}, False, "PutObject"),
        ("PUT", "b", "k", {}, True, "CopyObject"),
        ("PUT", "b", "k", {"uploadId": "u", "partNumber": "1"}, False, "UploadPart"),
        ("PUT", "b", "k", {"uploadId": "u", "partNumber": "1"}, True, "UploadPartCopy"),
        ("POST", "b", "k", {"uploads": ""}, False, "CreateMultipartUpload"),
        ("POST", "b", "k", {"uploadId": "u"}, False, "CompleteMultipartUpload"),
        ("HEAD", "b", "k", {}, False, "HeadObject"),
        ("PUT", "b", None, {"versioning": ""}, False, "PutBucketVersioning"),
        ("GET", "b", None, {"versions": "", "prefix": "a"}, False, "ListObjectVersions"),
        ("GET", "b", "k", {"versionId": "v"}, False, "GetObject"),
        ("PUT", "b", None, {"object-lock": ""}, False, "PutObjectLockConfiguration"),
        ("GET", "b", "k", {"retention": "", "versionId": "v"}, False, "GetObjectRetention"),
        ("PUT", "b", "k", {"legal-hold": ""}, False, "PutObjectLegalHold"),
    ],
)
def test_requests_find_their_operation(
    method: str, bucket: str | None, key: str | None, params: dict[str, str], copy: bool, name: str
) -> None:
    assert operation_for(method, bucket, key, params, copy).name == name


@pytest.mark.parametrize(
    ("method", "bucket", "key", "params"),
    [
        ("PUT", "b", None, {"website": ""}),
        ("DELETE", "b", None, {"versioning": ""}),
        ("DELETE", "b", "k", {"retention": ""}),
        ("GET", "b", "k", {"torrent": ""}),
        ("GET", "b", None, {"uploads": "", "acl": ""}),
        ("POST", "b", "k", {}),
        ("DELETE", None, None, {}),
    ],
)
def test_the_rest_is_not_implemented(
    method: str, bucket: str | None, key: str | None, params: dict[str, str]
) -> None:
    with pytest.raises(S3Error) as refused:
        operation_for(method, bucket, key, params, False)
    assert refused.value.code == "NotImplemented" and refused.value.status == 501


# Grants that name no organization: refused before anything is made (issue 38 made the
# x-amz-grant-* headers honoured; they were refused with 501 before)


REFUSED = [
    ("put_object", {"GrantRead": 'id="someone"'}),
    ("put_object", {"GrantReadACP": 'id="someone"'}),
    ("put_object", {"GrantWriteACP": 'id="someone"'}),
    ("put_object", {"GrantFullControl": 'id="someone"'}),
    ("copy_object", {"GrantRead": 'id="someone"'}),
    ("create_multipart_upload", {"GrantFullControl": 'id="someone"'}),
    ("create_bucket", {"GrantWrite": 'id="someone"'}),
    ("create_bucket", {"GrantFullControl": 'id="someone"'}),
]


@pytest.fixture(scope="module")
def refusing(local_server: LiveServer) -> tuple[LiveServer, Any]:
    s3 = local_server.s3()
    s3.create_bucket(Bucket="guarded")
    s3.put_object(Bucket="guarded", Key="source", Body=b"source")
    return local_server, s3


@pytest.mark.parametrize(
    ("operation", "extra"), REFUSED, ids=[f"{op}-{next(iter(x))}" for op, x in REFUSED]
)
def test_a_grant_header_naming_nobody_is_refused_and_makes_nothing(
    refusing: tuple[LiveServer, Any], operation: str, extra: dict[str, Any]
) -> None:
    _, s3 = refusing
    if operation == "create_bucket":
        arguments: dict[str, Any] = {"Bucket": "never-made"}
    elif operation == "copy_object":
        arguments = {"Bucket": "guarded", "Key": "never", "CopySource": "guarded/source"}
    elif operation == "put_object":
        arguments = {"Bucket": "guarded", "Key": "never", "Body": b"x"}
    else:
        arguments = {"Bucket": "guarded", "Key": "never"}
    with pytest.raises(ClientError) as refused:
        getattr(s3, operation)(**arguments, **extra)
    assert refused.value.response["Error"]["Code"] == "InvalidArgument"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "never-made" not in names
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="guarded").get("Contents", [])]
    assert keys == ["source"]
    assert not s3.list_multipart_uploads(Bucket="guarded").get("Uploads")


def test_what_asks_for_nothing_more_is_served(refusing: tuple[LiveServer, Any]) -> None:
    _, s3 = refusing
    s3.put_object(Bucket="guarded", Key="private", Body=b"x", ACL="private")
    s3.copy_object(
        Bucket="guarded", Key="copied", CopySource="guarded/source", TaggingDirective="COPY"
    )
    assert s3.get_object(Bucket="guarded", Key="copied")["Body"].read() == b"source"
    for key in ("private", "copied"):
        s3.delete_object(Bucket="guarded", Key=key)


def test_every_operation_flag_is_a_subresource() -> None:
    assert {flag for operation in OPERATIONS for flag in operation.flags} == SUBRESOURCES


VALUE_FLAGS = frozenset({"list-type", "select-type", "x-id"})
"""Query parameters a model's request URI pins to a value (ListObjectsV2's list-type=2,
SelectObjectContent's select-type=2, the SDKs' x-id=Operation): not sub-resources."""


def test_every_query_flag_of_the_s3_model_is_served_or_refused() -> None:
    """Walk the installed botocore's S3 model: a new S3 sub-resource arrives as a failing
    test here, never as a request answered as a listing (issue 32 point 1, in part)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("s3")
    flags = set()
    for name in model.operation_names:
        uri = model.operation_model(name).http["requestUri"]
        if "?" in uri:
            flags |= {part.split("=")[0] for part in uri.split("?", 1)[1].split("&")}
    unclassified = flags - VALUE_FLAGS - SUBRESOURCES - set(UNSUPPORTED_SUBRESOURCES)
    assert unclassified == set()


def test_minios_listen_api_is_not_answered_as_a_listing() -> None:
    with pytest.raises(S3Error) as error:
        operation_for("GET", "b", None, {"events": "s3:ObjectCreated:*", "prefix": ""}, False)
    assert error.value.status == 501


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ({"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}, False),
        ({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/x"}, True),
        ({"ServerSideEncryption": "AES256"}, False),
    ],
)
def test_encryption_bucketd_does_not_do_is_refused_on_writes_and_reads(
    local_server: LiveServer, extra: dict[str, str], refused: bool
) -> None:
    """SSE-C was stored in plain text and read back without the key (issue 32's list);
    issue 37 honours it (tests/test_s3_sse_c.py); SSE-KMS is refused without a keyring."""
    s3: Any = local_server.s3()
    name = f"sse-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="plain", Body=b"p")
    if not refused:
        s3.put_object(Bucket=name, Key="k", Body=b"x", **extra)
        return
    with pytest.raises(ClientError) as error:
        s3.put_object(Bucket=name, Key="k", Body=b"x", **extra)
    assert error.value.response["Error"]["Code"] == "NotImplemented"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=name, Key="k")
    if "SSECustomerKey" in extra:
        with pytest.raises(ClientError) as error:
            s3.get_object(Bucket=name, Key="plain", **extra)
        assert error.value.response["Error"]["Code"] == "NotImplemented"
