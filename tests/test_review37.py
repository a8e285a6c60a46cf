"""A hostile review of issue 37's encryption (SSE-C single objects and multipart, copies,
tampering), through boto3 against the real servers: what a caller without the customer's
key, or whoever reads the index or a backup, can learn of an SSE-C object's plaintext, and
whether a changed stored package ever reads as bytes. Each test is an attack that held or
a hole fixed with it."""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
import zlib
from typing import Any
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError

from storage.backends.local.blobs import blob_relpath
from tests.support import web
from tests.support.live import LiveServer

PART = 5 * 1024 * 1024


def _sse(key: bytes) -> dict[str, Any]:
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def _source_sse(key: bytes) -> dict[str, Any]:
    return {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": key}


def _bucket(s3: Any, prefix: str) -> str:
    name = f"{prefix}-{os.urandom(5).hex()}"
    s3.create_bucket(Bucket=name)
    return name


def _status(call: Any) -> int:
    with pytest.raises(ClientError) as caught:
        call()
    status: int = caught.value.response["ResponseMetadata"]["HTTPStatusCode"]
    return status


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def _index_text(live: LiveServer, bucket: str) -> str:
    """Every checksum the index holds for the bucket's versions and its uploads' parts."""
    with sqlite3.connect(live.data_dir / "index.db") as db:
        files = db.execute(
            "SELECT f.checksum FROM files f JOIN buckets b ON b.id = f.bucket_id WHERE b.name = ?",
            (bucket,),
        ).fetchall()
        parts = db.execute(
            "SELECT p.checksum FROM multipart_parts p JOIN multipart_uploads u "
            "ON u.upload_id = p.upload_id JOIN buckets b ON b.id = u.bucket_id WHERE b.name = ?",
            (bucket,),
        ).fetchall()
    return " ".join(str(row[0]) for row in files + parts)


def test_an_sse_c_objects_checksum_is_sealed_and_answered_only_with_its_key(
    local_server: LiveServer,
) -> None:
    """Hole (fixed): the SHA-256 or CRC32 of an SSE-C object's plaintext, which boto3 sends
    with every upload, was kept in clear in the index, so whoever reads the index or a
    backup could confirm a guessed plaintext without the key, though the ETag and the
    envelope say nothing of it. It is now sealed under the customer's key; a reader with
    the key gets it back as S3 gives it (x-amz-checksum-mode), on single objects, parts,
    completions and copies."""
    s3: Any = local_server.s3()
    bucket = _bucket(s3, "rv37-sum")
    key, other = os.urandom(32), os.urandom(32)
    body = b"a guessable plaintext " * 1000
    sha = _b64(hashlib.sha256(body).digest())

    put = s3.put_object(Bucket=bucket, Key="k", Body=body, ChecksumAlgorithm="SHA256", **_sse(key))
    assert put["ChecksumSHA256"] == sha
    assert sha not in _index_text(local_server, bucket)
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED", **_sse(key))
    assert head["ChecksumSHA256"] == sha
    got = s3.get_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED", **_sse(key))
    assert (got["ChecksumSHA256"], got["Body"].read()) == (sha, body)
    assert _status(lambda: s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")) == 400

    # Copies: under another customer key it is sealed under that one; in plaintext it is
    # the plaintext's again; a plaintext source's checksum is sealed in an SSE-C copy.
    source = {"Bucket": bucket, "Key": "k"}
    s3.copy_object(Bucket=bucket, Key="c", CopySource=source, **_source_sse(key), **_sse(other))
    s3.copy_object(Bucket=bucket, Key="plain", CopySource=source, **_source_sse(key))
    s3.put_object(Bucket=bucket, Key="p", Body=body, ChecksumAlgorithm="SHA256")
    s3.copy_object(Bucket=bucket, Key="pc", CopySource={"Bucket": bucket, "Key": "p"}, **_sse(key))
    for name, given in (("c", _sse(other)), ("plain", {}), ("pc", _sse(key))):
        head = s3.head_object(Bucket=bucket, Key=name, ChecksumMode="ENABLED", **given)
        assert (name, head.get("ChecksumSHA256")) == (name, sha)
    s3.delete_object(Bucket=bucket, Key="p")
    s3.delete_object(Bucket=bucket, Key="plain")
    assert sha not in _index_text(local_server, bucket)

    # Multipart: each part's CRC32 sealed while the upload waits; the completion, given
    # the key, checks the parts' CRCs as the client names them and seals the composite.
    parts_body = [os.urandom(PART), os.urandom(1000)]
    crcs = [_b64(zlib.crc32(p).to_bytes(4, "big")) for p in parts_body]
    upload = s3.create_multipart_upload(
        Bucket=bucket, Key="m", ChecksumAlgorithm="CRC32", **_sse(key)
    )["UploadId"]
    parts = []
    for number, data in enumerate(parts_body, start=1):
        answer = s3.upload_part(
            Bucket=bucket,
            Key="m",
            UploadId=upload,
            PartNumber=number,
            Body=data,
            ChecksumAlgorithm="CRC32",
            **_sse(key),
        )
        assert answer["ChecksumCRC32"] == crcs[number - 1]
        parts.append(
            {"PartNumber": number, "ETag": answer["ETag"], "ChecksumCRC32": crcs[number - 1]}
        )
    waiting = _index_text(local_server, bucket)
    assert not any(crc in waiting for crc in crcs)
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=upload, MultipartUpload={"Parts": parts}, **_sse(key)
    )
    whole = zlib.crc32(b"".join(base64.b64decode(c) for c in crcs)).to_bytes(4, "big")
    assert done["ChecksumCRC32"] == f"{_b64(whole)}-2"
    assert _b64(whole) not in _index_text(local_server, bucket)
    head = s3.head_object(Bucket=bucket, Key="m", ChecksumMode="ENABLED", **_sse(key))
    assert head["ChecksumCRC32"] == f"{_b64(whole)}-2"

    # Neither the key nor its MD5 is in the server's log.
    log = local_server.log_path.read_text() if local_server.log_path.exists() else ""
    for secret in (key, other):
        assert _b64(secret) not in log
        assert _b64(hashlib.md5(secret).digest()) not in log


def test_the_s3_backends_commit_seals_an_sse_c_checksum_too(s3_server: LiveServer) -> None:
    """The S3 backend commits through its own path (publish, then commit): it seals the
    checksum as the local one does."""
    s3: Any = s3_server.s3()
    bucket = _bucket(s3, "rv37-s3sum")
    key = os.urandom(32)
    body = os.urandom(1000)
    sha = _b64(hashlib.sha256(body).digest())
    s3.put_object(Bucket=bucket, Key="k", Body=body, ChecksumAlgorithm="SHA256", **_sse(key))
    assert sha not in _index_text(s3_server, bucket)
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED", **_sse(key))
    assert head["ChecksumSHA256"] == sha


def _tamper(live: LiveServer, request: pytest.FixtureRequest, bucket: str, key: str) -> None:
    """Flip one byte of the second stored package of `key`, where the backend keeps it."""
    if live.backend == "local":
        with sqlite3.connect(live.data_dir / "index.db") as db:
            (blob_id,) = db.execute(
                "SELECT f.blob_id FROM files f JOIN buckets b ON b.id = f.bucket_id "
                "WHERE b.name = ? AND f.key = ?",
                (bucket, key),
            ).fetchone()
        path = live.data_dir / "blobs" / blob_relpath(blob_id)
        data = path.read_bytes()
        path.chmod(0o600)
        path.write_bytes(data[:70_000] + bytes([data[70_000] ^ 1]) + data[70_001:])
        return
    cluster = request.getfixturevalue("seaweed").client()
    for listed in cluster.list_buckets()["Buckets"]:
        if bucket.replace("-", "") not in listed["Name"].replace("-", ""):
            continue
        for obj in cluster.list_objects_v2(Bucket=listed["Name"]).get("Contents", []):
            if obj["Key"].endswith(key):
                data = cluster.get_object(Bucket=listed["Name"], Key=obj["Key"])["Body"].read()
                changed = data[:70_000] + bytes([data[70_000] ^ 1]) + data[70_001:]
                cluster.put_object(Bucket=listed["Name"], Key=obj["Key"], Body=changed)
                return
    raise AssertionError("the stored content was not found in the cluster")


def test_a_flipped_byte_in_an_sse_c_package_is_an_error_on_full_and_range_reads(
    server: LiveServer, request: pytest.FixtureRequest
) -> None:
    """A byte of the stored packages changed where the backend keeps them (a disk, an
    intruder with the data dir or the cluster): a read that touches that package is an
    error status, never bytes, on both backends; with the key, and without it still 400.
    On local disk the package fails to authenticate (500); on the S3 backend the cluster's
    ETag no longer matches the one the index names (every read sends If-Match), so the
    read finds no such content (404, as for a plaintext object changed there) before any
    package is opened."""
    s3: Any = server.s3()
    bucket = _bucket(s3, "rv37-flip")
    key = os.urandom(32)
    body = os.urandom(3 * 65536 + 10)
    s3.put_object(Bucket=bucket, Key="k", Body=body, **_sse(key))
    _tamper(server, request, bucket, "k")
    expected = 500 if server.backend == "local" else 404
    for asked in ("bytes=0-", "bytes=65530-65600", "bytes=70000-70001"):
        read = lambda asked=asked: s3.get_object(  # noqa: E731
            Bucket=bucket, Key="k", Range=asked, **_sse(key)
        )["Body"].read()
        assert (asked, _status(read)) == (asked, expected)
    assert _status(lambda: s3.get_object(Bucket=bucket, Key="k")["Body"].read()) == 400
    if server.backend == "local":  # the packages left as they were still open alone
        first = s3.get_object(Bucket=bucket, Key="k", Range="bytes=0-99", **_sse(key))
        assert first["Body"].read() == body[:100]


def test_a_sigv2_presigned_urls_x_amz_query_parameters_are_signed(
    local_server: LiveServer,
) -> None:
    """Hole (fixed): the x-amz- query parameters of a request are read as its headers (the
    presigners put an ACL, metadata or an SSE-C key there), but SigV2 did not sign them:
    whoever held a presigned PUT URL could add `x-amz-acl=public-read`, metadata, a copy
    source or an SSE-C key of their own (an object its signer can then never read), and
    the signature still held. They are signed now, as botocore signs them; a presigned GET
    that carries the customer key (boto3 puts it in the query for SigV2) reads the object."""
    s3: Any = local_server.s3(signature_version="s3")
    bucket = _bucket(s3, "rv37-v2")
    key = os.urandom(32)
    s3.put_object(Bucket=bucket, Key="g", Body=b"sealed body", **_sse(key))
    with_key = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "g", **_sse(key)}
    )
    assert "x-amz-server-side-encryption-customer-key=" in with_key
    read = web.get(with_key)
    assert (read.status_code, read.content) == (200, b"sealed body")

    plain_get = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "g"})
    digest = _b64(hashlib.md5(key).digest())
    added = {
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key": _b64(key),
        "x-amz-server-side-encryption-customer-key-md5": digest,
    }
    assert web.get(plain_get, params=added).status_code == 403
    put = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "u"})
    for extra in ({"x-amz-acl": "public-read"}, {"x-amz-meta-who": "not the signer"}, added):
        assert web.put(put, params=extra, content=b"x").status_code == 403
    assert _status(lambda: s3.head_object(Bucket=bucket, Key="u")) == 404
    assert web.put(put, content=b"as signed").status_code == 200
    # The URL holds the key, but no log line holds the URL's query.
    log = local_server.log_path.read_text() if local_server.log_path.exists() else ""
    assert _b64(key) not in log and quote(_b64(key), safe="") not in log
