"""Conditional writes: If-None-Match: * and If-Match on S3 PutObject and
CompleteMultipartUpload and on /v1 uploads; racing writers that all passed the check at the
start get exactly one winner, the others 409 ConditionalRequestConflict, on SQLite and on
PostgreSQL, in the engine and over HTTP from threads; and the client's conditional and
tagged uploads."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from storage.attributes import Attributes
from storage.config import EngineConfig, IndexSettings
from storage.engine import Engine
from storage.errors import ConditionalConflict, PreconditionFailed
from storage.models import Actor, Condition, WriteOptions
from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.postgres import Postgres

TEXT = {"Content-Type": "text/plain"}


def code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = exc.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def test_s3_put_if_none_match_and_if_match(s3: Any) -> None:
    bucket = unique_name("cw")
    s3.create_bucket(Bucket=bucket)
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfNoneMatch="*")
    assert code(exc) == (412, "PreconditionFailed")
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfMatch='"0123"')
    assert code(exc) == (412, "PreconditionFailed")
    s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfMatch=first["ETag"])
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"two"


def test_s3_complete_multipart_is_conditional(s3: Any) -> None:
    bucket = unique_name("cw")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="taken", Body=b"already")

    def upload(key: str) -> tuple[str, dict]:
        upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x")
        return upload_id, {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}

    upload_id, parts = upload("taken")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="taken", UploadId=upload_id, MultipartUpload=parts, IfNoneMatch="*"
        )
    assert code(exc) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=bucket, Key="taken")["Body"].read() == b"already"
    listed = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [u["UploadId"] for u in listed] == [upload_id]  # kept: retry or abort it
    s3.abort_multipart_upload(Bucket=bucket, Key="taken", UploadId=upload_id)
    upload_id, parts = upload("fresh")
    s3.complete_multipart_upload(
        Bucket=bucket, Key="fresh", UploadId=upload_id, MultipartUpload=parts, IfNoneMatch="*"
    )
    assert s3.get_object(Bucket=bucket, Key="fresh")["Body"].read() == b"x"


def test_v1_uploads_are_conditional(local_server: LiveServer) -> None:
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("cw"))
        url = f"/buckets/{bucket['id']}/files/doc"
        created = http.put(url, content=b"one", headers={**TEXT, "If-None-Match": "*"})
        assert created.status_code == 201
        etag = created.json()["data"]["etag"]
        again = http.put(url, content=b"two", headers={**TEXT, "If-None-Match": "*"})
        assert (again.status_code, again.json()["error"]["code"]) == (412, "precondition_failed")
        stale = http.put(url, content=b"two", headers={**TEXT, "If-Match": '"abc"'})
        assert stale.status_code == 412
        odd = http.put(url, content=b"two", headers={**TEXT, "If-None-Match": etag})
        assert odd.status_code == 400
        assert http.put(url, content=b"two", headers={**TEXT, "If-Match": etag}).status_code == 201
        assert http.get(url).content == b"two"
        missing = http.put(
            f"/buckets/{bucket['id']}/files/none", content=b"x", headers={**TEXT, "If-Match": "*"}
        )
        assert missing.status_code == 412


async def _race(index: IndexSettings, data_dir: Path, writers: int = 6) -> None:
    engine = await Engine.open(EngineConfig(data_dir=data_dir, index=index))
    try:
        org = await engine.orgs.create(unique_name("org"), "pro")
        actor = Actor(org_id=org.id)
        bucket = await engine.buckets.create(actor, unique_name("race"), "us-east-1")
        while (await engine.buckets.get(actor, bucket.id)).status != "active":
            await asyncio.sleep(0.001)
        go = asyncio.Event()
        started = 0

        async def body(n: int) -> AsyncIterator[bytes]:
            nonlocal started
            started += 1  # the condition was checked before the body is read
            await go.wait()
            yield f"writer {n}".encode()

        options = WriteOptions(condition=Condition(if_none_match_any=True))
        tasks = [
            asyncio.create_task(
                engine.files.put(
                    actor, bucket.id, "k", Attributes("text/plain"), body(n), options=options
                )
            )
            for n in range(writers)
        ]
        while started < writers:
            await asyncio.sleep(0.001)
        go.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1
        assert all(isinstance(r, ConditionalConflict) for r in lost), lost
        stored = await engine.files.get(actor, bucket.id, "k")
        assert stored.sha256 == won[0].sha256
        counted = await engine.buckets.get(actor, bucket.id)
        assert (counted.file_count, counted.size_bytes) == (1, won[0].size)
        with pytest.raises(PreconditionFailed):  # a later writer is refused at once
            await engine.files.put(
                actor, bucket.id, "k", Attributes("text/plain"), body(99), options=options
            )
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_racing_conditional_writers_one_wins_on_sqlite(tmp_path: Path) -> None:
    await _race(IndexSettings(), tmp_path / "data")


@pytest.mark.anyio
async def test_racing_conditional_writers_one_wins_on_postgresql(
    postgres: Postgres, tmp_path: Path
) -> None:
    await _race(IndexSettings(url=postgres.new_database()), tmp_path / "data")


def test_racing_s3_writers_get_409(local_server: LiveServer) -> None:
    """Over HTTP: writers whose bodies arrive together all pass the check at the start;
    one wins, each other gets 409 ConditionalRequestConflict (or 412 if it began after)."""
    s3 = local_server.s3()
    bucket = unique_name("cw")
    s3.create_bucket(Bucket=bucket)
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=600
    )

    async def put(client: httpx.AsyncClient, gate: asyncio.Event, n: int) -> int:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"x"
            await gate.wait()
            yield f"writer {n}".encode()

        answer = await client.put(url, content=chunks(), headers={"If-None-Match": "*"})
        return answer.status_code

    async def race() -> list[int]:
        gate = asyncio.Event()
        async with web.async_client(timeout=30) as client:
            tasks = [asyncio.create_task(put(client, gate, n)) for n in range(4)]
            await asyncio.sleep(0.5)
            gate.set()
            return await asyncio.gather(*tasks)

    statuses = asyncio.run(race())
    assert statuses.count(200) == 1, statuses
    assert set(statuses) <= {200, 409, 412}, statuses
    assert 409 in statuses, statuses


def test_the_client_uploads_conditionally(local_server: LiveServer) -> None:
    from bucketd_client import Client, PreconditionFailed

    with Client(local_server.url, local_server.admin_key) as client:
        bucket = client.wait_until_active(client.create_bucket(unique_name("cw"), "us-east-1"))
        first = client.upload(bucket.id, "k", b"one", if_none_match=True)
        with pytest.raises(PreconditionFailed):
            client.upload(bucket.id, "k", b"two", if_none_match=True)
        with pytest.raises(PreconditionFailed):
            client.upload(bucket.id, "k", b"two", if_match='"0"')
        assert client.upload(bucket.id, "k", b"two", if_match=first.etag).size == 3


def test_the_client_tags_files(local_server: LiveServer) -> None:
    from bucketd_client import Client

    with Client(local_server.url, local_server.admin_key) as client:
        bucket = client.wait_until_active(client.create_bucket(unique_name("tg"), "us-east-1"))
        made = client.upload(bucket.id, "k", b"one", tags={"team": "a b", "x": "1"})
        assert made.tags == {"team": "a b", "x": "1"}
        assert client.update_file(bucket.id, "k", tags={"y": "2"}).tags == {"y": "2"}


@pytest.fixture(scope="module")
def postgres_server(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server whose index is PostgreSQL (the shared one's is SQLite)."""
    env = {"BUCKETD_INDEX__URL": postgres.new_database()}
    live = LiveServer(tmp_path_factory.mktemp("pg-writes") / "data", TEST_CONFIG, env=env)
    live.start()
    yield live
    live.stop()


