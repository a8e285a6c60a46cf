"""SSE-C on multipart uploads and POST forms (issue 37 point 2), through boto3 and the aws
CLI against the real S3 listener, on both backends: the upload keeps only what verifies its
customer key, every part, part copy and the completion must give that key (400 without it
or with another, as S3 answers a part whose encryption parameters differ), each part is
sealed on its way to the part store, the object reads back only with the key, and no
plaintext byte is left in the data dir, the index or the cluster."""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from storage import encryption
from tests.support import web
from tests.support.commands import aws
from tests.support.live import LiveServer
from tests.support.sealed import (
    content,
    found_in_cluster,
    found_in_part_store,
    found_on_disk,
    marker,
)

MIB = 1024 * 1024


def _sse(key: bytes, prefix: str = "") -> dict[str, Any]:
    return {f"{prefix}SSECustomerAlgorithm": "AES256", f"{prefix}SSECustomerKey": key}


def _encoded(key: bytes) -> dict[str, Any]:
    """The key as sent on the wire: botocore encodes it only for the operations that read
    or write content, not for ListParts."""
    return {
        "SSECustomerAlgorithm": "AES256",
        "SSECustomerKey": base64.b64encode(key).decode(),
        "SSECustomerKeyMD5": _md5(key),
    }


def _md5(key: bytes) -> str:
    return base64.b64encode(hashlib.md5(key).digest()).decode()


def _error(call: Callable[[], object]) -> tuple[int, str]:
    with pytest.raises(ClientError) as caught:
        call()
    response: Any = caught.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def _no_plaintext(
    server: LiveServer, request: pytest.FixtureRequest, bucket: str, sign: bytes
) -> None:
    assert found_on_disk(server.data_dir, sign) == []
    if server.backend == "s3":
        seaweed = request.getfixturevalue("seaweed")
        assert found_in_cluster(seaweed, bucket, sign) == []
        assert found_in_part_store(seaweed, sign) == []


def _no_key_in_index(server: LiveServer, key: bytes, bucket: str, upload_id: str = "") -> None:
    """Neither the key nor its MD5 in the index's envelopes: an upload's row and its parts'
    while it waits (`upload_id`), the bucket's files' once completed."""
    queries = [
        (
            "SELECT encryption FROM files WHERE encryption IS NOT NULL AND bucket_id = "
            "(SELECT id FROM buckets WHERE name = ?)",
            bucket,
        )
    ]
    if upload_id:
        queries = [
            (f"SELECT encryption FROM {table} WHERE upload_id = ?", upload_id)
            for table in ("multipart_uploads", "multipart_parts")
        ]
    with sqlite3.connect(server.data_dir / "index.db") as db:
        stored = [str(row[0]) for sql, arg in queries for row in db.execute(sql, (arg,))]
    assert stored and all(encryption.Envelope.decode(text).algorithm == "SSE-C" for text in stored)
    joined = "".join(stored)
    assert base64.b64encode(key).decode() not in joined and _md5(key) not in joined
    assert key.hex() not in joined


