"""A hostile review of issue 36 point 4 (the content kept in the index read with the file's
row, the cached Prometheus children, the access line made without `info()`), through the
shared server: no path serves another content's bytes or stale bytes, no response carries
the inline bytes where it should not, and a client cannot grow the metrics' label sets."""

from __future__ import annotations

import hashlib
import io
import logging
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.http.metrics import Metrics
from gateway.http.observe import Observer
from gateway.runtime import logs
from tests.support.live import LiveServer, new_bucket, wait_active
from tests.support.metrics import metrics, metrics_key
from tests.support.names import bucket_id_named

TEXT = {"Content-Type": "text/plain"}


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def new_s3_bucket(s3: Any, versioned: bool = False) -> str:
    name = "r36-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def read(s3: Any, bucket: str, key: str, **extra: Any) -> bytes:
    body: bytes = s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read()
    return body


def status_of(call: Any) -> int:
    with pytest.raises(ClientError) as caught:
        call()
    code: int = caught.value.response["ResponseMetadata"]["HTTPStatusCode"]
    return code


@pytest.mark.parametrize("versioned", [False, True])
def test_overwrites_racing_gets_never_answer_a_body_that_is_not_its_own_etag(
    s3: Any, versioned: bool
) -> None:
    """Two contents of the same size written in turn while GETs and HEADs of the key run:
    every answer's body is one of the two, whole, and its ETag and length are that body's."""
    bucket = new_s3_bucket(s3, versioned)
    contents = [b"A" * 700, b"B" * 700, b"C" * 333]
    s3.put_object(Bucket=bucket, Key="k", Body=contents[0])
    stop = threading.Event()
    errors: list[str] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            s3.put_object(Bucket=bucket, Key="k", Body=contents[n % 3])

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(60):
            got = s3.get_object(Bucket=bucket, Key="k")
            body = got["Body"].read()
            if body not in contents or got["ETag"].strip('"') != md5(body):
                errors.append(f"{len(body)} bytes under ETag {got['ETag']}")
            if got["ContentLength"] != len(body):
                errors.append(f"length {got['ContentLength']} for {len(body)} bytes")
            head = s3.head_object(Bucket=bucket, Key="k")
            if head["ETag"].strip('"') not in {md5(c) for c in contents}:
                errors.append(f"HEAD's ETag {head['ETag']}")
    finally:
        stop.set()
        writer.join()
    assert errors == []


