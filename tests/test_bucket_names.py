"""Bucket names between organizations (issue 31, point 6). Names are unique per
organization; a request from outside a bucket's organization names it by its name alone, so
a name that once reached outsiders (the bucket shared something, or an object in it got a
public ACL) stays reserved to its bucket until the bucket is deleted or renamed, and nothing
else answers outsiders by name. Through real servers (boto3 on S3, httpx on /v1), the engine
on both indexes, and the migration that reserves the names of existing data."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from botocore.exceptions import ClientError

from storage.attributes import Attributes, copied
from storage.config import EngineConfig
from storage.engine import Engine
from storage.errors import InvalidBucketName, SharedNameTaken
from storage.index import postgres as postgres_driver
from storage.index import sqlite as sqlite_driver
from storage.index.migrations import pending
from storage.models import Actor
from storage.rules.validation import check_bucket_name
from tests.support import web
from tests.support.databases import gateway_configs
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.orgs import make_key, make_org
from tests.support.postgres import Postgres
from tests.support.s3 import code
from tests.support.seaweed import SeaweedServer

SCOPES = ["buckets:read", "buckets:write", "files:read", "files:write"]
CORS = {"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}
MIGRATION = 16
"""The migration that reserves the names of existing data (0016_bucket_names.sql)."""


@dataclass
class Org:
    """An organization with an S3 client and a /v1 client of its own."""

    id: str
    s3: Any
    http: httpx.Client


@pytest.fixture
def http(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as client:
        yield client


@pytest.fixture
def other(local_server: LiveServer) -> Iterator[Org]:
    org = make_org(local_server)
    key = make_key(local_server, org, SCOPES)
    with local_server.client(key) as client:
        yield Org(org, local_server.s3(*local_server.s3_credentials(org)), client)


def read(anonymous: Any, bucket: str, key: str) -> bytes | str:
    """What a request without credentials gets for bucket/key: the bytes, or the error."""
    try:
        body: bytes = anonymous.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as error:
        return code(error)
    return body


def refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as error:
        call(**kwargs)
    return code(error.value)


def put(http: httpx.Client, bucket: dict[str, Any], key: str, body: bytes) -> None:
    answer = http.put(
        f"/buckets/{bucket['id']}/files/{key}", content=body, headers={"Content-Type": "text/plain"}
    )
    assert answer.status_code == 201, answer.text


def patch(http: httpx.Client, bucket: dict[str, Any], **changes: object) -> httpx.Response:
    return http.patch(f"/buckets/{bucket['id']}", json=changes)


def error_code(answer: httpx.Response) -> str:
    return str(answer.json()["error"]["code"])


def public_read_policy(name: str) -> str:
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{name}/*",
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def test_a_name_stays_with_the_bucket_that_served_outsiders(
    http: httpx.Client, other: Org, anonymous: Any
) -> None:
    """Attack (a): org A's public `site` turned private used to release the name, and org B's
    own `site` made public then answered A's anonymous URLs."""
    name = unique_name("site")
    site = new_bucket(http, name)
    put(http, site, "index.html", b"A's page")
    assert patch(http, site, public=True).status_code == 200
    assert read(anonymous, name, "index.html") == b"A's page"
    created = other.http.post(
        "/buckets", json={"name": name, "region": "us-east-1", "public": True}
    )
    assert created.status_code == 409 and error_code(created) == "bucket_name_taken"
    assert "(here, or public on this server)" in created.json()["error"]["message"]
    theirs = new_bucket(other.http, name)  # a private bucket of that name: names are per org
    put(other.http, theirs, "index.html", b"B's page")

    assert patch(http, site, public=False).status_code == 200
    assert read(anonymous, name, "index.html") == "AccessDenied"
    taken = patch(other.http, theirs, public=True)
    assert taken.status_code == 409 and error_code(taken) == "bucket_name_taken"
    attempts: list[tuple[Any, dict[str, Any]]] = [
        (other.s3.put_bucket_acl, {"ACL": "public-read"}),
        (other.s3.put_bucket_cors, {"CORSConfiguration": CORS}),
        (other.s3.put_bucket_policy, {"Policy": public_read_policy(name)}),
        (other.s3.put_object_acl, {"Key": "index.html", "ACL": "public-read"}),
        (other.s3.put_object, {"Key": "new.html", "Body": b"B's", "ACL": "public-read"}),
    ]
    for call, kwargs in attempts:
        assert refused(call, Bucket=name, **kwargs) == "BucketAlreadyExists", call
    assert refused(other.s3.head_object, Bucket=name, Key="new.html") == "404"
    assert read(anonymous, name, "index.html") == "AccessDenied"  # A's, private: never B's
    with pytest.raises(ClientError):
        anonymous.get_object(Bucket=name, Key="new.html")

    assert patch(http, site, public=True).status_code == 200
    assert read(anonymous, name, "index.html") == b"A's page"


