"""Snapshots on /v1 (issue 35 point 1): a bucket's taken, listed, restored, forked and
deleted through a real server; who may do which (scopes, a key restricted to one bucket,
another organization, a revoked key); the operator's snapshots of the whole server, and
`dropLocked`, which only a server in test mode takes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

import bucketd_client as bc
from tests.support.commands import bucketd
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name, with_backend

TEXT = {"Content-Type": "text/plain"}
MISSING = "snap_01JBZZZZZZZZZZZZZZZZZZZZZZ"
"""A well-formed snapshot id no server gave out."""


@pytest.fixture
def admin(local_server: LiveServer) -> Iterator[httpx.Client]:
    """The shared server's admin key: every scope of its organization, orgs:manage too."""
    with local_server.client() as http:
        yield http


def put(client: httpx.Client, bucket: dict, key: str, content: bytes) -> dict:
    response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def keys_of(client: httpx.Client, bucket: dict) -> dict[str, bytes]:
    listed = client.get(f"/buckets/{bucket['id']}/files", params={"limit": 100}).json()["data"]
    return {
        found["key"]: client.get(f"/buckets/{bucket['id']}/files/{found['key']}").content
        for found in listed
    }


def snapshot(client: httpx.Client, bucket: dict, **body: object) -> dict:
    made = client.post(f"/buckets/{bucket['id']}/snapshots", json=body)
    assert made.status_code == 201, made.text
    return dict(made.json()["data"])


def make_key(client: httpx.Client, scopes: list[str], **more: object) -> dict:
    made = client.post("/keys", json={"name": "t", "scopes": scopes, **more})
    assert made.status_code == 201, made.text
    return dict(made.json()["data"])


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_a_snapshot_restores_the_bucket_and_forks_into_a_new_one(client: httpx.Client) -> None:
    """On both backends (`client` is the shared server of each): on S3 the snapshot keeps
    the cluster's objects alive by copies of its own."""
    admin = client
    bucket = new_bucket(admin, unique_name("snap"), versioning="enabled")
    first = put(admin, bucket, "a.txt", b"one")
    put(admin, bucket, "a.txt", b"two")
    put(admin, bucket, "b.txt", b"bee")
    taken = snapshot(admin, bucket, name="before the migration")
    assert taken["object"] == "snapshot" and taken["id"].startswith("snap_")
    assert taken["bucketId"] == bucket["id"] and taken["bucketName"] == bucket["name"]
    assert (taken["name"], taken["fileCount"], taken["sizeBytes"]) == ("before the migration", 3, 9)
    assert taken["buckets"] == 1

    put(admin, bucket, "a.txt", b"three")
    put(admin, bucket, "c.txt", b"new")
    assert admin.delete(f"/buckets/{bucket['id']}/files/b.txt").status_code == 200
    assert admin.patch(f"/buckets/{bucket['id']}", json={"versioning": "suspended"}).is_success

    restored = admin.post(f"/snapshots/{taken['id']}/restore")
    assert restored.status_code == 200, restored.text
    shown = restored.json()["data"]
    assert shown["id"] == bucket["id"] and shown["versioning"] == "enabled"
    assert (shown["fileCount"], shown["sizeBytes"]) == (3, 9)
    assert keys_of(admin, bucket) == {"a.txt": b"two", "b.txt": b"bee"}
    versions = admin.get(f"/buckets/{bucket['id']}/versions", params={"key": "a.txt"})
    assert [v["versionId"] for v in versions.json()["data"]][-1] == first["versionId"]

    fork = admin.post(f"/snapshots/{taken['id']}/fork", json={"name": unique_name("fork")})
    assert fork.status_code == 201, fork.text
    forked = fork.json()["data"]
    assert forked["id"] != bucket["id"] and forked["versioning"] == "enabled"
    assert forked["region"] == bucket["region"] and forked["fileCount"] == 3
    assert keys_of(admin, forked) == {"a.txt": b"two", "b.txt": b"bee"}
    put(admin, forked, "b.txt", b"only in the fork")  # the two buckets are apart from now on
    assert keys_of(admin, bucket)["b.txt"] == b"bee"

    listed = admin.get(f"/buckets/{bucket['id']}/snapshots").json()
    assert [s["id"] for s in listed["data"]] == [taken["id"]] and not listed["meta"]["hasMore"]
    every = admin.get("/snapshots", params={"limit": 100}).json()["data"]
    assert taken["id"] in {s["id"] for s in every}
    assert admin.get(f"/snapshots/{taken['id']}").json()["data"] == taken

    gone = admin.delete(f"/snapshots/{taken['id']}")
    assert gone.status_code == 204 and gone.content == b""
    assert code(admin.get(f"/snapshots/{taken['id']}")) == (404, "snapshot_not_found")
    assert code(admin.post(f"/snapshots/{taken['id']}/restore")) == (404, "snapshot_not_found")
    assert keys_of(admin, forked)["a.txt"] == b"two"  # the fork holds its own references


