"""The S3 dispatch table and docs/s3.md name the same operations, supported and refused;
a request finds its operation as S3 decides it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.s3.errors import S3Error
from gateway.s3.operations import OPERATIONS, UNSUPPORTED_SUBRESOURCES, operation_for

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
    ],
)
def test_requests_find_their_operation(
    method: str, bucket: str | None, key: str | None, params: dict[str, str], copy: bool, name: str
) -> None:
    assert operation_for(method, bucket, key, params, copy).name == name


@pytest.mark.parametrize(
    ("method", "bucket", "key", "params"),
    [
        ("PUT", "b", None, {"versioning": ""}),
        ("GET", "b", "k", {"tagging": ""}),
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