def test_copies_renames_and_restores_serve_their_own_content(s3: Any, local_server: Any) -> None:
    """Records built from another record (CopyObject, UploadPartCopy, a /v1 rename, a
    restore of a version) serve the content they name, also after the source changed."""
    bucket = new_s3_bucket(s3, versioned=True)
    first, second = b"first content " * 20, b"second content " * 20
    v1 = s3.put_object(Bucket=bucket, Key="src", Body=first)["VersionId"]
    s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "src"})
    s3.put_object(Bucket=bucket, Key="src", Body=second)
    assert read(s3, bucket, "copy") == first
    assert read(s3, bucket, "src") == second
    assert read(s3, bucket, "src", VersionId=v1) == first

    # A restore: the old version copied over the current one.
    s3.copy_object(
        Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src", "VersionId": v1}
    )
    assert read(s3, bucket, "src") == first

    upload = s3.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
    part = s3.upload_part_copy(
        Bucket=bucket,
        Key="parts",
        UploadId=upload,
        PartNumber=1,
        CopySource={"Bucket": bucket, "Key": "copy"},
        CopySourceRange="bytes=6-12",
    )["CopyPartResult"]
    s3.complete_multipart_upload(
        Bucket=bucket,
        Key="parts",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert read(s3, bucket, "parts") == first[6:13]

    with local_server.client() as http:
        bucket_id = bucket_id_named(http, bucket)
        put = http.put(f"/buckets/{bucket_id}/files/old", content=b"moved " * 9, headers=TEXT)
        assert put.status_code == 201, put.text
        assert http.patch(f"/buckets/{bucket_id}/files/old", json={"key": "new"}).is_success
        assert http.get(f"/buckets/{bucket_id}/files/new").content == b"moved " * 9
        assert http.get(f"/buckets/{bucket_id}/files/old").status_code == 404


def test_delete_markers_ranges_and_conditions_of_an_inline_content(s3: Any) -> None:
    bucket = new_s3_bucket(s3, versioned=True)
    data = bytes(range(256)) * 3
    put = s3.put_object(Bucket=bucket, Key="k", Body=data)
    etag = put["ETag"]

    assert read(s3, bucket, "k", Range="bytes=0-0") == data[:1]
    assert read(s3, bucket, "k", Range="bytes=-5") == data[-5:]
    assert read(s3, bucket, "k", Range="bytes=700-") == data[700:]
    assert read(s3, bucket, "k", Range="bytes=10-19") == data[10:20]
    assert status_of(lambda: s3.get_object(Bucket=bucket, Key="k", Range="bytes=900-")) == 416

    assert status_of(lambda: s3.get_object(Bucket=bucket, Key="k", IfNoneMatch=etag)) == 304
    assert status_of(lambda: s3.get_object(Bucket=bucket, Key="k", IfMatch='"0"')) == 412
    later = datetime.now(UTC) + timedelta(days=1)
    assert status_of(lambda: s3.get_object(Bucket=bucket, Key="k", IfModifiedSince=later)) == 304
    assert status_of(lambda: s3.head_object(Bucket=bucket, Key="k", IfNoneMatch=etag)) == 304

    marker = s3.delete_object(Bucket=bucket, Key="k")["VersionId"]
    assert status_of(lambda: s3.get_object(Bucket=bucket, Key="k")) == 404
    assert status_of(lambda: s3.head_object(Bucket=bucket, Key="k")) == 404
    assert status_of(lambda: s3.get_object(Bucket=bucket, Key="k", VersionId=marker)) == 405
    assert read(s3, bucket, "k", VersionId=put["VersionId"]) == data


def test_a_content_freed_and_written_again_and_a_version_id_of_another_key(s3: Any) -> None:
    bucket = new_s3_bucket(s3)
    data = b"freed then written again " * 10
    s3.put_object(Bucket=bucket, Key="a", Body=data)
    s3.delete_object(Bucket=bucket, Key="a")  # its blob's last reference: refcount 0
    s3.put_object(Bucket=bucket, Key="b", Body=data)
    assert read(s3, bucket, "b") == data

    versioned = new_s3_bucket(s3, versioned=True)
    one = s3.put_object(Bucket=versioned, Key="one", Body=b"one's bytes")["VersionId"]
    s3.put_object(Bucket=versioned, Key="two", Body=b"two's bytes")
    assert status_of(lambda: s3.get_object(Bucket=versioned, Key="two", VersionId=one)) in (
        400,
        404,
    )


def test_another_organization_and_presigned_urls(
    s3: Any, other: tuple[str, Any], local_server: LiveServer
) -> None:
    from tests.support import web

    bucket = new_s3_bucket(s3)
    secret = b"the first organization's bytes " * 5
    s3.put_object(Bucket=bucket, Key="k", Body=secret)
    _, theirs = other
    # Another organization's bucket is not told apart from a missing one.
    assert status_of(lambda: theirs.get_object(Bucket=bucket, Key="k")) in (403, 404)

    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"})
    assert web.get(url).content == secret
    forged = url.replace("/k?", "/k2?")
    s3.put_object(Bucket=bucket, Key="k2", Body=b"another key")
    assert web.get(forged).status_code == 403


def test_listings_and_json_never_carry_the_inline_bytes(s3: Any, local_server: LiveServer) -> None:
    """The /v1 file JSON and the listing name the content, never include it."""
    marker = b"INLINE-MARKER-" + uuid.uuid4().hex.encode()
    with local_server.client() as http:
        bucket_id = new_bucket(http, "r36-" + uuid.uuid4().hex[:12])["id"]
        wait_active(http, bucket_id)
        put = http.put(f"/buckets/{bucket_id}/files/k", content=marker, headers=TEXT)
        assert put.status_code == 201, put.text
        answers = [
            http.get(f"/buckets/{bucket_id}/files"),
            http.get(f"/buckets/{bucket_id}/versions"),
            http.head(f"/buckets/{bucket_id}/files/k"),
            http.patch(f"/buckets/{bucket_id}/files/k", json={"contentType": "text/csv"}),
        ]
        whole = http.get(f"/buckets/{bucket_id}/files/k")
        assert whole.content == marker, whole.headers
        etag = whole.headers["etag"]
        unchanged = http.get(f"/buckets/{bucket_id}/files/k", headers={"If-None-Match": etag})
        assert unchanged.status_code == 304 and unchanged.content == b""
    for answer in answers:
        assert answer.status_code < 300, answer.text
        assert marker not in answer.content
        assert marker.hex().encode() not in answer.content
    import base64

    assert base64.b64encode(marker) not in b"".join(a.content for a in answers)


def test_the_index_listing_reads_no_contents(tmp_path: Any) -> None:
    """A listing of 1,000 small files brings 1,000 records and no content: `list_files`
    selects no `inline_data` (only `get_file` does)."""
    import asyncio

    from storage.attributes import Attributes
    from storage.config import EngineConfig, IndexSettings, StorageSettings
    from storage.engine import Engine
    from storage.models import Actor
    from tests.support.engine import chunks

    async def scenario() -> None:
        config = EngineConfig(
            data_dir=tmp_path, index=IndexSettings(), storage=StorageSettings(fsync=False)
        )
        engine = await Engine.open(config, collect_garbage=False)
        try:
            actor = Actor(org_id=(await engine.orgs.create("many", "pro")).id)
            bucket = await engine.buckets.create(actor, "many", "us-east-1")
            while (await engine.buckets.get(actor, bucket.id)).status != "active":
                await asyncio.sleep(0.001)
            for n in range(1000):
                await engine.files.put(
                    actor, bucket.id, f"k{n:04}", Attributes("text/plain"), chunks(b"x" * 100)
                )
            page = await engine.files.list(actor, bucket.id, limit=1000)
            assert len(page.items) == 1000
            assert all(record.inline is None for record in page.items)
            one = await engine.files.get(actor, bucket.id, "k0001")
            assert one.inline == (one.blob_id, b"x" * 100)
        finally:
            await engine.close()

    asyncio.run(scenario())


def test_invented_methods_paths_and_buckets_do_not_grow_the_label_sets(
    local_server: LiveServer, s3: Any
) -> None:
    """Route labels are templates or operation names, methods are the parser's: 300
    requests for invented paths, buckets and methods add no series after the first."""
    key = metrics_key(local_server)
    api_port = int(local_server.url.rsplit(":", 1)[1])

    def raw(method: str, path: str, port: int = local_server.s3_port) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(
                f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
            )
            return conn.recv(200)

    def series() -> set[tuple[str, tuple]]:
        return {
            k
            for k in metrics(local_server, key)
            if k[0].startswith(("bucketd_requests", "bucketd_request_seconds"))
        }

    for n in range(5):  # every kind once, so the label sets they make exist
        raw("GET", f"/warm-{n}/k")
        raw(f"X{n}INVENTED", "/")
        raw("GET", f"/v1/warm-{n}", api_port)
        raw("PATCH", f"/warm-{n}", api_port)
    before = series()
    for n in range(100):
        raw("GET", f"/bucket-{uuid.uuid4().hex[:10]}/key-{n}")
        raw(f"M{uuid.uuid4().hex[:8].upper()}", f"/p{n}")
        raw("GET", f"/v1/nothing/{n}", api_port)
        raw(f"Q{uuid.uuid4().hex[:8].upper()}", f"/v1/buckets/{n}", api_port)
    after = series()
    assert len(after - before) <= 2, sorted(after - before)[:10]


def test_the_access_line_keeps_its_level_and_off_switch() -> None:
    """The line made without `info()` keeps `info()`'s checks: at info whatever the
    server's level (`set_level`), none when turned off, none when the access logger's own
    level is raised above info, and an error's traceback still in its line."""
    metrics = Metrics()
    scope: dict[str, Any] = {"method": "GET", "state": {}, "client": ("127.0.0.1", 1)}
    access = logging.getLogger(logs.ACCESS)
    cases = (("info", True, None, 1), ("warning", True, None, 1), ("info", False, None, 0))
    for level, on, raised, expected in (*cases, ("info", True, logging.WARNING, 0)):
        out = io.StringIO()
        logs.configure("json", level, on, stream=out)
        try:
            if raised is not None:
                access.setLevel(raised)
            observer = Observer("api", metrics, access_log=True)
            observer.record(scope, "/x", 200, 0, 0, 0, False, 0.001)
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                logging.getLogger("bucketd.review").exception("failed")
        finally:
            logs.configure("json", "info", True, stream=io.StringIO())
        lines = [line for line in out.getvalue().splitlines() if '"route"' in line]
        assert len(lines) == expected, (level, on, out.getvalue())
        assert "RuntimeError: boom" in out.getvalue() and "Traceback" in out.getvalue()
    assert access.disabled is False


def test_a_content_in_a_postgresql_index_is_read_with_its_row(tmp_path: Any, postgres: Any) -> None:
    """The same one-read GET on the PostgreSQL index (its driver hands `bytea` over as its
    own type): the bytes served are the content's, whole and in a range, and an overwrite
    with another content of the same size is served, not the record read before it."""
    import asyncio

    from storage.attributes import Attributes
    from storage.config import EngineConfig, IndexSettings, StorageSettings
    from storage.engine import Engine
    from storage.models import Actor
    from tests.support.engine import chunks

    first, second = b"1" * 300, b"2" * 300

    async def content(engine: Engine, record: Any, start: int, end: int) -> bytes:
        return b"".join([c async for c in await engine.files.open(record, start, end)])

    url = postgres.migrated_database()

    async def scenario() -> None:
        config = EngineConfig(
            data_dir=tmp_path,
            index=IndexSettings(url=url),
            storage=StorageSettings(fsync=False),
        )
        engine = await Engine.open(config, collect_garbage=False)
        try:
            actor = Actor(org_id=(await engine.orgs.create("pg-inline", "pro")).id)
            bucket = await engine.buckets.create(actor, "pg-inline", "us-east-1")
            while (await engine.buckets.get(actor, bucket.id)).status != "active":
                await asyncio.sleep(0.001)
            await engine.files.put(actor, bucket.id, "k", Attributes("text/plain"), chunks(first))
            before = await engine.files.get(actor, bucket.id, "k")
            assert before.inline == (before.blob_id, first)
            assert await content(engine, before, 0, 300) == first
            assert await content(engine, before, 10, 20) == first[10:20]
            await engine.files.put(actor, bucket.id, "k", Attributes("text/plain"), chunks(second))
            after = await engine.files.get(actor, bucket.id, "k")
            assert await content(engine, after, 0, 300) == second
        finally:
            await engine.close()

    asyncio.run(scenario())


def test_v1_restores_versions_of_other_keys_and_snapshot_forks(local_server: LiveServer) -> None:
    """/v1's records built from another record: a restored version serves that version's
    content, a version id read or restored under another key is not found, and
    a snapshot's fork serves what the snapshot saw, not what was written after."""
    with local_server.client() as http:
        bucket = new_bucket(http, "r36-" + uuid.uuid4().hex[:12], versioning="enabled")
        wait_active(http, bucket["id"])
        files = f"/buckets/{bucket['id']}/files"

        def put(key: str, content: bytes) -> str:
            answer = http.put(f"{files}/{key}", content=content, headers=TEXT)
            assert answer.status_code == 201, answer.text
            version: str = answer.json()["data"]["versionId"]
            return version

        one = put("a", b"one")
        put("a", b"two")
        put("b", b"bee")
        assert http.get(f"{files}/b", params={"versionId": one}).status_code == 404
        restore = f"/buckets/{bucket['id']}/versions/{one}/restore"
        assert http.post(restore, json={"key": "a"}).status_code == 201
        assert http.get(f"{files}/a").content == b"one"
        assert http.post(restore, json={"key": "b"}).status_code == 404  # not b's version
        assert http.get(f"{files}/b").content == b"bee"

        taken = http.post(f"/buckets/{bucket['id']}/snapshots", json={})
        assert taken.status_code == 201, taken.text
        put("a", b"after the snapshot")
        fork = http.post(
            f"/snapshots/{taken.json()['data']['id']}/fork",
            json={"name": "r36-" + uuid.uuid4().hex[:12]},
        )
        assert fork.status_code == 201, fork.text
        forked = fork.json()["data"]["id"]
        assert http.get(f"/buckets/{forked}/files/a").content == b"one"
        assert http.get(f"{files}/a").content == b"after the snapshot"
