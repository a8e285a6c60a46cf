"""A hostile review of SSE-S3 (issue 37 part (a)), through the shared real servers: every
way a reader could get wrong bytes, ciphertext or plaintext where it should not, and every
request AWS refuses around the encryption header. Each test is an attack that held or a
hole that was fixed with it."""

from __future__ import annotations

import base64
import concurrent.futures
import functools
import hashlib
import json
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import bucketd_client as bc
from bucketd_client import calls
from storage.backends.local.blobs import blob_relpath
from tests.support import launch, web
from tests.support.live import LiveServer

SIZE = 2 * 65536 + 1
"""Three packages, the last one byte long."""


def _bucket(s3: Any, prefix: str) -> str:
    name = f"{prefix}-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    return name


def _with_sse(s3: Any, value: str) -> Any:
    """The client, its requests carrying `x-amz-server-side-encryption: value` (signed)."""

    def add(request: Any, **_: Any) -> None:
        request.headers["x-amz-server-side-encryption"] = value

    s3.meta.events.register_first("before-sign.s3", add)
    return s3


def _error(call: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as caught:
        call()
    response = caught.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_every_range_reads_the_plaintext_it_names(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-range")
    body = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="o", Body=body, ServerSideEncryption="AES256")
    cases = {
        "bytes=65535-65535": body[65535:65536],
        "bytes=65535-65536": body[65535:65537],
        "bytes=65536-65536": body[65536:65537],
        "bytes=65536-131071": body[65536:131072],
        "bytes=65537-": body[65537:],
        "bytes=131072-": body[131072:],
        "bytes=-1": body[-1:],
        "bytes=-65537": body[-65537:],
        "bytes=-999999": body,
        "bytes=0-": body,
        "bytes=131000-999999": body[131000:],
    }
    for header, expected in cases.items():
        got = s3.get_object(Bucket=bucket, Key="o", Range=header)
        assert (header, got["Body"].read()) == (header, expected)
        assert got["ServerSideEncryption"] == "AES256"
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="o", Range=f"bytes={SIZE}-")) == (
        416,
        "InvalidRange",
    )
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "o"})
    presigned = web.get(url, headers={"Range": "bytes=65530-65545"})
    assert (presigned.status_code, presigned.content) == (206, body[65530:65546])
    assert web.get(url).content == body


def test_an_empty_and_a_one_package_object_read_back(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-small")
    for key, body in {"empty": b"", "full": os.urandom(65536)}.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="AES256")
        head = s3.head_object(Bucket=bucket, Key=key)
        assert (head["ContentLength"], head["ETag"]) == (
            len(body),
            f'"{hashlib.md5(body).hexdigest()}"',
        )
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
    last = s3.get_object(Bucket=bucket, Key="full", Range="bytes=-1")["Body"].read()
    assert last == s3.get_object(Bucket=bucket, Key="full")["Body"].read()[-1:]


def test_conditional_and_versioned_reads(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-versions")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old, new = os.urandom(70_000), os.urandom(100)
    first = s3.put_object(Bucket=bucket, Key="o", Body=old, ServerSideEncryption="AES256")
    s3.put_object(Bucket=bucket, Key="o", Body=new)
    got = s3.get_object(
        Bucket=bucket, Key="o", VersionId=first["VersionId"], Range="bytes=65535-65537"
    )
    assert (got["Body"].read(), got["ServerSideEncryption"]) == (old[65535:65538], "AES256")
    assert "ServerSideEncryption" not in s3.head_object(Bucket=bucket, Key="o")
    etag = first["ETag"]
    assert etag == f'"{hashlib.md5(old).hexdigest()}"'
    match = s3.get_object(Bucket=bucket, Key="o", VersionId=first["VersionId"], IfMatch=etag)
    assert match["Body"].read() == old
    assert (
        _error(
            lambda: s3.head_object(
                Bucket=bucket, Key="o", VersionId=first["VersionId"], IfNoneMatch=etag
            )
        )[0]
        == 304
    )


def test_a_part_copied_from_an_encrypted_source_is_its_plaintext(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-partcopy")
    body = os.urandom(SIZE)
    s3.put_object(Bucket=bucket, Key="src", Body=body, ServerSideEncryption="AES256")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    part = s3.upload_part_copy(
        Bucket=bucket,
        Key="dst",
        UploadId=upload,
        PartNumber=1,
        CopySource=f"{bucket}/src",
        CopySourceRange="bytes=65535-131072",
    )
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="dst",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]},
    )
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == body[65535:131073]