def test_a_public_object_keeps_its_buckets_name(s3: Any, other: Org, anonymous: Any) -> None:
    """Attack (b): anonymous clients read org A's public objects in its private `photos`
    only while no other bucket bore the name; org B creating one cut them off, and making
    its own public took the name over."""
    name = unique_name("photos")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="cat.jpg", Body=b"A's cat", ACL="public-read")
    s3.put_object(Bucket=name, Key="dog.jpg", Body=b"A's dog")
    s3.put_object_acl(Bucket=name, Key="dog.jpg", ACL="public-read")
    s3.put_object(Bucket=name, Key="plan.txt", Body=b"A's plan")
    assert read(anonymous, name, "cat.jpg") == b"A's cat"

    other.s3.create_bucket(Bucket=name)  # allowed: names are per organization
    other.s3.put_object(Bucket=name, Key="cat.jpg", Body=b"B's cat")
    assert read(anonymous, name, "cat.jpg") == b"A's cat"
    assert read(anonymous, name, "dog.jpg") == b"A's dog"
    assert read(anonymous, name, "plan.txt") == "AccessDenied"
    assert refused(other.s3.put_bucket_acl, Bucket=name, ACL="public-read") == (
        "BucketAlreadyExists"
    )
    assert refused(other.s3.put_object_acl, Bucket=name, Key="cat.jpg", ACL="public-read") == (
        "BucketAlreadyExists"
    )
    assert read(anonymous, name, "cat.jpg") == b"A's cat"
    assert other.s3.get_object(Bucket=name, Key="cat.jpg")["Body"].read() == b"B's cat"


WRITES = ["PutObject", "CopyObject", "CreateMultipartUpload", "PutObjectAcl", "PostObject"]


def write_public(s3: Any, bucket: str, way: str) -> str | None:
    """Give the object `k` of `bucket` the public-read ACL by `way`: None, or the error code."""
    try:
        if way == "PutObject":
            s3.put_object(Bucket=bucket, Key="k", Body=b"data", ACL="public-read")
        elif way == "CopyObject":
            s3.put_object(Bucket=bucket, Key="source", Body=b"data")
            source = {"Bucket": bucket, "Key": "source"}
            s3.copy_object(Bucket=bucket, Key="k", CopySource=source, ACL="public-read")
        elif way == "CreateMultipartUpload":
            upload = s3.create_multipart_upload(Bucket=bucket, Key="k", ACL="public-read")
            part = s3.upload_part(
                Bucket=bucket, Key="k", UploadId=upload["UploadId"], PartNumber=1, Body=b"data"
            )
            s3.complete_multipart_upload(
                Bucket=bucket,
                Key="k",
                UploadId=upload["UploadId"],
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
            )
        elif way == "PutObjectAcl":
            s3.put_object(Bucket=bucket, Key="k", Body=b"data")
            s3.put_object_acl(Bucket=bucket, Key="k", ACL="public-read")
        else:
            post = s3.generate_presigned_post(
                Bucket=bucket,
                Key="k",
                Fields={"acl": "public-read"},
                Conditions=[{"acl": "public-read"}],
            )
            sent = web.post(
                post["url"], data=post["fields"], files={"file": ("k", b"data", "text/plain")}
            )
            if sent.status_code != 204:
                return sent.text.split("<Code>")[1].split("</Code>")[0]
    except ClientError as error:
        return code(error)
    return None