def test_an_sse_c_multipart_upload_needs_its_key_on_every_part_and_reads_back_with_it(
    server: LiveServer, request: pytest.FixtureRequest
) -> None:
    s3: Any = server.s3()
    bucket = f"ssec-mpu-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    sign = marker()
    key, other, source_key = os.urandom(32), os.urandom(32), os.urandom(32)
    first = content(sign, 5 * MIB)
    sealed_source = content(sign, 5 * MIB + 3)
    plain_source = os.urandom(200_000)
    s3.put_object(Bucket=bucket, Key="sealed-src", Body=sealed_source, **_sse(source_key))
    s3.put_object(Bucket=bucket, Key="plain-src", Body=plain_source)

    created = s3.create_multipart_upload(Bucket=bucket, Key="big", **_sse(key))
    assert (created["SSECustomerAlgorithm"], created["SSECustomerKeyMD5"]) == ("AES256", _md5(key))
    assert "ServerSideEncryption" not in created
    upload = {"Bucket": bucket, "Key": "big", "UploadId": created["UploadId"]}

    # A part without the key, or under another, is refused and nothing is stored.
    refused = (400, "InvalidRequest")
    assert _error(lambda: s3.upload_part(**upload, PartNumber=1, Body=first)) == refused
    assert _error(lambda: s3.upload_part(**upload, PartNumber=1, Body=first, **_sse(other))) == (
        refused
    )
    assert s3.list_parts(**upload).get("Parts", []) == []

    part1 = s3.upload_part(**upload, PartNumber=1, Body=first, **_sse(key))
    assert part1["SSECustomerKeyMD5"] == _md5(key)
    assert part1["ETag"] != f'"{hashlib.md5(first).hexdigest()}"'  # S3: not the plaintext's MD5
    again = s3.upload_part(**upload, PartNumber=1, Body=first, **_sse(key))
    assert again["ETag"] == part1["ETag"]  # a retried part completes with either answer's
    _no_plaintext(server, request, bucket, sign)  # the waiting part is sealed

    # UploadPartCopy: the SSE-C source opens with its own key; the part takes the upload's.
    copy_source = {"CopySource": f"{bucket}/sealed-src", **upload, "PartNumber": 2}
    without = _error(lambda: s3.upload_part_copy(**copy_source, **_sse(key)))
    assert without == refused
    no_target = _error(lambda: s3.upload_part_copy(**copy_source, **_sse(source_key, "CopySource")))
    assert no_target == refused  # the source's key given, the upload's not
    wrong = _error(
        lambda: s3.upload_part_copy(**copy_source, **_sse(key), **_sse(key, "CopySource"))
    )
    assert wrong == (403, "AccessDenied")  # another source key: as CopyObject answers
    part2 = s3.upload_part_copy(**copy_source, **_sse(key), **_sse(source_key, "CopySource"))
    assert part2["SSECustomerKeyMD5"] == _md5(key)
    part3 = s3.upload_part_copy(
        **upload,
        PartNumber=3,
        CopySource=f"{bucket}/plain-src",
        CopySourceRange="bytes=100-149999",
        **_sse(key),
    )
    _no_key_in_index(server, key, bucket, created["UploadId"])  # the upload keeps a verifier only
    # ListParts reads no content: S3 asks no key for it (one given is checked all the same).
    listed = s3.list_parts(**upload)["Parts"]
    assert s3.list_parts(**upload, **_encoded(key))["Parts"] == listed
    assert _error(lambda: s3.list_parts(**upload, **_encoded(other))) == refused
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [
        (1, 5 * MIB),
        (2, len(sealed_source)),
        (3, 149_900),
    ]

    etags = [part1["ETag"], part2["CopyPartResult"]["ETag"], part3["CopyPartResult"]["ETag"]]
    parts = {"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]}
    # The completion seals the object anew under the key: it must be given, and be the same.
    assert _error(lambda: s3.complete_multipart_upload(**upload, MultipartUpload=parts)) == refused
    assert _error(
        lambda: s3.complete_multipart_upload(**upload, MultipartUpload=parts, **_sse(other))
    ) == (refused)
    done = s3.complete_multipart_upload(**upload, MultipartUpload=parts, **_sse(key))
    assert "ServerSideEncryption" not in done
    # The completion confirms the customer's algorithm and key MD5 in its headers, as AWS's
    # documentation of CompleteMultipartUpload has it (botocore's model parses neither).
    sent = done["ResponseMetadata"]["HTTPHeaders"]
    md5 = base64.b64encode(hashlib.md5(key).digest()).decode()
    assert (
        sent["x-amz-server-side-encryption-customer-algorithm"],
        sent["x-amz-server-side-encryption-customer-key-md5"],
    ) == ("AES256", md5)
    joined = b"".join(bytes.fromhex(e.strip('"')) for e in etags)
    assert done["ETag"] == f'"{hashlib.md5(joined).hexdigest()}-3"'

    body = first + sealed_source + plain_source[100:150_000]
    plain_etag = hashlib.md5(
        b"".join(hashlib.md5(p).digest() for p in (first, sealed_source, plain_source[100:150_000]))
    ).hexdigest()
    assert done["ETag"] != f'"{plain_etag}-3"'  # nothing of the plaintext in the ETag
    head = s3.head_object(Bucket=bucket, Key="big", **_sse(key))
    assert (head["ContentLength"], head["ETag"]) == (len(body), done["ETag"])
    got = s3.get_object(Bucket=bucket, Key="big", **_sse(key))
    assert got["SSECustomerKeyMD5"] == _md5(key)
    assert got["Body"].read() == body
    for start, end in [(5 * MIB - 10, 5 * MIB + 9), (10 * MIB - 5, 10 * MIB + 70_000)]:
        ranged = s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={start}-{end}", **_sse(key))
        assert ranged["Body"].read() == body[start : end + 1]
    for number, part in enumerate((first, sealed_source, plain_source[100:150_000]), 1):
        by_part = s3.get_object(Bucket=bucket, Key="big", PartNumber=number, **_sse(key))
        assert (by_part["ETag"], by_part["PartsCount"]) == (done["ETag"], 3)
        assert by_part["Body"].read() == part
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="big")) == refused
    assert _error(lambda: s3.head_object(Bucket=bucket, Key="big", PartNumber=1))[0] == 400
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="big", **_sse(other)))[0] == 403

    _no_plaintext(server, request, bucket, sign)
    _no_key_in_index(server, key, bucket)