def test_another_organizations_encrypted_object_cannot_be_copied(
    local_server: LiveServer, other: tuple[str, Any]
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-theirs")
    s3.put_object(Bucket=bucket, Key="secret", Body=b"x" * 100, ServerSideEncryption="AES256")
    _, them = other
    mine = _bucket(them, "rv-mine")
    source = f"{bucket}/secret"
    refused = [
        lambda: them.copy_object(Bucket=mine, Key="stolen", CopySource=source),
        lambda: them.copy_object(
            Bucket=mine, Key="stolen", CopySource=source, ServerSideEncryption="AES256"
        ),
    ]
    upload = them.create_multipart_upload(Bucket=mine, Key="stolen")["UploadId"]
    refused.append(
        lambda: them.upload_part_copy(
            Bucket=mine, Key="stolen", UploadId=upload, PartNumber=1, CopySource=source
        )
    )
    for attempt in refused:
        assert _error(attempt)[0] in (403, 404)  # refused as before: not their bucket
    assert them.list_parts(Bucket=mine, Key="stolen", UploadId=upload).get("Parts", []) == []
    assert them.list_objects_v2(Bucket=mine)["KeyCount"] == 0


def test_equal_plaintexts_never_share_a_stored_content(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-dedupe")
    body = os.urandom(200_000)
    for key in ("a", "b"):
        s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="AES256")
    s3.put_object(Bucket=bucket, Key="plain", Body=body)
    with sqlite3.connect(local_server.data_dir / "index.db") as db:
        found = dict(
            db.execute(
                "SELECT f.key, f.blob_id FROM files f JOIN buckets b ON b.id = f.bucket_id "
                "WHERE b.name = ?",
                (bucket,),
            ).fetchall()
        )
    assert len({found["a"], found["b"], found["plain"]}) == 3


def test_the_data_dirs_master_key_is_private(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-keyfile")
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", ServerSideEncryption="AES256")
    mode = (local_server.data_dir / "master.key").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600


@pytest.mark.parametrize(
    "value, status, code",
    [
        ("aws:kms", 501, "NotImplemented"),
        ("AES512", 400, "InvalidArgument"),
        ("garbage", 400, "InvalidArgument"),
        ("", 400, "InvalidArgument"),
    ],
)
def test_an_encryption_other_than_aes256_is_refused_and_nothing_stored(
    local_server: LiveServer, value: str, status: int, code: str
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-sse-value")
    sending = _with_sse(local_server.s3(), value)
    assert _error(lambda: sending.put_object(Bucket=bucket, Key="o", Body=b"plain")) == (
        status,
        code,
    )
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_read_carrying_the_sse_s3_header_is_refused_as_aws_does(
    local_server: LiveServer, method: str
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-sse-read")
    s3.put_object(Bucket=bucket, Key="o", Body=b"x", ServerSideEncryption="AES256")
    sending = _with_sse(local_server.s3(), "AES256")
    read = sending.get_object if method == "GET" else sending.head_object
    assert _error(lambda: read(Bucket=bucket, Key="o"))[0] == 400


def test_content_md5_and_checksums_are_of_the_plaintext(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-digest")
    body = os.urandom(70_000)
    put = s3.put_object(
        Bucket=bucket, Key="o", Body=body, ServerSideEncryption="AES256", ChecksumAlgorithm="SHA256"
    )
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="o", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == put["ChecksumSHA256"]
    wrong = "AAAAAAAAAAAAAAAAAAAAAA=="
    assert _error(
        lambda: s3.put_object(
            Bucket=bucket, Key="bad", Body=body, ServerSideEncryption="AES256", ContentMD5=wrong
        )
    ) == (400, "BadDigest")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 1


def _rows(live: LiveServer, bucket: str) -> dict[str, tuple[str, str]]:
    """Each key's (blob id, envelope) in the index, by key."""
    with sqlite3.connect(live.data_dir / "index.db") as db:
        found = db.execute(
            "SELECT f.key, f.blob_id, f.encryption FROM files f "
            "JOIN buckets b ON b.id = f.bucket_id WHERE b.name = ?",
            (bucket,),
        ).fetchall()
    return {key: (blob, envelope) for key, blob, envelope in found}


def _blob(live: LiveServer, blob_id: str) -> Path:
    return live.data_dir / "blobs" / blob_relpath(blob_id)


def test_tampered_swapped_or_cut_contents_and_keys_never_read_as_plaintext(
    local_server: LiveServer,
) -> None:
    """The stored packages and the wrapped key are changed under a running server, as a
    disk or an intruder with the data dir could: every read is an error, never bytes."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-tamper")
    bodies = {key: os.urandom(SIZE) for key in ("flip", "cut", "a", "b", "swap", "keyed")}
    for key, body in bodies.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="AES256")
    rows = _rows(local_server, bucket)

    def rewrite(key: str, change: Any) -> None:
        path = _blob(local_server, rows[key][0])
        data = path.read_bytes()
        path.chmod(0o600)
        path.write_bytes(change(data))

    rewrite("flip", lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:])
    rewrite("cut", lambda d: d[: 2 * (65536 + 16)])  # the whole last package gone
    other = _blob(local_server, rows["b"][0]).read_bytes()
    rewrite("a", lambda _: other)  # the content of another object (another key)
    rewrite("swap", lambda d: d[65552 : 2 * 65552] + d[:65552] + d[2 * 65552 :])
    with sqlite3.connect(local_server.data_dir / "index.db") as db:  # a wrapped key swapped
        db.execute(
            "UPDATE files SET encryption = ? WHERE blob_id = ?", (rows["b"][1], rows["keyed"][0])
        )
    # A read of the packages left as they were is theirs (each opens alone); a read that
    # touches a changed one is an error. A blob file shorter than its record is the
    # backend's 503, as for plaintext.
    whole, first, last = "bytes=0-", "bytes=0-9", "bytes=-1"
    broken = {("cut", whole): 503, ("cut", last): 503, ("flip", whole): 500}
    broken |= {("flip", first): 500, ("swap", whole): 500, ("swap", first): 500}
    broken |= {(key, asked): 500 for key in ("a", "keyed") for asked in (whole, first, last)}
    for key in ("flip", "cut", "a", "swap", "keyed"):
        for asked in (whole, first, last):
            status = broken.get((key, asked))
            if status is None:
                got = s3.get_object(Bucket=bucket, Key=key, Range=asked)["Body"].read()
                assert got == (bodies[key][:10] if asked == first else bodies[key][-1:])
                continue
            read = functools.partial(s3.get_object, Bucket=bucket, Key=key, Range=asked)
            answer = _error(read)
            assert (key, asked, answer[0]) == (key, asked, status)
    assert s3.get_object(Bucket=bucket, Key="b")["Body"].read() == bodies["b"]


@pytest.mark.slow  # three server starts: two workers, a wrong key, a missing key file
def test_two_workers_make_one_master_key_and_an_operators_bad_day_loses_nothing(
    tmp_path: Path,
) -> None:
    """The data dir's master.key, made by whichever of two workers seals first while both
    do, is the one every content is sealed under; `check --deep` finds a changed encrypted
    content; a wrong configured key is a 500 per read (never bytes) and the right one
    still reads everything; a missing key file stops the server at start, not at a read."""
    live = LiveServer(tmp_path / "data", workers=2)
    live.start()
    bodies = {f"k{n}": os.urandom(20_000 + n) for n in range(16)}
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="first")

        def put(key: str) -> None:
            s3.put_object(Bucket="first", Key=key, Body=bodies[key], ServerSideEncryption="AES256")

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(put, bodies))
        for key, body in bodies.items():
            assert s3.get_object(Bucket="first", Key=key)["Body"].read() == body
    finally:
        live.stop()
    assert sorted(p.name for p in live.data_dir.glob("*master.key*")) == ["master.key"]
    rows = _rows(live, "first")
    path = _blob(live, rows["k3"][0])
    data = path.read_bytes()
    path.chmod(0o600)
    path.write_bytes(data[:50] + bytes([data[50] ^ 1]) + data[51:])
    deep = launch.run(["check", "--deep", "--data-dir", str(live.data_dir)], env=dict(os.environ))
    assert deep.returncode == 1 and "'k3': corrupt" in deep.stdout, deep.stdout
    assert "'k4'" not in deep.stdout

    own = base64.b64encode((live.data_dir / "master.key").read_bytes()).decode()
    live.env["BUCKETD_STORAGE__MASTER_KEY"] = base64.b64encode(os.urandom(32)).decode()
    live.start()
    try:
        s3 = live.s3()
        assert _error(lambda: s3.get_object(Bucket="first", Key="k4")) == (500, "InternalError")
    finally:
        live.stop()
    told = launch.run(["check", "--data-dir", str(live.data_dir)], env=os.environ | live.env)
    assert told.returncode == 1, told.stdout
    assert "wraps 16 content keys but is not configured" in told.stdout, told.stdout
    live.env["BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS"] = json.dumps([own])
    live.start()
    try:
        s3 = live.s3()
        assert s3.get_object(Bucket="first", Key="k4")["Body"].read() == bodies["k4"]
    finally:
        live.stop()
    assert live.cli("check").strip() == "consistent"
    live.env["BUCKETD_STORAGE__MASTER_KEY"] = f"@{tmp_path / 'no-such-key'}"
    with pytest.raises(RuntimeError, match="master_key"):
        live.start(timeout=10)

    # master.key lost: no new one is made, by a write or a read, until it is put back.
    del live.env["BUCKETD_STORAGE__MASTER_KEY"], live.env["BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS"]
    kept = live.data_dir / "master.key"
    saved = kept.read_bytes()
    kept.unlink()
    live.start()
    try:
        s3 = live.s3()
        assert _error(lambda: s3.get_object(Bucket="first", Key="k4")) == (500, "InternalError")
        put = functools.partial(
            s3.put_object, Bucket="first", Key="new", Body=b"n", ServerSideEncryption="AES256"
        )
        assert _error(put) == (500, "InternalError")
        assert not kept.exists()
    finally:
        live.stop()
    kept.write_bytes(saved)
    live.start()
    try:
        s3 = live.s3()
        assert s3.get_object(Bucket="first", Key="k4")["Body"].read() == bodies["k4"]
        put()
        assert s3.get_object(Bucket="first", Key="new")["Body"].read() == b"n"
    finally:
        live.stop()


def test_v1_reads_and_usage_are_of_the_plaintext(
    local_server: LiveServer, other: tuple[str, Any]
) -> None:
    """/v1 ranges at the package boundaries decrypt, the ETag is the plaintext's SHA-256
    (so a conditional read matches it), and usage and quota count plaintext bytes, not
    the 16-byte tags the packages add."""
    org, them = other
    body = os.urandom(SIZE)
    them.put_object(
        Bucket=_bucket(them, "rv-usage"), Key="o", Body=body, ServerSideEncryption="AES256"
    )
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-v1")
    s3.put_object(Bucket=bucket, Key="o", Body=body, ServerSideEncryption="AES256")
    with bc.Client(local_server.url, local_server.admin_key) as admin:
        assert admin.orgs.get(org).usage.stored_bytes == SIZE
        bucket_id = admin.get_bucket_by_name(bucket).id
    auth = {"Authorization": f"Bearer {local_server.admin_key}"}
    url = local_server.url + calls.file_path(bucket_id, "o")
    etag = f'"{hashlib.sha256(body).hexdigest()}"'
    for asked, expected in [
        ("bytes=65535-65536", body[65535:65537]),
        ("bytes=-1", body[-1:]),
        ("bytes=131071-", body[131071:]),
    ]:
        answer = web.get(url, headers=auth | {"Range": asked})
        assert (asked, answer.status_code, answer.content) == (asked, 206, expected)
    whole = web.get(url, headers=auth)
    assert (whole.content, whole.headers["ETag"]) == (body, etag)
    assert web.get(url, headers=auth | {"If-None-Match": etag}).status_code == 304


def test_a_snapshot_restore_and_fork_keep_the_object_encrypted_and_readable(
    local_server: LiveServer,
) -> None:
    """A fork shares the encrypted content and its envelope (no plaintext copy is made),
    and a restore brings back the encrypted version over a plaintext one."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv-snap")
    body = os.urandom(70_000)
    s3.put_object(Bucket=bucket, Key="o", Body=body, ServerSideEncryption="AES256")
    with bc.Client(local_server.url, local_server.admin_key) as admin:
        bucket_id = admin.get_bucket_by_name(bucket).id
        snapshot = admin.snapshots.create(bucket_id)
        s3.put_object(Bucket=bucket, Key="o", Body=b"plain now")
        fork = admin.snapshots.fork(snapshot.id, f"{bucket}-fork")
        admin.snapshots.restore(snapshot.id)
    for name in (bucket, fork.name):
        got = s3.get_object(Bucket=name, Key="o", Range="bytes=65530-65540")
        assert (name, got["Body"].read(), got["ServerSideEncryption"]) == (
            name,
            body[65530:65541],
            "AES256",
        )
    rows = _rows(local_server, fork.name)
    assert rows["o"][0] == _rows(local_server, bucket)["o"][0]  # the same sealed content