@pytest.mark.parametrize("way", WRITES)
def test_each_write_of_a_public_acl_reserves_the_name_or_meets_its_holder(
    s3: Any, other: Org, anonymous: Any, way: str
) -> None:
    name = unique_name("w")
    s3.create_bucket(Bucket=name)
    other.s3.create_bucket(Bucket=name)  # before: the name was ambiguous, nobody was served
    assert write_public(s3, name, way) is None
    assert read(anonymous, name, "k") == b"data"
    # Now the name is the first bucket's: the same write in the other one meets it, and
    # whatever the write sends is not stored (or stays private).
    assert write_public(other.s3, name, way) == "BucketAlreadyExists"
    if way == "PutObjectAcl":
        grants = other.s3.get_object_acl(Bucket=name, Key="k")["Grants"]
        assert all("URI" not in grant["Grantee"] for grant in grants)
    else:
        assert refused(other.s3.head_object, Bucket=name, Key="k") == "404"
    assert other.s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    assert read(anonymous, name, "k") == b"data"


def test_a_rename_moves_the_reservation_and_frees_the_old_name(
    http: httpx.Client, other: Org, anonymous: Any
) -> None:
    old, new = unique_name("old"), unique_name("new")
    mine = new_bucket(http, old)
    put(http, mine, "f", b"mine")
    assert patch(http, mine, public=True).status_code == 200
    assert patch(http, mine, public=False).status_code == 200  # shares nothing now
    theirs_old, theirs_new = new_bucket(other.http, old), new_bucket(other.http, new)
    assert patch(other.http, theirs_old, public=True).status_code == 409

    assert patch(http, mine, name=new).status_code == 200
    taken = patch(other.http, theirs_new, public=True)
    assert taken.status_code == 409 and error_code(taken) == "bucket_name_taken"
    assert patch(other.http, theirs_old, public=True).status_code == 200  # the old name is free
    put(other.http, theirs_old, "f", b"theirs")
    assert read(anonymous, old, "f") == b"theirs"
    assert read(anonymous, new, "f") == "AccessDenied"  # mine, still private
    assert patch(http, mine, public=True).status_code == 200
    assert read(anonymous, new, "f") == b"mine"
    # Nor can a bucket holding its name be renamed onto a name another one holds.
    moved = patch(http, mine, name=old)
    assert moved.status_code == 409 and error_code(moved) == "bucket_name_taken"
    assert read(anonymous, new, "f") == b"mine"


def test_a_deleted_bucket_frees_its_name(http: httpx.Client, other: Org, anonymous: Any) -> None:
    name = unique_name("gone")
    mine = new_bucket(http, name)
    put(http, mine, "f", b"mine")
    assert patch(http, mine, public=True).status_code == 200
    theirs = new_bucket(other.http, name)
    put(other.http, theirs, "f", b"theirs")
    assert patch(other.http, theirs, public=True).status_code == 409
    assert http.delete(f"/buckets/{mine['id']}", params={"force": "true"}).is_success
    assert read(anonymous, name, "f") == "AccessDenied"  # no bucket holds the name
    assert patch(other.http, theirs, public=True).status_code == 200
    assert read(anonymous, name, "f") == b"theirs"


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def reservations_hold(engine: Engine) -> None:
    """The reservation rules on one engine: the index's scripts, whatever its database."""
    a = Actor(org_id=(await engine.orgs.create("a", "pro")).id)
    b = Actor(org_id=(await engine.orgs.create("b", "pro")).id)

    async def bucket(actor: Actor, name: str) -> str:
        return (await engine.buckets.create(actor, name, "us-east-1", at_once=True)).id

    async def holder(name: str) -> str:
        return (await engine.buckets.shared(name)).id

    public = Attributes("text/plain", acl="public-read")
    photos_a, photos_b = await bucket(a, "photos"), await bucket(b, "photos")
    await engine.files.put(a, photos_a, "cat", public, chunks(b"cat"))
    assert await holder("photos") == photos_a
    with pytest.raises(SharedNameTaken):
        await engine.files.put(b, photos_b, "cat", public, chunks(b"x"))
    with pytest.raises(SharedNameTaken):
        await engine.buckets.update(b, photos_b, {"public": True})
    record = await engine.files.put(b, photos_b, "dog", Attributes("text/plain"), chunks(b"dog"))
    with pytest.raises(SharedNameTaken):
        await engine.files.set_acl(b, photos_b, "dog", record.version_id, "public-read", True)
    with pytest.raises(SharedNameTaken):
        await engine.multipart.create(b, photos_b, "big", public)
    with pytest.raises(SharedNameTaken):
        await engine.files.copy(b, record, photos_b, "copy", copied(record, acl="public-read"))

    site_a, site_b = await bucket(a, "site"), await bucket(b, "site")
    await engine.buckets.update(a, site_a, {"public": True})
    await engine.buckets.update(a, site_a, {"public": False})
    assert await holder("site") == site_a  # kept when it stops sharing
    await engine.buckets.update(a, site_a, {"name": "pages"})
    assert await holder("pages") == site_a  # moved by the rename
    await engine.buckets.update(b, site_b, {"public": True})  # the old name is free
    assert await holder("site") == site_b

    more = await bucket(a, "more")
    await engine.files.set_acl(a, photos_a, "cat", None, "public-read", True)  # held already
    await engine.multipart.create(
        a, more, "big", Attributes("text/plain", acl="authenticated-read")
    )
    assert await holder("more") == more
    target = await bucket(a, "copied")
    source = await engine.files.get(a, photos_a, "cat")
    await engine.files.copy(a, source, target, "cat", copied(source, acl="public-read-write"))
    assert await holder("copied") == target

    await engine.buckets.delete(a, photos_a, force=True)
    await engine.buckets.update(b, photos_b, {"public": True})  # the deleted bucket's name
    assert await holder("photos") == photos_b