def test_a_snapshot_needs_no_body_and_refuses_a_bad_one(admin: httpx.Client) -> None:
    bucket = new_bucket(admin, unique_name("snap"))
    bare = admin.post(f"/buckets/{bucket['id']}/snapshots")
    assert bare.status_code == 201 and bare.json()["data"]["name"] is None
    assert bare.json()["data"]["fileCount"] == 0
    path = f"/buckets/{bucket['id']}/snapshots"
    assert code(admin.post(path, json={"label": "x"})) == (400, "unknown_field")
    broken = admin.post(path, content=b"{", headers={"Content-Type": "application/json"})
    assert code(broken) == (400, "invalid_json")
    assert admin.post(path, json={"name": "x" * 257}).status_code == 400
    fork = f"/snapshots/{bare.json()['data']['id']}/fork"
    assert code(admin.post(fork, json={"name": "Not A Name"})) == (400, "invalid_bucket_name")
    assert code(admin.post(fork, json={"name": bucket["name"]}))[0] == 409
    assert code(admin.get("/snapshots", params={"cursor": "nope"})) == (400, "invalid_cursor")
    assert len(admin.get(path).json()["data"]) == 1  # nothing was taken by the refusals


def test_a_deleted_buckets_snapshot_is_listed_and_forked_not_restored(
    admin: httpx.Client,
) -> None:
    bucket = new_bucket(admin, unique_name("gone"))
    put(admin, bucket, "a.txt", b"kept")
    taken = snapshot(admin, bucket)
    assert admin.delete(f"/buckets/{bucket['id']}", params={"force": "true"}).status_code == 200
    listed = admin.get("/snapshots", params={"limit": 100}).json()["data"]
    assert taken["id"] in {s["id"] for s in listed}
    restored = admin.post(f"/snapshots/{taken['id']}/restore")
    assert code(restored) == (409, "invalid_bucket_state")
    fork = admin.post(f"/snapshots/{taken['id']}/fork", json={"name": bucket["name"]})
    assert fork.status_code == 201, fork.text  # the name is free again
    assert keys_of(admin, fork.json()["data"]) == {"a.txt": b"kept"}


def test_pages_of_snapshots_follow_the_cursor(admin: httpx.Client) -> None:
    bucket = new_bucket(admin, unique_name("snap"))
    taken = [snapshot(admin, bucket)["id"] for _ in range(3)]
    seen, cursor = [], None
    while True:
        params: dict[str, str | int] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = admin.get(f"/buckets/{bucket['id']}/snapshots", params=params).json()
        seen += [s["id"] for s in page["data"]]
        cursor = page["meta"]["nextCursor"]
        if cursor is None:
            break
    assert seen == taken


