"""SSE-S3 through the S3 listener (issue 37 point 1), on both backends: a PUT with
`x-amz-server-side-encryption: AES256` is stored encrypted (no plaintext byte in the data
dir, the index or the cluster), answered and read back as S3 does, ranges included, and
copies keep or gain the encryption."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import bucketd_client as bc
from tests.support import web
from tests.support.commands import aws
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.sealed import content as _content
from tests.support.sealed import found_in_cluster as _found_in_cluster
from tests.support.sealed import found_on_disk as _found_on_disk
from tests.support.sealed import marker as _marker


@pytest.mark.parametrize("size", [1000, 300_000])
def test_an_sse_s3_object_is_stored_encrypted_and_read_back_as_s3_does(
    server: LiveServer, request: pytest.FixtureRequest, size: int
) -> None:
    s3: Any = server.s3()
    bucket = f"sse-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    marker = _marker()
    body = _content(marker, size)

    put = s3.put_object(Bucket=bucket, Key="secret.txt", Body=body, ServerSideEncryption="AES256")
    assert put["ServerSideEncryption"] == "AES256"
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'  # of the plaintext, as AWS

    head = s3.head_object(Bucket=bucket, Key="secret.txt")
    assert head["ServerSideEncryption"] == "AES256"
    assert head["ContentLength"] == size
    got = s3.get_object(Bucket=bucket, Key="secret.txt")
    assert got["ServerSideEncryption"] == "AES256"
    assert got["Body"].read() == body
    for start, end in [(0, 0), (10, 99), (size - 7, size - 1), (65_530, 65_545)]:
        if end >= size:
            continue
        ranged = s3.get_object(Bucket=bucket, Key="secret.txt", Range=f"bytes={start}-{end}")
        assert ranged["Body"].read() == body[start : end + 1]
        assert ranged["ContentRange"] == f"bytes {start}-{end}/{size}"
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("secret.txt", size)]

    # Through /v1 the ETag is the plaintext's SHA-256, as for any file, so the client's
    # download checks out (the stored packages have their own, in the index).
    with bc.Client(server.url, server.admin_key) as client:
        bucket_id = client.get_bucket_by_name(bucket).id
        shown = client.get_file(bucket_id, "secret.txt")
        assert shown.sha256 == hashlib.sha256(body).hexdigest()
        assert shown.encryption == "AES256"
        assert [f.encryption for f in client.iter_files(bucket_id)] == ["AES256"]
        sink = io.BytesIO()
        client.download(bucket_id, "secret.txt", sink)
        assert sink.getvalue() == body

    # A plaintext object stays plaintext and says nothing about encryption.
    s3.put_object(Bucket=bucket, Key="plain.txt", Body=b"plain")
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="plain.txt")
    with bc.Client(server.url, server.admin_key) as client:
        assert client.get_file(bucket_id, "plain.txt").encryption is None

    if server.backend == "s3":
        assert _found_in_cluster(request.getfixturevalue("seaweed"), bucket, marker) == []
    assert _found_on_disk(server.data_dir, marker) == []


def test_copies_keep_the_encryption_or_gain_it(server: LiveServer) -> None:
    s3: Any = server.s3()
    bucket = f"sse-copy-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    marker = _marker()
    body = _content(marker, 70_000)
    s3.put_object(Bucket=bucket, Key="plain", Body=body)
    s3.put_object(Bucket=bucket, Key="sealed", Body=body, ServerSideEncryption="AES256")

    kept = s3.copy_object(Bucket=bucket, Key="kept", CopySource=f"{bucket}/sealed")
    assert kept["ServerSideEncryption"] == "AES256"
    gained = s3.copy_object(
        Bucket=bucket, Key="gained", CopySource=f"{bucket}/plain", ServerSideEncryption="AES256"
    )
    assert gained["ServerSideEncryption"] == "AES256"
    md5 = f'"{hashlib.md5(body).hexdigest()}"'
    assert kept["CopyObjectResult"]["ETag"] == gained["CopyObjectResult"]["ETag"] == md5
    # Copying an object onto itself to encrypt it is allowed, as in S3.
    s3.copy_object(
        Bucket=bucket, Key="plain", CopySource=f"{bucket}/plain", ServerSideEncryption="AES256"
    )
    for key in ("kept", "gained", "plain"):
        got = s3.get_object(Bucket=bucket, Key=key)
        assert (key, got["ServerSideEncryption"]) == (key, "AES256")
        assert got["Body"].read() == body
        assert got["ETag"] == md5
    s3.delete_object(Bucket=bucket, Key="sealed")
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == body
    # A copy re-written to encrypt it is still recorded as a copy.
    with sqlite3.connect(server.data_dir / "index.db") as db:
        named = db.execute(
            "SELECT name FROM events WHERE bucket_name = ? AND key = 'gained'", (bucket,)
        ).fetchall()
    assert named == [("ObjectCreated:Copy",)]


def test_a_form_upload_asking_for_sse_s3_is_encrypted(local_server: LiveServer) -> None:
    s3: Any = local_server.s3(signature_version="s3v4")
    bucket = f"sse-form-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    marker = _marker()
    body = _content(marker, 90)
    sse = {"x-amz-server-side-encryption": "AES256"}
    post = s3.generate_presigned_post(Bucket=bucket, Key="form.bin", Fields=sse, Conditions=[sse])
    answer = web.post(post["url"], data=post["fields"], files={"file": ("f", body, "text/plain")})
    assert answer.status_code == 204, answer.text
    assert answer.headers["x-amz-server-side-encryption"] == "AES256"
    got = s3.get_object(Bucket=bucket, Key="form.bin")
    assert (got["ServerSideEncryption"], got["Body"].read()) == ("AES256", body)
    assert _found_on_disk(local_server.data_dir, marker) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", ["put.after_blob", "put.in_commit", "put.after_commit"])
def test_sigkill_during_an_encrypted_write_leaves_the_old_or_the_new_object(
    tmp_path: Path, point: str
) -> None:
    live = LiveServer(tmp_path / "data", durable=True)
    live.start()
    old, new = os.urandom(100_000), os.urandom(150_000)
    s3: Any = live.s3()
    s3.create_bucket(Bucket="crash")
    s3.put_object(Bucket="crash", Key="k", Body=old, ServerSideEncryption="AES256")
    live.stop()
    live.env["BUCKETD_FAULTS"] = f"{point}=kill"
    live.start()
    with pytest.raises(Exception):  # noqa: B017 (the server dies mid-request)
        live.s3().put_object(Bucket="crash", Key="k", Body=new, ServerSideEncryption="AES256")
    live.kill()
    del live.env["BUCKETD_FAULTS"]
    live.start()
    try:
        got = live.s3().get_object(Bucket="crash", Key="k")
        assert got["ServerSideEncryption"] == "AES256"
        assert got["Body"].read() in (old, new)
    finally:
        live.stop()
    assert live.cli("check", "--deep").strip().endswith("consistent")
    # The data dir's own master key goes into its backups: a backup can read what it holds.
    live.cli("backup", str(tmp_path / "backup"))
    saved = (tmp_path / "backup" / "master.key").read_bytes()
    assert saved == (live.data_dir / "master.key").read_bytes()


def test_the_aws_cli_writes_and_reads_sse_s3(local_server: LiveServer, tmp_path: Path) -> None:
    credentials = local_server.s3_credentials()
    bucket = f"sse-cli-{os.urandom(5).hex()}"
    source = tmp_path / "report.txt"
    body = _content(_marker(), 200_000)
    source.write_bytes(body)
    assert aws(local_server, credentials, "s3", "mb", f"s3://{bucket}").returncode == 0
    put = aws(
        local_server,
        credentials,
        "s3",
        "cp",
        "--sse",
        "AES256",
        str(source),
        f"s3://{bucket}/r.txt",
    )
    assert put.returncode == 0, put.stderr
    head = aws(
        local_server, credentials, "s3api", "head-object", "--bucket", bucket, "--key", "r.txt"
    )
    assert head.returncode == 0 and json.loads(head.stdout)["ServerSideEncryption"] == "AES256"
    back = tmp_path / "back.txt"
    got = aws(local_server, credentials, "s3", "cp", f"s3://{bucket}/r.txt", str(back))
    assert got.returncode == 0 and back.read_bytes() == body


@pytest.mark.slow
def test_an_encrypted_write_published_before_a_crash_is_healed_encrypted(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """S3 backend: SIGKILL between the cluster's publish and the index commit; the heal at
    the next start commits the object with its envelope (the reservation carries it), so it
    reads back as its plaintext, never as its packages."""
    seaweed = request.getfixturevalue("seaweed")
    brand = "enc" + os.urandom(3).hex()
    live = LiveServer(tmp_path / "data", TEST_CONFIG + seaweed.bucketd_config(brand))
    live.start()
    old, new = os.urandom(70_000), os.urandom(90_000)
    live.s3().create_bucket(Bucket="healed")
    live.s3().put_object(Bucket="healed", Key="k", Body=old, ServerSideEncryption="AES256")
    live.stop()
    live.env["BUCKETD_FAULTS"] = "put.after_publish=kill"
    live.start()
    with pytest.raises(Exception):  # noqa: B017 (the server dies mid-request)
        live.s3().put_object(Bucket="healed", Key="k", Body=new, ServerSideEncryption="AES256")
    live.kill()
    del live.env["BUCKETD_FAULTS"]
    live.start()
    try:
        s3: Any = live.s3()
        deadline = time.monotonic() + 10
        while s3.head_object(Bucket="healed", Key="k")["ContentLength"] != len(new):
            assert time.monotonic() < deadline, "the published write was never healed"
            time.sleep(0.1)
        got = s3.get_object(Bucket="healed", Key="k")
        assert (got["ServerSideEncryption"], got["Body"].read()) == ("AES256", new)
    finally:
        live.stop()


@pytest.mark.parametrize("signed", [True, False], ids=["signed-body", "unsigned-body"])
def test_an_sse_s3_files_sha256_is_its_plaintexts_whether_the_body_was_signed_or_not(
    local_server: LiveServer, signed: bool
) -> None:
    """A signed body's SHA-256, verified by the S3 layer, is the one the envelope keeps (the
    write does not hash the plaintext twice); an unsigned body's is the engine's own."""
    s3: Any = local_server.s3(
        s3={"addressing_style": "path", "payload_signing_enabled": signed},
        request_checksum_calculation="when_required",
    )
    bucket = f"sse-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(300_000)
    s3.put_object(Bucket=bucket, Key="k", Body=body, ServerSideEncryption="AES256")
    with bc.Client(local_server.url, local_server.admin_key) as client:
        bucket_id = client.get_bucket_by_name(bucket).id
        assert client.get_file(bucket_id, "k").sha256 == hashlib.sha256(body).hexdigest()