@pytest.mark.anyio
async def test_reservations_on_sqlite(tmp_path: Path) -> None:
    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    try:
        await reservations_hold(engine)
        assert await engine.maintenance.check_consistency() == []
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_reservations_on_postgresql(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> None:
    engine = await Engine.open(gateway_configs(tmp_path, postgres, seaweed)[0])
    try:
        await reservations_hold(engine)
    finally:
        await engine.close()


def before_the_migration(dialect: str, applied: int) -> list[tuple[int, str]]:
    return [(version, sql) for version, sql in pending(dialect, applied) if version < MIGRATION]


OLD_ROWS = [
    # Buckets as the previous schema left them: (id, org, name, created_at, shared_name,
    # public, cors), files and versions with their ACLs below.
    "INSERT INTO organizations (id, name, plan, created_at) VALUES "
    "('o1', 'one', 'pro', '2024-01-01T00:00:00Z'), ('o2', 'two', 'pro', '2024-01-01T00:00:00Z')",
    "INSERT INTO buckets (id, org_id, name, region, status, created_at, shared_name, public, "
    "cors) VALUES "
    "('b-pub', 'o1', 'pub', 'us-east-1', 'active', '2024-01-02T00:00:00Z', 'pub', 1, NULL), "
    "('b-was', 'o1', 'was', 'us-east-1', 'active', '2024-01-02T00:00:00Z', NULL, 0, NULL), "
    "('b-photos1', 'o1', 'photos', 'us-east-1', 'active', '2024-01-03T00:00:00Z', NULL, 0, "
    "NULL), "
    "('b-photos2', 'o2', 'photos', 'us-east-1', 'active', '2024-01-02T00:00:00Z', NULL, 0, "
    "NULL), "
    "('b-held1', 'o1', 'held', 'us-east-1', 'active', '2024-01-01T00:00:00Z', NULL, 0, NULL), "
    "('b-held2', 'o2', 'held', 'us-east-1', 'active', '2024-01-05T00:00:00Z', 'held', 0, "
    "'[]'), "
    "('b-plain', 'o1', 'plain', 'us-east-1', 'active', '2024-01-01T00:00:00Z', NULL, 0, NULL), "
    "('b-upload', 'o2', 'upload', 'us-east-1', 'active', '2024-01-01T00:00:00Z', NULL, 0, "
    "NULL), "
    "('b-acl', 'o2', 'acl', 'us-east-1', 'active', '2024-01-01T00:00:00Z', NULL, 0, NULL)",
    "UPDATE buckets SET acl = 'public-read' WHERE id = 'b-acl'",
    "INSERT INTO files (bucket_id, key, blob_id, size, sha256, content_type, uploaded_at, acl) "
    "VALUES ('b-photos1', 'k', 'x', 1, 'x', 'text/plain', '2024-01-03T00:00:00Z', "
    "'public-read'), "
    "('b-held1', 'k', 'x', 1, 'x', 'text/plain', '2024-01-03T00:00:00Z', 'public-read'), "
    "('b-plain', 'k', 'x', 1, 'x', 'text/plain', '2024-01-03T00:00:00Z', NULL)",
    "INSERT INTO versions (bucket_id, key, version_id, order_key, blob_id, size, sha256, "
    "content_type, uploaded_at, acl) VALUES ('b-photos2', 'k', 'v1', 'v1', 'x', 1, 'x', "
    "'text/plain', '2024-01-03T00:00:00Z', 'authenticated-read')",
    "INSERT INTO multipart_uploads (upload_id, bucket_id, key, content_type, created_at, acl) "
    "VALUES ('u1', 'b-upload', 'k', 'text/plain', '2024-01-03T00:00:00Z', 'public-read')",
]
RESERVED = {
    "b-pub": "pub",  # held already
    "b-was": None,  # stopped sharing under the previous rules: nothing says it shared
    "b-photos1": None,  # a public file, but the other "photos" is older
    "b-photos2": "photos",  # a public version, the oldest of its name
    "b-held1": None,  # another organization's bucket holds the name
    "b-held2": "held",
    "b-plain": None,  # shares nothing
    "b-upload": "upload",  # an upload in flight with a public ACL
    "b-acl": "acl",  # a bucket ACL beyond private
}


def test_the_migration_reserves_the_names_of_existing_data_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        monkeypatch.setattr(sqlite_driver, "pending", before_the_migration)
        sqlite_driver.migrate(conn)
        for statement in OLD_ROWS:
            conn.execute(statement)
        monkeypatch.undo()
        sqlite_driver.migrate(conn)
        assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] >= 16
        found = dict(conn.execute("SELECT id, shared_name FROM buckets").fetchall())
    assert found == RESERVED


