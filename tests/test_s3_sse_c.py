"""SSE-C (issue 37 point 2): objects encrypted under a key the client gives on every request
that reads or writes their content, through boto3 against the real S3 listener, on both
backends; the key checked against its MD5, never stored; 400 without it, 403 with another."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import bucketd_client as bc
from storage import encryption, sse_c
from storage.errors import CustomerKeyMismatch
from tests.support import launch, web
from tests.support.commands import aws
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.sealed import content, found_in_cluster, found_on_disk, marker


def _key() -> bytes:
    return os.urandom(32)


def _sse(key: bytes) -> dict[str, Any]:
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def _md5(key: bytes) -> str:
    return base64.b64encode(hashlib.md5(key).digest()).decode()


def _error(call: Callable[[], object]) -> tuple[int, str]:
    with pytest.raises(ClientError) as caught:
        call()
    response: Any = caught.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def _bucket(s3: Any, name: str) -> str:
    bucket = f"{name}-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=bucket)
    return bucket


@pytest.mark.parametrize("size", [1000, 200_000])
def test_an_sse_c_object_reads_only_with_its_key(
    server: LiveServer, request: pytest.FixtureRequest, size: int
) -> None:
    s3: Any = server.s3()
    bucket = _bucket(s3, "ssec")
    sign = marker()
    body = content(sign, size)
    key, other = _key(), _key()

    put = s3.put_object(Bucket=bucket, Key="k", Body=body, **_sse(key))
    assert put["SSECustomerAlgorithm"] == "AES256"
    assert put["SSECustomerKeyMD5"] == _md5(key)
    assert "ServerSideEncryption" not in put
    assert put["ETag"] != f'"{hashlib.md5(body).hexdigest()}"'  # S3: not the plaintext's MD5

    head = s3.head_object(Bucket=bucket, Key="k", **_sse(key))
    assert (head["ContentLength"], head["SSECustomerKeyMD5"]) == (size, _md5(key))
    assert head["ETag"] == put["ETag"]
    got = s3.get_object(Bucket=bucket, Key="k", **_sse(key))
    assert got["Body"].read() == body
    assert got["SSECustomerAlgorithm"] == "AES256"
    for start, end in [(0, 0), (65_530, 65_545), (size - 7, size - 1)]:
        if end < size:
            ranged = s3.get_object(
                Bucket=bucket, Key="k", Range=f"bytes={start}-{end}", **_sse(key)
            )
            assert ranged["Body"].read() == body[start : end + 1]

    # Without the key: 400 InvalidRequest; with another: 403 AccessDenied (as S3 answers).
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="k")) == (400, "InvalidRequest")
    assert _error(lambda: s3.head_object(Bucket=bucket, Key="k"))[0] == 400
    denied = _error(lambda: s3.get_object(Bucket=bucket, Key="k", **_sse(other)))
    assert denied == (403, "AccessDenied")
    assert _error(lambda: s3.head_object(Bucket=bucket, Key="k", **_sse(other)))[0] == 403
    # A key given for an object not sealed under one is refused too.
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain")
    applies = _error(lambda: s3.get_object(Bucket=bucket, Key="plain", **_sse(key)))
    assert applies == (400, "InvalidRequest")
    s3.put_object(Bucket=bucket, Key="sse-s3", Body=b"s", ServerSideEncryption="AES256")
    applies = _error(lambda: s3.get_object(Bucket=bucket, Key="sse-s3", **_sse(key)))
    assert applies == (400, "InvalidRequest")

    # Equal plaintexts under two keys share nothing: the stored contents differ.
    s3.put_object(Bucket=bucket, Key="twin", Body=body, **_sse(other))
    with bc.Client(server.url, server.admin_key) as client:
        bucket_id = client.get_bucket_by_name(bucket).id
        first, twin = (client.get_file(bucket_id, k) for k in ("k", "twin"))
        assert first.sha256 != twin.sha256
        assert hashlib.sha256(body).hexdigest() not in (first.sha256, twin.sha256)
        assert first.encryption == "SSE-C"
        # /v1 has no way to give the key: its download is refused, never ciphertext.
        with pytest.raises(bc.BucketdError) as refused:
            client.download(bucket_id, "k", io.BytesIO())
        assert (refused.value.status, refused.value.code) == (409, "customer_key_required")
    with server.client() as http:
        path = f"/buckets/{bucket_id}/files/k"
        assert http.head(path).status_code == 409  # a HEAD answers as its GET would
        assert http.get(path, headers={"If-None-Match": first.etag}).status_code == 409
        assert http.get(path, params={"metadata": "true"}).json()["data"]["encryption"] == "SSE-C"

    if server.backend == "s3":
        assert found_in_cluster(request.getfixturevalue("seaweed"), bucket, sign) == []
    assert found_on_disk(server.data_dir, sign) == []
    with sqlite3.connect(server.data_dir / "index.db") as db:
        stored = [
            row[0]
            for row in db.execute(
                "SELECT encryption FROM files WHERE bucket_id = ? AND key = 'k'", (bucket_id,)
            )
        ]
    assert base64.b64encode(key).decode() not in "".join(stored)
    assert _md5(key) not in "".join(stored)


def _raw_put(s3: Any, bucket: str, algorithm: str, key_b64: str, md5: str) -> tuple[int, str]:
    """A PutObject with the SSE-C headers as given (boto3 leaves them alone when the MD5
    is passed)."""
    params = {
        "SSECustomerAlgorithm": algorithm,
        "SSECustomerKey": key_b64,
        "SSECustomerKeyMD5": md5,
    }
    return _error(lambda: s3.put_object(Bucket=bucket, Key="bad", Body=b"x", **params))


def test_a_malformed_or_mismatched_customer_key_is_refused_and_nothing_is_written(
    local_server: LiveServer,
) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "ssec-bad")
    key = _key()
    good = base64.b64encode(key).decode()
    invalid = (400, "InvalidArgument")
    assert _raw_put(s3, bucket, "AES256", good, _md5(_key())) == invalid
    short = base64.b64encode(key[:16]).decode()
    assert _raw_put(s3, bucket, "AES256", short, _md5(key[:16])) == invalid
    assert _raw_put(s3, bucket, "AES256", "not base64!", _md5(key)) == invalid
    assert _raw_put(s3, bucket, "AES128", good, _md5(key)) == invalid
    both = _error(
        lambda: s3.put_object(
            Bucket=bucket, Key="bad", Body=b"x", ServerSideEncryption="AES256", **_sse(key)
        )
    )
    assert both == invalid
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_copies_read_an_sse_c_source_with_its_key_and_seal_the_copy_as_asked(
    server: LiveServer,
) -> None:
    s3: Any = server.s3()
    bucket = _bucket(s3, "ssec-copy")
    body = content(marker(), 70_000)
    key, other = _key(), _key()
    s3.put_object(Bucket=bucket, Key="src", Body=body, **_sse(key))
    source = {
        "CopySource": f"{bucket}/src",
        "CopySourceSSECustomerAlgorithm": "AES256",
        "CopySourceSSECustomerKey": key,
    }

    # Without the source's key, or with another, the copy is refused.
    no_key = _error(lambda: s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/src"))
    assert no_key == (400, "InvalidRequest")
    wrong = {**source, "CopySourceSSECustomerKey": other}
    assert _error(lambda: s3.copy_object(Bucket=bucket, Key="c", **wrong))[0] == 403

    sealed = s3.copy_object(Bucket=bucket, Key="to-c", **source, **_sse(other))
    assert sealed["SSECustomerKeyMD5"] == _md5(other)
    s3.copy_object(Bucket=bucket, Key="to-s3", **source, ServerSideEncryption="AES256")
    s3.copy_object(Bucket=bucket, Key="to-plain", **source)
    assert s3.get_object(Bucket=bucket, Key="to-c", **_sse(other))["Body"].read() == body
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="to-c", **_sse(key)))[0] == 403
    to_s3 = s3.get_object(Bucket=bucket, Key="to-s3")
    assert (to_s3["ServerSideEncryption"], to_s3["Body"].read()) == ("AES256", body)
    assert s3.get_object(Bucket=bucket, Key="to-plain")["Body"].read() == body

    # A plaintext source copied under a customer key; a copy onto itself changing the key.
    s3.copy_object(Bucket=bucket, Key="sealed-plain", CopySource=f"{bucket}/to-plain", **_sse(key))
    assert s3.get_object(Bucket=bucket, Key="sealed-plain", **_sse(key))["Body"].read() == body
    s3.copy_object(Bucket=bucket, Key="src", **source, **_sse(other))
    assert s3.get_object(Bucket=bucket, Key="src", **_sse(other))["Body"].read() == body
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="src", **_sse(key)))[0] == 403


def test_a_restored_sse_c_version_still_opens_with_its_key(local_server: LiveServer) -> None:
    """A restore copies without any key: it shares the version's packages and sealed key."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "ssec-restore")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    key = _key()
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"first", **_sse(key))["VersionId"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"second")
    with bc.Client(local_server.url, local_server.admin_key) as client:
        client.restore_version(client.get_bucket_by_name(bucket).id, "k", first)
    assert s3.get_object(Bucket=bucket, Key="k", **_sse(key))["Body"].read() == b"first"
    assert _error(lambda: s3.get_object(Bucket=bucket, Key="k"))[0] == 400