@pytest.mark.parametrize("index", ["sqlite", "postgresql"])
@pytest.mark.parametrize("condition", ["If-None-Match", "If-Match"])
def test_threads_racing_conditional_writes_of_1_mib_leave_one_winner(
    request: pytest.FixtureRequest, index: str, condition: str
) -> None:
    """Four threads, each with a client of its own, start a conditional PutObject of a
    different 1 MiB body at once: one wins; each other gets 412 (checked before its body
    was read) or 409 ConditionalRequestConflict (checked again in the commit's
    transaction); the key holds the winner's bytes, once."""
    live: LiveServer = request.getfixturevalue(
        "local_server" if index == "sqlite" else "postgres_server"
    )
    access, secret = live.s3_credentials()
    clients = [live.s3(access, secret) for _ in range(4)]
    bucket = unique_name("race")
    clients[0].create_bucket(Bucket=bucket)
    if condition == "If-None-Match":
        guard = {"IfNoneMatch": "*"}
    else:
        etag = clients[0].put_object(Bucket=bucket, Key="k", Body=b"before")["ETag"]
        guard = {"IfMatch": etag}
    bodies = [os.urandom(1024 * 1024) for _ in clients]
    start = threading.Barrier(len(clients))

    def put(n: int) -> int:
        start.wait()
        try:
            clients[n].put_object(Bucket=bucket, Key="k", Body=bodies[n], **guard)
        except ClientError as exc:
            return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
        return 200

    with ThreadPoolExecutor(len(clients)) as pool:
        statuses = list(pool.map(put, range(len(clients))))
    assert statuses.count(200) == 1, statuses
    assert set(statuses) <= {200, 409, 412}, statuses
    stored = clients[0].get_object(Bucket=bucket, Key="k")["Body"].read()
    assert stored == bodies[statuses.index(200)]
    assert clients[0].list_objects_v2(Bucket=bucket)["KeyCount"] == 1