@pytest.mark.anyio
async def test_the_migration_reserves_the_names_of_existing_data_on_postgresql(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = await asyncpg.connect(postgres.new_database())
    try:
        monkeypatch.setattr(postgres_driver, "pending", before_the_migration)
        await postgres_driver._migrate(conn)
        for statement in OLD_ROWS:
            await conn.execute(statement)
        monkeypatch.undo()
        await postgres_driver._migrate(conn)
        found = {row[0]: row[1] for row in await conn.fetch("SELECT id, shared_name FROM buckets")}
    finally:
        await conn.close()
    assert found == RESERVED


def test_a_bucket_that_never_shared_is_not_reached_by_its_name(
    s3: Any, other: Org, anonymous: Any
) -> None:
    """The only bucket of its name, sharing nothing, is nobody's from outside: refused to
    anonymous requests and unknown to other organizations' keys, as one that does not
    exist."""
    name = unique_name("alone")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"data")
    assert read(anonymous, name, "k") == "AccessDenied"
    assert refused(other.s3.get_object, Bucket=name, Key="k") == "NoSuchBucket"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("b1", "('b1' has 2 characters)"),
        ("x" * 64, "has 64 characters"),
        ("Photos", "(no upper case letters)"),
        ("a_b", "('_' may not appear)"),
        ("-ab", "starts or ends with '-'"),
        ("ab.", "starts or ends with '.'"),
    ],
)
def test_a_refused_name_says_which_rule_it_breaks(name: str, said: str) -> None:
    """BUCKETD_BUCKETS=b1 was refused with the whole rule and no word of which part."""
    with pytest.raises(InvalidBucketName) as refused:
        check_bucket_name(name)
    assert said in str(refused.value)


def test_localstacks_short_secret_is_refused_saying_why_and_what_instead() -> None:
    """LocalStack's test/test: refused (4 characters), and the message says why and offers
    a longer one; a secret of 8 is taken."""
    from storage.errors import InvalidInput
    from storage.rules.validation import check_s3_credentials

    with pytest.raises(InvalidInput) as refused:
        check_s3_credentials("test", "test")
    assert "it has 4" in str(refused.value) and "test/testtest" in str(refused.value)
    assert check_s3_credentials("test", "testtest") == ("test", "testtest")