def test_presigned_urls_carry_the_customer_key_in_signed_headers(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "ssec-presign")
    key = _key()
    headers = {
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": base64.b64encode(key).decode(),
        "x-amz-server-side-encryption-customer-key-MD5": _md5(key),
    }
    params = {"Bucket": bucket, "Key": "p", **_sse(key)}
    put_url = s3.generate_presigned_url("put_object", Params=params, ExpiresIn=300)
    get_url = s3.generate_presigned_url("get_object", Params=params, ExpiresIn=300)
    with web.client(timeout=30) as http:
        assert http.put(put_url, content=b"presigned", headers=headers).status_code == 200
        got = http.get(get_url, headers=headers)
        assert (got.status_code, got.content) == (200, b"presigned")
        assert got.headers["x-amz-server-side-encryption-customer-key-md5"] == _md5(key)
        # boto3's SigV2 URL carries the key in its query, signed: it reads alone. A SigV4
        # URL signs the headers, which must then be sent. Another key is refused.
        assert "x-amz-server-side-encryption-customer-key=" in get_url
        assert http.get(get_url).content == b"presigned"
        v4: Any = local_server.s3(signature_version="s3v4")
        assert http.get(v4.generate_presigned_url("get_object", Params=params)).status_code == 403
        other = _key()
        forged = headers | {
            "x-amz-server-side-encryption-customer-key": base64.b64encode(other).decode(),
            "x-amz-server-side-encryption-customer-key-MD5": _md5(other),
        }
        assert http.get(get_url, headers=forged).status_code == 403
    assert s3.get_object(Bucket=bucket, Key="p", **_sse(key))["Body"].read() == b"presigned"