def test_a_customer_key_is_refused_where_the_upload_was_made_without_one(
    local_server: LiveServer,
) -> None:
    s3: Any = local_server.s3()
    bucket = f"ssec-mpu-no-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    key = os.urandom(32)
    for asked in ({}, {"ServerSideEncryption": "AES256"}):
        created = s3.create_multipart_upload(Bucket=bucket, Key="k", **asked)
        upload = {"Bucket": bucket, "Key": "k", "UploadId": created["UploadId"]}
        part = _error(partial(s3.upload_part, **upload, PartNumber=1, Body=b"x", **_sse(key)))
        assert part == (400, "InvalidRequest")
        etag = s3.upload_part(**upload, PartNumber=1, Body=b"x")["ETag"]
        parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
        complete = partial(s3.complete_multipart_upload, **upload, MultipartUpload=parts)
        done = _error(partial(complete, **_sse(key)))
        assert done == (400, "InvalidRequest")
        s3.complete_multipart_upload(**upload, MultipartUpload=parts)
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    both = _error(
        lambda: s3.create_multipart_upload(
            Bucket=bucket, Key="both", ServerSideEncryption="AES256", **_sse(key)
        )
    )
    assert both == (400, "InvalidArgument")


def test_a_post_form_upload_is_sealed_under_the_customer_key_of_its_fields(
    server: LiveServer, request: pytest.FixtureRequest
) -> None:
    s3: Any = server.s3()
    bucket = f"ssec-post-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    sign = marker()
    body = content(sign, 100_000)
    key = os.urandom(32)
    fields = {
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": base64.b64encode(key).decode(),
        "x-amz-server-side-encryption-customer-key-md5": _md5(key),
    }
    conditions: list[Any] = [{name: value} for name, value in fields.items()]
    post = s3.generate_presigned_post(
        Bucket=bucket, Key="form", Fields=fields, Conditions=conditions
    )
    answer = web.post(post["url"], data=post["fields"], files={"file": ("f", body, "text/plain")})
    assert answer.status_code == 204, answer.text
    assert answer.headers["x-amz-server-side-encryption-customer-key-md5"] == _md5(key)
    assert answer.headers["etag"] != f'"{hashlib.md5(body).hexdigest()}"'

    assert s3.get_object(Bucket=bucket, Key="form", **_sse(key))["Body"].read() == body
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="form")) == (400, "InvalidRequest")
    _no_plaintext(server, request, bucket, sign)

    # A key whose MD5 does not match is refused before anything is stored.
    bad = fields | {"x-amz-server-side-encryption-customer-key-md5": _md5(os.urandom(32))}
    post = s3.generate_presigned_post(
        Bucket=bucket, Key="bad", Fields=bad, Conditions=[{k: v} for k, v in bad.items()]
    )
    refused = web.post(post["url"], data=post["fields"], files={"file": ("f", b"x", "text/plain")})
    assert refused.status_code == 400 and "InvalidArgument" in refused.text
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["form"]


