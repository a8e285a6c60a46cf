"""Every input of every S3 operation bucketd serves is classified in gateway/s3/members.py
(honoured, refused or ignored by design), as the installed botocore's model names them; a
refused one is answered 501 and changes nothing; docs/s3.md lists the table
(`python -m tests.test_s3_inputs` writes it there)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from gateway.s3.errors import S3Error
from gateway.s3.member_kinds import How
from gateway.s3.members import EVERYWHERE, FORM, OPERATIONS
from gateway.s3.operation import S3Operation
from gateway.s3.operations import OPERATIONS as DISPATCH
from gateway.s3.refusals import _classified, check_form, inputs_of
from gateway.s3.xml import parse
from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3_model import members

ROOT = Path(__file__).resolve().parent.parent
SERVED = [operation for operation in DISPATCH if operation.name != "PostObject"]


def _modelled(operation: S3Operation) -> set[str]:
    return set().union(*(members(name) for name in operation.names))


def test_every_member_of_the_model_is_classified() -> None:
    """A member botocore's model adds to an operation bucketd serves arrives as a failure
    here, never as an input accepted and ignored (issue 32 point 1)."""
    unclassified = {
        operation.name: sorted(_modelled(operation) - set(_classified(operation.names)))
        for operation in SERVED
    }
    assert {name: found for name, found in unclassified.items() if found} == {}


def test_the_table_names_only_what_the_model_has_or_a_vendor_adds() -> None:
    stale = {}
    for operation in SERVED:
        own: dict[str, How] = {}
        for name in operation.names:
            own |= OPERATIONS.get(name, {})
        found = [
            key for key, how in own.items() if key not in _modelled(operation) and not how.vendor
        ]
        if found:
            stale[operation.name] = found
    assert stale == {}
    every = set().union(*(_modelled(operation) for operation in SERVED))
    assert sorted(set(EVERYWHERE) - every) == []


def test_a_refusal_gives_its_reason() -> None:
    for table in (EVERYWHERE, FORM, *OPERATIONS.values()):
        for key, how in table.items():
            assert how.kind == "honoured" or how.why, key


# The checks, as pure functions


def test_an_element_off_the_schema_is_malformed_and_a_refused_one_501() -> None:
    lifecycle = inputs_of(("PutBucketLifecycleConfiguration", "PutBucketLifecycle"))
    rule = (
        "<LifecycleConfiguration><Rule><Status>Enabled</Status>{}</Rule></LifecycleConfiguration>"
    )
    lifecycle.check_body(parse(rule.format("<Expiration><Days>1</Days></Expiration>").encode()))
    for extra, code in [
        ("<Transition/>", "NotImplemented"),  # empty: refused all the same
        ("<Transition><Days>1</Days></Transition>", "NotImplemented"),
        ("<Expiration><Weeks>1</Weeks></Expiration>", "MalformedXML"),
        ("<Colour>red</Colour>", "MalformedXML"),
    ]:
        with pytest.raises(S3Error) as refused:
            lifecycle.check_body(parse(rule.format(extra).encode()))
        assert refused.value.code == code, extra
    with pytest.raises(S3Error) as refused:
        lifecycle.check_body(parse(b"<Lifecycle><Rule/></Lifecycle>"))
    assert refused.value.code == "MalformedXML"


def test_a_value_outside_what_is_taken_is_refused() -> None:
    put = inputs_of(("PutObject",))
    put.refuse({"x-amz-storage-class": "STANDARD", "x-amz-server-side-encryption": "AES256"}, {})
    for header, value in [
        ("x-amz-storage-class", "GLACIER"),
        ("x-amz-server-side-encryption", "aws:kms:dsse"),
        ("x-amz-sdk-checksum-algorithm", "SHA512"),
        ("x-amz-checksum-xxhash64", "AAAAAAAAAAA="),
    ]:
        with pytest.raises(S3Error) as refused:
            put.refuse({header: value}, {})
        assert refused.value.status == 501, header
    create = inputs_of(("CreateBucket",))
    for taken in ("BucketOwnerPreferred", "BucketOwnerEnforced"):
        create.refuse({"x-amz-object-ownership": taken}, {})
    for value, code in (("ObjectWriter", 501), ("Everyone", 400)):
        with pytest.raises(S3Error) as ownership:
            create.refuse({"x-amz-object-ownership": value}, {})
        assert ownership.value.status == code


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"key": "k", "acl": "private", "x-amz-meta-a": "b", "submit": "Upload"}, False),
        ({"x-amz-storage-class": "STANDARD"}, False),
        ({"x-amz-storage-class": "GLACIER"}, True),
        ({"x-amz-website-redirect-location": "/x"}, True),
        ({"x-amz-grant-read": 'uri="x"'}, True),
        ({"x-amz-checksum-crc32": "AAAAAA=="}, False),
        ({"x-amz-checksum-algorithm": "CRC32"}, True),
        ({"x-amz-checksum-xxhash64": "AAAAAAAAAAA="}, True),
        ({"x-amz-server-side-encryption-customer-key": "k"}, False),
        ({"x-amz-server-side-encryption": "aws:kms"}, False),
        ({"x-amz-server-side-encryption": "aws:kms:dsse"}, True),
        ({"x-amz-server-side-encryption-context": "e30="}, True),
        ({"x-amz-something-new": "1"}, True),
    ],
)
def test_post_fields_are_classified_too(fields: dict[str, str], refused: bool) -> None:
    if not refused:
        check_form(fields)
        return
    with pytest.raises(S3Error) as error:
        check_form(fields)
    assert error.value.status == 501


# Every refused member, sent to the real server


def _refused(operation: S3Operation) -> list[tuple[str, How]]:
    modelled = _modelled(operation)
    table = _classified(operation.names)
    return sorted(
        (key, how)
        for key, how in table.items()
        if (how.kind == "refused" or how.values)
        and (key in modelled or how.vendor)
        and not key.endswith("xsi:type")
    )


def _xml(path: str, value: str) -> bytes:
    tags = path.split("/")
    opening = "".join(f"<{tag}>" for tag in tags)
    closing = "".join(f"</{tag}>" for tag in reversed(tags))
    return f'<?xml version="1.0"?>{opening}{value}{closing}'.encode()


def _signed(
    live: LiveServer,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    credentials: tuple[str, str],
) -> dict[str, str]:
    host = live.s3_url.removeprefix("http://")
    request = AWSRequest(method, live.s3_url + path, {"Host": host, **headers}, body)
    S3SigV4Auth(Credentials(*credentials), "s3", "us-east-1").add_auth(request)
    return dict(request.headers)


def _state(s3: Any, bucket: str) -> dict[str, Any]:
    """What a refused request must leave as it was."""

    def read(call: Any, **arguments: Any) -> Any:
        try:
            answer = call(Bucket=bucket, **arguments)
        except ClientError as exc:
            return exc.response["Error"]["Code"]
        answer.pop("ResponseMetadata", None)
        return answer

    versions = read(s3.list_object_versions)
    for entry in versions.get("Versions", []):
        entry.pop("LastModified", None)
    return {
        "buckets": sorted(b["Name"] for b in s3.list_buckets()["Buckets"]),
        "versions": versions,
        "uploads": [u["UploadId"] for u in read(s3.list_multipart_uploads).get("Uploads", [])],
        "object": read(s3.head_object, Key="k"),
        "tags": read(s3.get_object_tagging, Key="k"),
        "retention": read(s3.get_object_retention, Key="k"),
        "hold": read(s3.get_object_legal_hold, Key="k"),
        "acl": read(s3.get_object_acl, Key="k"),
        **{
            name: read(getattr(s3, f"get_{name}"))
            for name in (
                "bucket_versioning",
                "bucket_lifecycle_configuration",
                "bucket_tagging",
                "bucket_cors",
                "bucket_acl",
                "bucket_notification_configuration",
                "object_lock_configuration",
                "public_access_block",
                "bucket_policy",
            )
        },
    }


def test_every_refused_member_is_501_and_changes_nothing(local_server: LiveServer) -> None:
    access, secret = local_server.s3_credentials(
        None, "buckets:read,buckets:write,files:read,files:write,files:bypass-governance"
    )
    s3: Any = local_server.s3(access, secret)
    bucket = unique_name("refused")
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    s3.put_object(Bucket=bucket, Key="k", Body=b"k")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    before = _state(s3, bucket)
    sent = 0
    for operation in SERVED:
        path = {"service": "/", "bucket": f"/{bucket}", "object": f"/{bucket}/k"}[operation.target]
        if operation.name == "CreateBucket":
            path = "/" + unique_name("never")
        for key, how in _refused(operation):
            location, name = key.split(":", 1)
            params = {flag: upload if flag == "uploadId" else "" for flag in operation.flags}
            if operation.name in ("UploadPart", "UploadPartCopy"):
                params["partNumber"] = "1"
            if "list-type" not in params and operation.name == "ListObjectsV2":
                params["list-type"] = "2"
            headers = {"x-amz-copy-source": f"/{bucket}/k"} if operation.copy else {}
            body = b""
            value = (how.known or ("NOT-TAKEN",))[0] if how.values else "x"
            if name.endswith("/Date"):  # a malformed date is 400 before any refusal, as S3's
                value = "2030-01-01T00:00:00Z"
            if location == "header":
                headers[name] = value
            elif location == "query":
                params[name] = value
            else:
                body = _xml(name, value)
                headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
            query = "&".join(f"{k}={v}" if v else k for k, v in sorted(params.items()))
            full = path + ("?" + query if query else "")
            signed = _signed(local_server, operation.method, full, headers, body, (access, secret))
            answer = web.request(
                operation.method, local_server.s3_url + full, headers=signed, content=body
            )
            problem = (operation.name, key, answer.text.split("<Code>")[-1][:200])
            told = operation.method == "HEAD" or "NotImplemented" in answer.text
            assert (answer.status_code, told) == (501, True), problem
            sent += 1
    assert sent > 90  # SSE-C (issue 37) and x-amz-grant-* (issue 38) are honoured now
    assert _state(s3, bucket) == before


# What is honoured now that was ignored before the table


def test_list_buckets_takes_its_prefix_region_and_pages(local_server: LiveServer) -> None:
    access, secret = local_server.s3_credentials()
    s3: Any = local_server.s3(access, secret)
    stem = unique_name("lb")
    names = sorted(f"{stem}-{n}" for n in range(3))
    for name in reversed(names):  # listed by name, as S3 does, not in the order made
        s3.create_bucket(Bucket=name)
    first = s3.list_buckets(Prefix=stem, MaxBuckets=2)
    assert [b["Name"] for b in first["Buckets"]] == names[:2]
    assert first["Prefix"] == stem and first["Buckets"][0]["BucketRegion"]
    rest = s3.list_buckets(Prefix=stem, MaxBuckets=2, ContinuationToken=first["ContinuationToken"])
    assert [b["Name"] for b in rest["Buckets"]] == names[2:] and "ContinuationToken" not in rest
    assert s3.list_buckets(Prefix=stem, BucketRegion="eu-nowhere-1")["Buckets"] == []
    headers = _signed(local_server, "GET", "/?max-buckets=0", {}, b"", (access, secret))
    answer = web.get(local_server.s3_url + "/?max-buckets=0", headers=headers)
    assert answer.status_code == 400 and "InvalidArgument" in answer.text


def test_part_number_reads_every_object_as_one_part(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = unique_name("parts")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"whole")
    one = s3.get_object(Bucket=bucket, Key="k", PartNumber=1)
    assert one["Body"].read() == b"whole" and one["ContentRange"] == "bytes 0-4/5"
    assert "PartsCount" not in one
    assert s3.head_object(Bucket=bucket, Key="k", PartNumber=1)["ContentLength"] == 5
    for arguments, code in [
        ({"PartNumber": 2}, "InvalidPartNumber"),
        ({"PartNumber": 1, "Range": "bytes=0-1"}, "InvalidRequest"),
    ]:
        with pytest.raises(ClientError) as error:
            s3.get_object(Bucket=bucket, Key="k", **arguments)
        assert error.value.response["Error"]["Code"] == code


def _two_part_upload(s3: Any, bucket: str, kind: str) -> tuple[str, list[dict[str, Any]], bytes]:
    first, last = b"a" * (5 * 1024 * 1024), b"tail"
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="k", ChecksumAlgorithm="CRC32", ChecksumType=kind
    )["UploadId"]
    parts = []
    for number, data in ((1, first), (2, last)):
        part = s3.upload_part(
            Bucket=bucket,
            Key="k",
            UploadId=upload,
            PartNumber=number,
            Body=data,
            ChecksumAlgorithm="CRC32",
        )
        parts.append(
            {"PartNumber": number, "ETag": part["ETag"], "ChecksumCRC32": part["ChecksumCRC32"]}
        )
    return upload, parts, first + last


def test_a_completion_is_checked_against_what_it_claims(local_server: LiveServer) -> None:
    """Part checksums, the object's checksum, type and size in CompleteMultipartUpload were
    read as the XML body's own checksum or not at all: each is checked now, and a claim
    that does not hold leaves the upload to retry."""
    import zlib

    s3: Any = local_server.s3()
    bucket = unique_name("claims")
    s3.create_bucket(Bucket=bucket)
    upload, parts, content = _two_part_upload(s3, bucket, "FULL_OBJECT")
    crc = base64.b64encode(zlib.crc32(content).to_bytes(4, "big")).decode()
    wrong_part = [parts[0], {**parts[1], "ChecksumCRC32": "AAAAAA=="}]
    for arguments, code in [
        ({"MultipartUpload": {"Parts": wrong_part}}, "InvalidPart"),
        ({"MultipartUpload": {"Parts": parts}, "ChecksumCRC32": "AAAAAA=="}, "BadDigest"),
        ({"MultipartUpload": {"Parts": parts}, "MpuObjectSize": 7}, "InvalidRequest"),
        ({"MultipartUpload": {"Parts": parts}, "ChecksumType": "COMPOSITE"}, "InvalidRequest"),
        ({"MultipartUpload": {"Parts": parts}, "ChecksumCRC32C": "AAAAAA=="}, "InvalidRequest"),
    ]:
        with pytest.raises(ClientError) as error:
            s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload, **arguments)
        assert error.value.response["Error"]["Code"] == code, arguments
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="k")
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="k",
        UploadId=upload,
        MultipartUpload={"Parts": parts},
        ChecksumCRC32=crc,
        ChecksumType="FULL_OBJECT",
        MpuObjectSize=len(content),
    )
    assert done["ChecksumCRC32"] == crc
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == content


# docs/s3.md lists the table


def _where(operations: list[str]) -> str:
    if len(operations) >= len(SERVED) - 5:
        return "every operation that takes it"
    return ", ".join(sorted(operations))


def _member(key: str) -> str:
    location, name = key.split(":", 1)
    kind = {"headers": "headers", "header": "header", "query": "query", "body": "element"}
    return f"`{name}*` {kind[location]}" if location == "headers" else f"`{name}` {kind[location]}"


def inputs_table() -> str:
    rows: dict[tuple[str, str, str], list[str]] = {}
    for operation in SERVED:
        table = _classified(operation.names)
        for key in sorted(_modelled(operation) | {k for k, h in table.items() if h.vendor}):
            how = table[key]
            if how.kind == "honoured" and not how.values:
                continue
            what = how.kind if not how.values else f"honoured: {', '.join(how.values)} only"
            why = how.why + (f" ({how.vendor}'s)" if how.vendor else "")
            rows.setdefault((_member(key), what, why), []).append(operation.name)
    lines = [
        f"| {member} | {what} | {_where(names)} | {why} |"
        for (member, what, why), names in sorted(rows.items(), key=lambda r: (r[0][1], r[0][0]))
    ]
    for key, how in sorted(FORM.items()):
        if how.kind != "honoured" or how.values:
            what = how.kind if not how.values else f"honoured: {', '.join(how.values)} only"
            lines.append(
                f"| `{key.removeprefix('form:')}` field | {what} | PostObject | {how.why} |"
            )
    return "\n".join(lines)


HEADER = "| input | how | operations | why |\n|---|---|---|---|\n"


def test_the_docs_list_the_table() -> None:
    assert HEADER + inputs_table() + "\n\n" in (ROOT / "docs" / "s3.md").read_text("utf-8")


if __name__ == "__main__":
    doc = ROOT / "docs" / "s3.md"
    text = doc.read_text("utf-8")
    start = text.index(HEADER) + len(HEADER)
    doc.write_text(text[:start] + inputs_table() + text[text.index("\n\n", start) :], "utf-8")