def test_the_aws_cli_writes_and_reads_sse_c(local_server: LiveServer, tmp_path: Path) -> None:
    credentials = local_server.s3_credentials()
    bucket = f"ssec-cli-{os.urandom(5).hex()}"
    (tmp_path / "key.bin").write_bytes(_key())
    sse_c = ["--sse-c", "AES256", "--sse-c-key", f"fileb://{tmp_path / 'key.bin'}"]
    source = tmp_path / "report.txt"
    body = content(marker(), 100_000)
    source.write_bytes(body)
    assert aws(local_server, credentials, "s3", "mb", f"s3://{bucket}").returncode == 0
    put = aws(local_server, credentials, "s3", "cp", *sse_c, str(source), f"s3://{bucket}/r")
    assert put.returncode == 0, put.stderr
    back = tmp_path / "back.txt"
    got = aws(local_server, credentials, "s3", "cp", *sse_c, f"s3://{bucket}/r", str(back))
    assert got.returncode == 0 and back.read_bytes() == body
    bare = aws(local_server, credentials, "s3", "cp", f"s3://{bucket}/r", str(tmp_path / "x"))
    assert bare.returncode != 0 and "400" in bare.stderr


@pytest.mark.slow
def test_tools_without_the_key_verify_rotate_and_export_around_sse_c(tmp_path: Path) -> None:
    """`check --deep` verifies an SSE-C content's packages by their hash (no key needed), a
    master-key rotation leaves SSE-C keys alone (no master key wraps them), `export`
    writes every other file and names each SSE-C one as failed, with why, and a backup
    serves it with the key."""
    live = LiveServer(tmp_path / "data")
    live.start()
    key = _key()
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="vault")
        s3.put_object(Bucket="vault", Key="sealed", Body=b"s" * 100_000, **_sse(key))
        s3.put_object(Bucket="vault", Key="plain", Body=b"plain")
        with bc.Client(live.url, live.admin_key) as client:
            bucket_id = client.get_bucket_by_name("vault").id
    finally:
        live.stop()
    assert live.cli("check", "--deep").strip().endswith("consistent")
    assert "rewrapped 0 of 1 content keys" in live.cli("rotate-master-key")

    target = tmp_path / "export"
    argv = ["export", bucket_id, str(target), "--json", "--data-dir", str(live.data_dir)]
    exported = launch.run([*argv, "--config", str(live.config_path)], env=dict(os.environ))
    assert exported.returncode != 0, exported.stdout + exported.stderr
    assert exported.stdout, exported.stderr
    report = json.loads(exported.stdout)
    assert report["copied"] == 1 and (target / "plain").read_bytes() == b"plain"
    [failed] = report["failed"]
    assert failed.startswith("sealed: ") and "customer-provided key" in failed
    assert not (target / "sealed").exists()

    # A backup carries the sealed packages and the sealed key: the key reads them there.
    dest = tmp_path / "backup"
    assert "backed up the index" in live.cli("backup", str(dest))
    shutil.copytree(dest, tmp_path / "restored" / "data")
    copy = LiveServer(tmp_path / "restored" / "data", TEST_CONFIG)
    copy.start()
    try:
        s3 = copy.s3()
        sealed = s3.get_object(Bucket="vault", Key="sealed", **_sse(key))["Body"].read()
        assert sealed == b"s" * 100_000
        assert _error(lambda: s3.get_object(Bucket="vault", Key="sealed"))[0] == 400
    finally:
        copy.stop()

    # A flipped byte of the stored packages is found without the key.
    with sqlite3.connect(live.data_dir / "index.db") as db:
        (sha,) = db.execute("SELECT sha256 FROM files WHERE key = 'sealed'").fetchone()
    blob = live.data_dir / "blobs" / sha[:2] / sha[2:4] / sha
    stored = bytearray(blob.read_bytes())
    stored[10] ^= 1
    blob.write_bytes(bytes(stored))
    checked = launch.run(
        ["check", "--deep", "--data-dir", str(live.data_dir), "--config", str(live.config_path)],
        env=dict(os.environ),
    )
    assert checked.returncode != 0
    assert not checked.stdout.strip().endswith("consistent")


def test_a_customer_key_seals_the_content_key_and_no_master_key_rewraps_it() -> None:
    key, content_key = _key(), os.urandom(32)
    envelope = sse_c.wrap_for_customer(content_key, key)
    assert (envelope.algorithm, envelope.key_id) == (encryption.SSE_C, encryption.CUSTOMER)
    assert key not in envelope.encode().encode() and key not in envelope.wrapped
    decoded = encryption.Envelope.decode(envelope.encode())
    assert sse_c.unwrap_for_customer(decoded, key) == content_key
    with pytest.raises(CustomerKeyMismatch):
        sse_c.unwrap_for_customer(decoded, _key())
    assert encryption.MasterKeys(os.urandom(32)).rewrap(decoded) is None