def test_the_aws_cli_uploads_and_copies_a_large_file_with_sse_c_in_parts(
    local_server: LiveServer, tmp_path: Path
) -> None:
    credentials = local_server.s3_credentials()
    bucket = f"ssec-mcli-{os.urandom(5).hex()}"
    (tmp_path / "key.bin").write_bytes(os.urandom(32))
    (tmp_path / "copy.bin").write_bytes(os.urandom(32))
    sse_c = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{tmp_path / 'key.bin'}"]
    copy_c = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{tmp_path / 'copy.bin'}"]
    from_c = ["--sse-c-copy-source", "AES256"]
    from_c += ["--sse-c-copy-source-key", f"fileb://{tmp_path / 'key.bin'}"]
    source = tmp_path / "large.bin"
    sign = marker()
    body = content(sign, 9 * MIB)  # past the CLI's 8 MiB multipart threshold
    source.write_bytes(body)
    assert aws(local_server, credentials, "s3", "mb", f"s3://{bucket}").returncode == 0

    put = aws(local_server, credentials, "s3", "cp", *sse_c, str(source), f"s3://{bucket}/l")
    assert put.returncode == 0, put.stderr
    copied = aws(
        local_server,
        credentials,
        "s3",
        "cp",
        *from_c,
        *copy_c,
        f"s3://{bucket}/l",
        f"s3://{bucket}/c",
    )
    assert copied.returncode == 0, copied.stderr
    s3: Any = local_server.s3()
    for name, key_file in (("l", "key.bin"), ("c", "copy.bin")):
        key = (tmp_path / key_file).read_bytes()
        head = s3.head_object(Bucket=bucket, Key=name, **_sse(key))
        assert head["ETag"].strip('"').endswith("-2")  # made in parts (UploadPartCopy for c)
    back = tmp_path / "back.bin"
    got = aws(local_server, credentials, "s3", "cp", *copy_c, f"s3://{bucket}/c", str(back))
    assert got.returncode == 0 and back.read_bytes() == body
    assert found_on_disk(local_server.data_dir, sign) == []


@pytest.mark.slow  # a server of its own, started three times
def test_sigkill_inside_an_sse_c_completion_leaves_the_upload_to_complete_with_its_key(
    tmp_path: Path,
) -> None:
    """Killed inside the commit of an SSE-C completion: after a restart the upload is still
    there (its parts still sealed, its verifier still asking the key), completing it again
    with the key gives the object, `check --deep` is consistent, and no plaintext is on
    disk. The other kill points are SSE-S3's test's (tests/test_s3_encryption_multipart.py):
    the completion's path past the key check is the same."""
    sign = marker()
    first, last = content(sign, 5 * MIB), content(sign, 30_000)
    key = os.urandom(32)
    live = LiveServer(tmp_path / "data", durable=True)
    live.start()
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="crash")
        created = s3.create_multipart_upload(Bucket="crash", Key="k", **_sse(key))
        upload = {"Bucket": "crash", "Key": "k", "UploadId": created["UploadId"]}
        etags = [
            s3.upload_part(**upload, PartNumber=n, Body=body, **_sse(key))["ETag"]
            for n, body in ((1, first), (2, last))
        ]
    finally:
        live.stop()
    parts = {"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]}
    live.env["BUCKETD_FAULTS"] = "put.in_commit=kill"
    live.start()
    with pytest.raises(Exception):  # noqa: B017 (the server dies mid-request)
        live.s3().complete_multipart_upload(**upload, MultipartUpload=parts, **_sse(key))
    live.kill()
    del live.env["BUCKETD_FAULTS"]
    live.start()
    try:
        s3 = live.s3()
        assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="crash")["Uploads"]] == [
            upload["UploadId"]
        ]
        no_key = _error(lambda: s3.complete_multipart_upload(**upload, MultipartUpload=parts))
        assert no_key == (400, "InvalidRequest")
        s3.complete_multipart_upload(**upload, MultipartUpload=parts, **_sse(key))
        assert s3.get_object(Bucket="crash", Key="k", **_sse(key))["Body"].read() == first + last
    finally:
        live.stop()
    assert live.cli("check", "--deep").strip().endswith("consistent")
    assert found_on_disk(live.data_dir, sign) == []
