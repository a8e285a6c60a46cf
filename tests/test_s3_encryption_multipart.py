"""SSE-S3 multipart uploads (issue 37) through the S3 listener, on both backends: an upload
created with `x-amz-server-side-encryption: AES256` stores each part encrypted (no
plaintext byte in the part store, the data dir or the cluster), answers the header on
create, each part and completion, keeps S3's multipart ETag, and the object reads back
whole and in ranges across part boundaries."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support import sealed
from tests.support.commands import aws
from tests.support.live import LiveServer

MIB = 1024 * 1024


def test_an_sse_s3_multipart_upload_is_encrypted_part_by_part_and_reads_back(
    server: LiveServer, request: Any
) -> None:
    s3: Any = server.s3()
    bucket = f"sse-mpu-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    marker = sealed.marker()
    first = sealed.content(marker, 5 * MIB)
    plain_source = os.urandom(5 * MIB)
    sealed_source = sealed.content(marker, 200_000)
    s3.put_object(Bucket=bucket, Key="plain-source", Body=plain_source)
    s3.put_object(
        Bucket=bucket, Key="sealed-source", Body=sealed_source, ServerSideEncryption="AES256"
    )

    created = s3.create_multipart_upload(Bucket=bucket, Key="big", ServerSideEncryption="AES256")
    assert created["ServerSideEncryption"] == "AES256"
    upload = created["UploadId"]
    part1 = s3.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=1, Body=first)
    assert part1["ServerSideEncryption"] == "AES256"
    assert part1["ETag"] == f'"{hashlib.md5(first).hexdigest()}"'  # of the plaintext
    # Mid-upload, the parts waiting in the part store are sealed too.
    assert sealed.found_on_disk(server.data_dir, marker) == []
    part2 = s3.upload_part_copy(
        Bucket=bucket, Key="big", UploadId=upload, PartNumber=2, CopySource=f"{bucket}/plain-source"
    )
    assert part2["ServerSideEncryption"] == "AES256"
    assert part2["CopyPartResult"]["ETag"] == f'"{hashlib.md5(plain_source).hexdigest()}"'
    part3 = s3.upload_part_copy(
        Bucket=bucket,
        Key="big",
        UploadId=upload,
        PartNumber=3,
        CopySource=f"{bucket}/sealed-source",
        CopySourceRange="bytes=1000-150999",
    )
    tail = sealed_source[1000:151_000]
    assert part3["CopyPartResult"]["ETag"] == f'"{hashlib.md5(tail).hexdigest()}"'
    listed = s3.list_parts(Bucket=bucket, Key="big", UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [
        (1, 5 * MIB),
        (2, 5 * MIB),
        (3, len(tail)),
    ]

    etags = [part1["ETag"], part2["CopyPartResult"]["ETag"], part3["CopyPartResult"]["ETag"]]
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="big",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]},
    )
    assert done["ServerSideEncryption"] == "AES256"
    joined = b"".join(bytes.fromhex(e.strip('"')) for e in etags)
    expected_etag = f'"{hashlib.md5(joined).hexdigest()}-3"'
    assert done["ETag"] == expected_etag

    body = first + plain_source + tail
    head = s3.head_object(Bucket=bucket, Key="big")
    assert (head["ServerSideEncryption"], head["ContentLength"]) == ("AES256", len(body))
    assert head["ETag"] == expected_etag
    got = s3.get_object(Bucket=bucket, Key="big")
    assert got["ServerSideEncryption"] == "AES256"
    assert got["Body"].read() == body
    for start, end in [(5 * MIB - 10, 5 * MIB + 9), (10 * MIB - 70_000, 10 * MIB + 70_000)]:
        ranged = s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={start}-{end}")
        assert ranged["Body"].read() == body[start : end + 1]

    # A plaintext upload beside it stays plaintext and says nothing about encryption.
    plain = s3.create_multipart_upload(Bucket=bucket, Key="plain-mpu")
    assert "ServerSideEncryption" not in plain
    answer = s3.upload_part(
        Bucket=bucket, Key="plain-mpu", UploadId=plain["UploadId"], PartNumber=1, Body=b"x"
    )
    assert "ServerSideEncryption" not in answer
    s3.abort_multipart_upload(Bucket=bucket, Key="plain-mpu", UploadId=plain["UploadId"])

    if server.backend == "s3":
        assert sealed.found_in_cluster(request.getfixturevalue("seaweed"), bucket, marker) == []
    assert sealed.found_on_disk(server.data_dir, marker) == []


def test_a_part_file_moved_into_another_parts_place_does_not_complete(
    local_server: LiveServer,
) -> None:
    """Each part is sealed under a key of its own, found through its own row: the sealed
    bytes of part 1 put where part 2's are fail to open, and the upload is not completed
    with wrong bytes."""
    s3: Any = local_server.s3()
    bucket = f"sse-swap-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="k", ServerSideEncryption="AES256")
    upload_id = upload["UploadId"]
    first, second = os.urandom(5 * MIB), os.urandom(5 * MIB)
    etags = [
        s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=n, Body=b)["ETag"]
        for n, b in ((1, first), (2, second))
    ]
    folder = local_server.data_dir / "multipart" / upload_id
    stored = {p.name.split("-")[0]: p for p in folder.iterdir()}
    assert stored["1"].stat().st_size > len(first)  # packages and their tags
    assert first not in stored["1"].read_bytes()[: len(first)]
    stored["2"].write_bytes(stored["1"].read_bytes())
    parts = [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="k", UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    assert refused.value.response["Error"]["Code"] == "InternalError"  # ContentTampered
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert listed == []


def test_the_aws_cli_copies_a_large_file_with_sse_s3_in_parts(
    local_server: LiveServer, tmp_path: Path
) -> None:
    credentials = local_server.s3_credentials()
    bucket = f"sse-mcli-{os.urandom(5).hex()}"
    source = tmp_path / "large.bin"
    body = sealed.content(sealed.marker(), 9 * MIB)  # past the CLI's 8 MiB multipart threshold
    source.write_bytes(body)
    assert aws(local_server, credentials, "s3", "mb", f"s3://{bucket}").returncode == 0
    put = aws(
        local_server, credentials, "s3", "cp", "--sse", "AES256", str(source), f"s3://{bucket}/l"
    )
    assert put.returncode == 0, put.stderr
    head = aws(local_server, credentials, "s3api", "head-object", "--bucket", bucket, "--key", "l")
    shown = json.loads(head.stdout)
    assert shown["ServerSideEncryption"] == "AES256"
    assert shown["ETag"].strip('"').endswith("-2")  # uploaded in parts
    back = tmp_path / "back.bin"
    got = aws(local_server, credentials, "s3", "cp", f"s3://{bucket}/l", str(back))
    assert got.returncode == 0 and back.read_bytes() == body


@pytest.mark.slow  # a server of its own, started twice
def test_a_rotation_rewraps_waiting_parts_and_the_upload_completes_under_the_new_key(
    tmp_path: Path,
) -> None:
    """A part waiting in an encrypted upload has a content key of its own: a master-key
    rotation rewraps it with the versions', so the upload still completes once the old key
    is gone, and `check --deep` finds the completed object consistent."""
    old, new = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    live = LiveServer(tmp_path / "data", env={"BUCKETD_STORAGE__MASTER_KEY": old})
    live.start()
    first, last = os.urandom(5 * MIB), os.urandom(70_000)
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="vault")
        upload = s3.create_multipart_upload(Bucket="vault", Key="k", ServerSideEncryption="AES256")
        upload_id = upload["UploadId"]
        etags = [
            s3.upload_part(Bucket="vault", Key="k", UploadId=upload_id, PartNumber=n, Body=b)[
                "ETag"
            ]
            for n, b in ((1, first), (2, last))
        ]
    finally:
        live.stop()
    live.env |= {"BUCKETD_STORAGE__MASTER_KEY": new, "BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS": old}
    assert "\nrewrapped 2 of " in live.cli("rotate-master-key")  # the two parts' keys
    del live.env["BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS"]
    live.start()
    try:
        s3 = live.s3()
        parts = [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]
        s3.complete_multipart_upload(
            Bucket="vault", Key="k", UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
        got = s3.get_object(Bucket="vault", Key="k", Range=f"bytes={5 * MIB - 5}-{5 * MIB + 4}")
        assert got["Body"].read() == (first + last)[5 * MIB - 5 : 5 * MIB + 5]
        assert s3.get_object(Bucket="vault", Key="k")["Body"].read() == first + last
    finally:
        live.stop()
    assert live.cli("check", "--deep").strip().endswith("consistent")


@pytest.mark.slow  # a server of its own, started three times
@pytest.mark.parametrize("point", ["put.after_blob", "put.in_commit", "put.after_commit"])
def test_sigkill_during_an_encrypted_completion_leaves_the_upload_or_the_object(
    tmp_path: Path, point: str
) -> None:
    """Killed while the completion of an encrypted upload commits: after a restart the
    object is there, whole and encrypted, or the upload is, and completing it again gives
    the object; `check --deep` is consistent and no plaintext is on disk."""
    mark = sealed.marker()
    first, last = sealed.content(mark, 5 * MIB), sealed.content(mark, 30_000)
    live = LiveServer(tmp_path / "data", durable=True)
    live.start()
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="crash")
        upload_id = s3.create_multipart_upload(
            Bucket="crash", Key="k", ServerSideEncryption="AES256"
        )["UploadId"]
        parts = [
            {
                "PartNumber": n,
                "ETag": s3.upload_part(
                    Bucket="crash", Key="k", UploadId=upload_id, PartNumber=n, Body=body
                )["ETag"],
            }
            for n, body in ((1, first), (2, last))
        ]
    finally:
        live.stop()
    live.env["BUCKETD_FAULTS"] = f"{point}=kill"
    live.start()
    with pytest.raises(Exception):  # noqa: B017 (the server dies mid-request)
        live.s3().complete_multipart_upload(
            Bucket="crash", Key="k", UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    live.kill()
    del live.env["BUCKETD_FAULTS"]
    live.start()
    try:
        s3 = live.s3()
        pending = s3.list_multipart_uploads(Bucket="crash").get("Uploads", [])
        if pending:
            s3.complete_multipart_upload(
                Bucket="crash", Key="k", UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        got = s3.get_object(Bucket="crash", Key="k")
        assert got["ServerSideEncryption"] == "AES256"
        assert got["Body"].read() == first + last
    finally:
        live.stop()
    assert live.cli("check", "--deep").strip().endswith("consistent")
    assert sealed.found_on_disk(live.data_dir, mark) == []
