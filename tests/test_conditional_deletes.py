"""Conditional deletes (S3's If-Match, x-amz-if-match-last-modified-time and
x-amz-if-match-size on DeleteObject, ETag/LastModifiedTime/Size per object in DeleteObjects,
If-Match on /v1 DELETE), checked in the deleting transaction: a mismatch is 412 and removes
nothing, a conditional delete of nothing is 404, and of a writer and a conditional deleter
racing on SQLite and PostgreSQL exactly one wins."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from storage.attributes import Attributes
from storage.config import EngineConfig, IndexSettings
from storage.engine import Engine
from storage.errors import PreconditionFailed
from storage.models import Actor, DeleteCondition
from tests.support import web
from tests.support.engine import chunks
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name
from tests.support.postgres import Postgres
from tests.support.s3 import signed_headers


def status(error: pytest.ExceptionInfo[ClientError]) -> int:
    return int(error.value.response["ResponseMetadata"]["HTTPStatusCode"])


def test_s3_deletes_only_what_the_condition_names(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    name = unique_name("cdel")
    s3.create_bucket(Bucket=name)
    etag = s3.put_object(Bucket=name, Key="k", Body=b"one")["ETag"]
    with pytest.raises(ClientError) as error:
        s3.delete_object(Bucket=name, Key="k", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert status(error) == 412
    with pytest.raises(ClientError) as error:
        s3.delete_object(Bucket=name, Key="k", IfMatchSize=4)
    assert status(error) == 412
    assert s3.get_object(Bucket=name, Key="k")["Body"].read() == b"one"
    modified = s3.head_object(Bucket=name, Key="k")["LastModified"]
    s3.delete_object(
        Bucket=name, Key="k", IfMatch=etag, IfMatchSize=3, IfMatchLastModifiedTime=modified
    )
    with pytest.raises(ClientError) as error:
        s3.delete_object(Bucket=name, Key="k", IfMatch="*")
    assert status(error) == 404
    s3.put_object(Bucket=name, Key="a", Body=b"a")
    kept = s3.put_object(Bucket=name, Key="b", Body=b"b")["ETag"]
    answer = s3.delete_objects(
        Bucket=name,
        Delete={
            "Objects": [
                {"Key": "a", "ETag": '"ffffffffffffffffffffffffffffffff"'},
                {"Key": "b", "ETag": kept},
            ]
        },
    )
    assert [e["Code"] for e in answer["Errors"]] == ["PreconditionFailed"]
    assert [d["Key"] for d in answer["Deleted"]] == ["b"]
    assert s3.get_object(Bucket=name, Key="a")["Body"].read() == b"a"


def test_v1_delete_takes_if_match(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    name = unique_name("cdel")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"one")
    with local_server.client() as http:
        url = f"/buckets/{bucket_id_named(http, name)}/files/k"
        etag = http.head(url).headers["etag"]
        stale = http.delete(url, headers={"If-Match": '"nope"'})
        assert stale.status_code == 412
        assert http.get(url).content == b"one"
        assert http.delete(url, headers={"If-Match": etag}).status_code == 200
        assert http.delete(url, headers={"If-Match": "*"}).status_code == 404


async def _write(engine: Engine, actor: Actor, bucket_id: str, key: str) -> str:
    await engine.files.put(actor, bucket_id, key, Attributes("text/plain"), chunks(b"second"))
    return "written"


async def _delete(
    engine: Engine, actor: Actor, bucket_id: str, key: str, condition: DeleteCondition
) -> str:
    try:
        await engine.files.delete(actor, bucket_id, key, condition=condition)
    except PreconditionFailed:
        return "refused"
    return "deleted"


async def _race(engine: Engine) -> None:
    org = await engine.orgs.create(unique_name("org"), "pro")
    actor = Actor(org_id=org.id)
    bucket = await engine.buckets.create(actor, unique_name("b"), "us-east-1", at_once=True)
    for round_ in range(20):
        key = f"k{round_}"
        first = await engine.files.put(
            actor, bucket.id, key, Attributes("text/plain"), chunks(b"first")
        )
        condition = DeleteCondition(if_match=f'"{first.md5}"')
        _, deleted = await asyncio.gather(
            _write(engine, actor, bucket.id, key),
            _delete(engine, actor, bucket.id, key, condition),
        )
        # The delete came first (and the write then made "second"), or the write did and
        # the delete was refused: never is "second" deleted.
        current = await engine.files.get(actor, bucket.id, key)
        assert current.size == len(b"second"), deleted


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[Engine]:
    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    yield engine
    await engine.close()


@pytest.mark.anyio
async def test_a_conditional_delete_racing_a_write_on_sqlite(sqlite_engine: Engine) -> None:
    await _race(sqlite_engine)


@pytest.mark.anyio
async def test_a_conditional_delete_racing_a_write_on_postgresql(
    postgres: Postgres, tmp_path: Path
) -> None:
    config = EngineConfig(
        data_dir=tmp_path / "data", index=IndexSettings(url=postgres.new_database())
    )
    engine = await Engine.open(config)
    try:
        await _race(engine)
    finally:
        await engine.close()


def test_a_condition_that_is_no_number_or_is_empty_never_deletes(local_server: LiveServer) -> None:
    """A size in other digits (²) is refused, not a 500 after earlier keys went; an empty
    ETag element holds for nothing (it was read as no condition)."""
    s3: Any = local_server.s3()
    name = unique_name("cdel")
    s3.create_bucket(Bucket=name)
    for key in ("first", "second", "third"):
        s3.put_object(Bucket=name, Key=key, Body=b"x")
    body = (
        "<Delete><Object><Key>first</Key><Size>\u00b2</Size></Object>"
        "<Object><Key>second</Key><ETag></ETag></Object>"
        "<Object><Key>third</Key></Object></Delete>"
    ).encode()
    path = f"/{name}?delete"
    request = AWSRequest("POST", local_server.s3_url + path, data=body)
    request.headers["Host"] = local_server.s3_url.removeprefix("http://")
    S3SigV4Auth(Credentials(*local_server.s3_credentials()), "s3", "us-east-1").add_auth(request)
    sent = web.post(local_server.s3_url + path, headers=dict(request.headers), content=body)
    assert sent.status_code == 200, sent.text
    assert sent.text.count("<Error>") == 2
    assert s3.get_object(Bucket=name, Key="first")["Body"].read() == b"x"
    assert s3.get_object(Bucket=name, Key="second")["Body"].read() == b"x"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=name, Key="third")
    header = signed_headers(
        local_server, "DELETE", f"/{name}/first", {"x-amz-if-match-size": "\u00b2"}
    )
    raw = {field: value.encode("utf-8") for field, value in header.items()}
    refused = web.delete(f"{local_server.s3_url}/{name}/first", headers=raw)
    assert refused.status_code == 400