def test_scopes_decide_who_reads_takes_and_restores(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    bucket = new_bucket(admin, unique_name("snap"))
    taken = snapshot(admin, bucket)
    reader = make_key(admin, ["buckets:read"])
    writer = make_key(admin, ["buckets:read", "buckets:write"])
    files_only = make_key(admin, ["files:read", "files:write"])
    with local_server.client(reader["secret"]) as http:
        assert http.get(f"/snapshots/{taken['id']}").status_code == 200
        assert http.get(f"/buckets/{bucket['id']}/snapshots").status_code == 200
        assert code(http.post(f"/buckets/{bucket['id']}/snapshots")) == (403, "insufficient_scope")
        assert code(http.delete(f"/snapshots/{taken['id']}")) == (403, "insufficient_scope")
    with local_server.client(writer["secret"]) as http:
        assert http.post(f"/buckets/{bucket['id']}/snapshots").status_code == 201
        refused = http.post(f"/snapshots/{taken['id']}/restore")  # rewrites files
        assert code(refused) == (403, "insufficient_scope") and "files:write" in refused.text
    with local_server.client(files_only["secret"]) as http:
        assert code(http.get("/snapshots")) == (403, "insufficient_scope")
        assert code(http.post(f"/snapshots/{taken['id']}/restore")) == (403, "insufficient_scope")


def test_a_bucket_scoped_key_sees_only_its_buckets_snapshots_and_cannot_fork(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    mine, other = new_bucket(admin, unique_name("mine")), new_bucket(admin, unique_name("other"))
    own, foreign = snapshot(admin, mine), snapshot(admin, other)
    scoped = make_key(
        admin, ["buckets:read", "buckets:write", "files:read", "files:write"], bucketId=mine["id"]
    )
    with local_server.client(scoped["secret"]) as http:
        listed = {s["id"] for s in http.get("/snapshots", params={"limit": 100}).json()["data"]}
        assert own["id"] in listed and foreign["id"] not in listed
        assert code(http.get(f"/snapshots/{foreign['id']}")) == (404, "snapshot_not_found")
        assert code(http.post(f"/snapshots/{foreign['id']}/restore"))[0] == 404
        assert code(http.delete(f"/snapshots/{foreign['id']}"))[0] == 404
        assert code(http.post(f"/buckets/{other['id']}/snapshots")) == (404, "bucket_not_found")
        assert http.post(f"/snapshots/{own['id']}/restore").status_code == 200
        fork = http.post(f"/snapshots/{own['id']}/fork", json={"name": unique_name("f")})
        assert code(fork) == (403, "forbidden")
    assert admin.get(f"/snapshots/{foreign['id']}").status_code == 200  # untouched


def test_another_organizations_snapshot_is_not_found(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    bucket = new_bucket(admin, unique_name("snap"))
    put(admin, bucket, "secret.txt", b"ours")
    taken = snapshot(admin, bucket)
    org = admin.post("/orgs", json={"name": unique_name("tenant"), "plan": "pro"}).json()["data"]
    scopes = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"]
    key = admin.post(f"/orgs/{org['id']}/keys", json={"name": "t", "scopes": scopes})
    with local_server.client(key.json()["data"]["secret"]) as tenant:
        for answer in (
            tenant.get(f"/snapshots/{taken['id']}"),
            tenant.get(f"/snapshots/{MISSING}"),
            tenant.post(f"/snapshots/{taken['id']}/restore"),
            tenant.post(f"/snapshots/{taken['id']}/fork", json={"name": unique_name("steal")}),
            tenant.delete(f"/snapshots/{taken['id']}"),
        ):
            assert code(answer) == (404, "snapshot_not_found"), answer.text
        assert tenant.get("/snapshots").json()["data"] == []
        assert code(tenant.get(f"/buckets/{bucket['id']}/snapshots")) == (404, "bucket_not_found")
        assert tenant.get("/buckets").json()["data"] == []  # no fork was made
    assert admin.get(f"/snapshots/{taken['id']}").status_code == 200


def test_what_only_a_snapshot_holds_is_shown_in_the_usage(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    org = admin.post("/orgs", json={"name": unique_name("usage"), "plan": "pro"}).json()["data"]
    scopes = ["buckets:read", "buckets:write", "files:read", "files:write"]
    key = admin.post(f"/orgs/{org['id']}/keys", json={"name": "t", "scopes": scopes})
    with local_server.client(key.json()["data"]["secret"]) as tenant:
        bucket = new_bucket(tenant, unique_name("snap"))
        put(tenant, bucket, "five.txt", b"12345")
        taken = snapshot(tenant, bucket)

        def usage() -> tuple[int, int]:
            shown = tenant.get("/organization").json()["data"]["usage"]
            return shown["storedBytes"], shown["snapshotBytes"]

        assert usage() == (5, 0)  # the bucket still holds the content: counted once
        assert tenant.delete(f"/buckets/{bucket['id']}/files/five.txt").status_code == 200
        assert usage() == (0, 5)
        operator_view = admin.get(f"/orgs/{org['id']}").json()["data"]["usage"]
        assert operator_view["snapshotBytes"] == 5
        assert tenant.delete(f"/snapshots/{taken['id']}").status_code == 204
        assert usage() == (0, 0)


def test_a_revoked_key_is_refused(local_server: LiveServer, admin: httpx.Client) -> None:
    bucket = new_bucket(admin, unique_name("snap"))
    taken = snapshot(admin, bucket)
    key = make_key(admin, ["buckets:read", "buckets:write"])
    with local_server.client(key["secret"]) as http:
        assert http.get(f"/snapshots/{taken['id']}").status_code == 200
        assert admin.delete(f"/keys/{key['id']}").status_code == 200
        assert code(http.get(f"/snapshots/{taken['id']}")) == (401, "invalid_api_key")
        assert code(http.post(f"/buckets/{bucket['id']}/snapshots")) == (401, "invalid_api_key")


def test_the_servers_snapshots_are_the_operators_alone(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    made = admin.post("/server/snapshots", json={"name": "nightly"})
    assert made.status_code == 201, made.text
    server = made.json()["data"]
    assert server["bucketId"] is None and server["bucketName"] is None
    assert server["name"] == "nightly" and server["buckets"] >= 1
    assert admin.get(f"/server/snapshots/{server['id']}").json()["data"] == server
    listed = admin.get("/server/snapshots", params={"limit": 100}).json()["data"]
    assert server["id"] in {s["id"] for s in listed}
    assert server["id"] not in {s["id"] for s in admin.get("/snapshots").json()["data"]}
    assert code(admin.get(f"/snapshots/{server['id']}")) == (404, "snapshot_not_found")

    refused = admin.post(f"/server/snapshots/{server['id']}/restore", json={"dropLocked": True})
    assert code(refused) == (400, "test_mode_off")  # this server keeps what retention keeps

    tenant_scopes = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"]
    tenant = make_key(admin, tenant_scopes)  # every scope of the organization but orgs:manage
    with local_server.client(tenant["secret"]) as http:
        for answer in (
            http.post("/server/snapshots"),
            http.get("/server/snapshots"),
            http.get(f"/server/snapshots/{server['id']}"),
            http.post(f"/server/snapshots/{server['id']}/restore"),
            http.delete(f"/server/snapshots/{server['id']}"),
        ):
            assert answer.status_code == 403, answer.text
    gone = admin.delete(f"/server/snapshots/{server['id']}")
    assert gone.status_code == 204
    assert code(admin.get(f"/server/snapshots/{server['id']}")) == (404, "snapshot_not_found")


def test_the_client_takes_lists_restores_forks_and_deletes(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    bucket = new_bucket(admin, unique_name("snap"))
    put(admin, bucket, "a.txt", b"kept")
    with bc.Client(local_server.url, local_server.admin_key) as client:
        taken = client.snapshots.create(bucket["id"], "by the client")
        assert isinstance(taken, bc.Snapshot) and taken.file_count == 1
        put(admin, bucket, "b.txt", b"later")
        assert client.snapshots.restore(taken.id).file_count == 1
        assert keys_of(admin, bucket) == {"a.txt": b"kept"}
        assert [s.id for s in client.snapshots.list(bucket["id"])] == [taken.id]
        assert taken.id in {s.id for s in client.snapshots.iter(page_size=1)}
        fork = client.snapshots.fork(taken.id, unique_name("fork"))
        assert fork.name != bucket["name"] and fork.file_count == 1
        assert client.snapshots.get(taken.id) == taken
        client.snapshots.delete(taken.id)
        with pytest.raises(bc.SnapshotNotFound):
            client.snapshots.get(taken.id)
        server = client.snapshots.create_server("by the operator")
        assert server.bucket_id is None and server.buckets >= 2
        assert client.snapshots.get(server.id, server=True) == server
        assert server.id in {s.id for s in client.snapshots.iter(server=True)}
        with pytest.raises(bc.BadRequest, match="test mode"):
            client.snapshots.restore_server(server.id, drop_locked=True)
        client.snapshots.delete(server.id, server=True)

    async def asynchronously() -> bc.Snapshot:
        async with bc.AsyncClient(local_server.url, local_server.admin_key) as client:
            made = await client.snapshots.create(bucket["id"])
            assert [s.id async for s in client.snapshots.iter(bucket["id"])][-1] == made.id
            return await client.snapshots.get(made.id)

    assert anyio.run(asynchronously).bucket_id == bucket["id"]


@pytest.fixture
def quiet_s3_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server of its own on the S3 backend: a server snapshot of the shared one races the
    other tests' writes and answers 409 (try again), as it should, however often it is
    asked."""
    config = with_backend(request, "s3", TEST_CONFIG)
    server = LiveServer(Path(tmp_path_factory.mktemp("snapshots-s3")) / "data", config).start()
    yield server
    server.stop()


def test_a_server_snapshot_on_the_s3_backend(quiet_s3_server: LiveServer) -> None:
    """Taken, read and deleted on a server over the cluster (restoring it is the engine's
    cluster tests')."""
    with quiet_s3_server.client() as operator:
        bucket = new_bucket(operator, unique_name("cluster"))
        put(operator, bucket, "a.txt", b"copied in the cluster")
        made = operator.post("/server/snapshots", json={"name": "cluster"})
        assert made.status_code == 201, made.text
        taken = made.json()["data"]
        assert taken["bucketId"] is None and taken["buckets"] >= 1 and taken["fileCount"] >= 1
        assert operator.get(f"/server/snapshots/{taken['id']}").json()["data"] == taken
        assert operator.delete(f"/server/snapshots/{taken['id']}").status_code == 204
        assert keys_of(operator, bucket) == {"a.txt": b"copied in the cluster"}


@pytest.fixture(scope="module")
def test_mode_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of its own in test mode: restoring a server snapshot rewrites every bucket,
    which the shared server's other tests would see."""
    server = LiveServer(
        Path(tmp_path_factory.mktemp("snapshots")) / "data", env={"BUCKETD_TEST_MODE": "true"}
    ).start()
    yield server
    server.stop()


def test_a_server_snapshot_puts_every_bucket_back(test_mode_server: LiveServer) -> None:
    with test_mode_server.client() as admin:
        kept = new_bucket(admin, unique_name("kept"), versioning="enabled")
        put(admin, kept, "a.txt", b"before")
        doomed = new_bucket(admin, unique_name("doomed"))
        clean = admin.post("/server/snapshots").json()["data"]
        assert clean["buckets"] == 2 and clean["fileCount"] == 1

        put(admin, kept, "a.txt", b"after")
        assert admin.delete(f"/buckets/{doomed['id']}").status_code == 200
        later = new_bucket(admin, unique_name("later"), objectLock={})
        locked = admin.put(
            f"/buckets/{later['id']}/files/held.txt", content=b"held", headers=TEXT
        ).json()["data"]
        hold = admin.patch(
            f"/buckets/{later['id']}/versions/{locked['versionId']}",
            json={"key": "held.txt", "legalHold": True},
        )
        assert hold.status_code == 200, hold.text

        server = ("--url", test_mode_server.url, "--key", test_mode_server.admin_key)
        refused = bucketd(None, "snapshots", "restore", "--server", clean["id"], *server)
        assert refused.returncode == 1 and "legal hold" in refused.stderr  # never unasked
        assert admin.get(f"/buckets/{later['id']}").status_code == 200
        with bc.Client(test_mode_server.url, test_mode_server.admin_key) as client:
            restored = client.snapshots.restore_server(clean["id"], drop_locked=True)
        assert restored.id == clean["id"]
        names = {b["name"] for b in admin.get("/buckets").json()["data"]}
        assert names == {kept["name"], doomed["name"]}
        assert keys_of(admin, kept) == {"a.txt": b"before"}
        assert admin.get(f"/buckets/{doomed['id']}").json()["data"]["name"] == doomed["name"]
