"""Three bucketd gateways over one PostgreSQL index, one SeaweedFS cluster (master, two
volume servers, filer, S3 gateway) and one Redis, all on loopback: what one gateway writes
the others serve at once, limits hold across them together, a bucket is provisioned once,
and a gateway killed mid-upload leaves the others serving and nothing torn."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support import web
from tests.support.cluster import Cluster
from tests.support.keys import ODD_KEYS, odd_path
from tests.support.live import TEST_CONFIG, LiveServer
from tests.support.postgres import Postgres
from tests.support.rawhttp import connect, request_head
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY

pytestmark = pytest.mark.slow  # a PostgreSQL, Redis and five-process SeaweedFS cluster

TEXT = {"Content-Type": "text/plain"}
LEASE_SECONDS = 2.0  # running_cluster's default


@pytest.fixture
def cluster(scale_out_cluster: Cluster) -> Cluster:
    return scale_out_cluster


def active_bucket(http: httpx.Client, name: str) -> str:
    created = http.post("/buckets", json={"name": name, "region": "us-east-1"})
    assert created.status_code == 201, created.text
    bucket_id: str = created.json()["data"]["id"]
    deadline = time.monotonic() + 30
    while http.get(f"/buckets/{bucket_id}").json()["data"]["status"] != "active":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return bucket_id


def test_every_write_is_visible_from_every_gateway_at_once(cluster: Cluster) -> None:
    with cluster.clients() as (a, b, c):
        check_read_after_write(a, b, c)


def check_read_after_write(a: httpx.Client, b: httpx.Client, c: httpx.Client) -> None:
    bucket_id = active_bucket(a, "shared")
    for n, (writer, reader) in enumerate(itertools.permutations((a, b, c), 2)):
        content = f"written through one gateway, read through another #{n}".encode()
        assert writer.put(
            f"/buckets/{bucket_id}/files/k{n}", content=content, headers=TEXT
        ).is_success
        assert reader.get(f"/buckets/{bucket_id}/files/k{n}").content == content
        listed = reader.get(f"/buckets/{bucket_id}/files").json()["data"]
        assert f"k{n}" in {f["key"] for f in listed}
        assert writer.delete(f"/buckets/{bucket_id}/files/k{n}").status_code == 200
        assert reader.get(f"/buckets/{bucket_id}/files/k{n}").status_code == 404
    renamed = a.put(f"/buckets/{bucket_id}/files/old", content=b"moving", headers=TEXT)
    assert renamed.status_code == 201
    assert b.patch(f"/buckets/{bucket_id}/files/old", json={"key": "new"}).status_code == 200
    assert c.get(f"/buckets/{bucket_id}/files/new").content == b"moving"
    assert c.get(f"/buckets/{bucket_id}/files/old").status_code == 404


def test_a_free_organization_gets_its_limit_across_all_gateways_together(
    cluster: Cluster,
) -> None:
    org = cluster.gateways[0].cli("orgs", "create", "limited", "--plan", "free").splitlines()[-1]
    key = (
        cluster.gateways[0]
        .cli("keys", "create", "--org", org, "--scopes", "buckets:read")
        .splitlines()[-1]
    )
    with cluster.clients(key) as clients:
        statuses = [clients[n % 3].get("/buckets").status_code for n in range(130)]
        assert statuses.count(200) == 100 and statuses.count(429) == 30
        assert statuses[:100] == [200] * 100
        last = clients[1].get("/buckets")
        assert last.status_code == 429 and last.headers["x-ratelimit-remaining"] == "0"


def test_a_bucket_is_provisioned_by_exactly_one_gateway(cluster: Cluster) -> None:
    with cluster.clients() as (a, b, c):
        ids = create_everywhere(a, b, c)
    quoted = ", ".join(f"'{i}'" for i in ids)
    claims = cluster.sql(f"SELECT provision_claims FROM buckets WHERE id IN ({quoted})")
    assert claims.split() == ["1"] * len(ids)


def create_everywhere(a: httpx.Client, b: httpx.Client, c: httpx.Client) -> list[str]:
    """Two buckets created through each gateway, once all are active."""
    ids = []
    for n, http in enumerate((a, b, c, a, b, c)):
        created = http.post("/buckets", json={"name": f"once-{n}", "region": "us-east-1"})
        ids.append(created.json()["data"]["id"])
    for bucket_id in ids:
        deadline = time.monotonic() + 30
        while b.get(f"/buckets/{bucket_id}").json()["data"]["status"] != "active":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    return ids


def test_concurrent_overwrites_through_different_gateways_leave_one_whole_version(
    cluster: Cluster,
) -> None:
    with cluster.clients() as clients:
        check_one_whole_version(clients)


def check_one_whole_version(clients: list[httpx.Client]) -> None:
    bucket_id = active_bucket(clients[0], "contested")
    versions = [bytes([n]) * (300_000 + n) for n in range(12)]

    def put(n: int) -> None:
        response = clients[n % 3].put(
            f"/buckets/{bucket_id}/files/one", content=versions[n], headers=TEXT
        )
        assert response.status_code == 201

    threads = [threading.Thread(target=put, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen = {http.get(f"/buckets/{bucket_id}/files/one").content for http in clients}
    assert len(seen) == 1 and seen.pop() in versions
    meta = clients[2].get(f"/buckets/{bucket_id}/files/one", params={"metadata": "true"})
    body = clients[1].get(f"/buckets/{bucket_id}/files/one").content
    assert meta.json()["data"]["etag"] == f'"{hashlib.sha256(body).hexdigest()}"'
    bucket = clients[0].get(f"/buckets/{bucket_id}").json()["data"]
    assert bucket["fileCount"] == 1 and bucket["sizeBytes"] == len(body)


def test_a_gateway_killed_mid_upload_leaves_the_others_serving(cluster: Cluster) -> None:
    with cluster.clients() as (a, b, _):
        check_kill_mid_upload(cluster, a, b)


def check_kill_mid_upload(cluster: Cluster, a: httpx.Client, b: httpx.Client) -> None:
    bucket_id = active_bucket(a, "survivor")
    old = b"the old content " * 1000
    assert a.put(f"/buckets/{bucket_id}/files/k", content=old, headers=TEXT).is_success
    victim = cluster.gateways[2]
    new_size = 12 * 1024 * 1024
    with connect(victim.url) as sock:
        head = request_head(
            "PUT",
            f"/v1/buckets/{bucket_id}/files/k",
            {
                "Host": f"127.0.0.1:{victim.port}",
                "Authorization": f"Bearer {cluster.key}",
                "Content-Type": "text/plain",
                "Content-Length": str(new_size),
            },
        )
        sock.sendall(head + b"N" * (new_size // 2))
        time.sleep(0.5)
        victim.kill()
    for http in (a, b):
        assert http.get(f"/buckets/{bucket_id}/files/k").content == old
        fresh = http.put(f"/buckets/{bucket_id}/files/other", content=b"still", headers=TEXT)
        assert fresh.status_code == 201
    victim.start()
    with victim.client(cluster.key) as http:
        assert http.get(f"/buckets/{bucket_id}/files/k").content == old
    org = a.get("/organization").json()["data"]
    sizes = sum(
        bucket["sizeBytes"] for bucket in a.get("/buckets", params={"limit": 100}).json()["data"]
    )
    assert org["usage"]["storedBytes"] == sizes


def orphan(cluster: Cluster, victim: LiveServer, name: str) -> str | None:
    """A bucket whose creation `victim` answered before it was SIGKILLed, within its 1 s
    provisioning delay; None when the victim provisioned it first (a loaded machine can take
    that long between the answer and the kill). The victim is left dead either way."""
    with victim.client(cluster.key) as http:
        created = http.post("/buckets", json={"name": name, "region": "us-east-1"})
        victim.kill()
    bucket_id = str(created.json()["data"]["id"])
    row = cluster.sql(f"SELECT status, provision_claims FROM buckets WHERE id = '{bucket_id}'")
    return None if row.split("|") == ["active", "1"] else bucket_id


def test_a_dead_gateways_provisioning_is_taken_over(cluster: Cluster) -> None:
    victim = cluster.gateways[1]
    try:
        bucket_id = None
        for attempt in range(3):
            if attempt:
                victim.start()
            bucket_id = orphan(cluster, victim, f"orphan-{attempt}")
            if bucket_id is not None:
                break
        assert bucket_id is not None, "the victim provisioned its bucket before each SIGKILL"
        deadline = time.monotonic() + LEASE_SECONDS + 15
        with cluster.gateways[0].client(cluster.key) as a:
            while a.get(f"/buckets/{bucket_id}").json()["data"]["status"] != "active":
                assert time.monotonic() < deadline
                time.sleep(0.2)
        claims = cluster.sql(f"SELECT provision_claims FROM buckets WHERE id = '{bucket_id}'")
        assert claims == "2"
    finally:
        victim.start()  # the module's other tests use all three gateways


def test_postgresql_down_is_a_503_with_retry_after_and_back_up_serves(tmp_path: Path) -> None:
    own = Postgres(tmp_path / "pg")
    database = own.new_database()
    config = "key_cache_seconds = 0.2\n" + TEST_CONFIG + f'[index]\nurl = "{database}"\n'
    live = LiveServer(tmp_path / "data", config)
    try:
        live.start()
        with live.client() as http:
            bucket_id = active_bucket(http, "before-the-outage")
            assert http.put(f"/buckets/{bucket_id}/files/k", content=b"x", headers=TEXT).is_success
            own.stop()
            time.sleep(0.5)  # past the key cache: the next request needs the index
            down = http.get(f"/buckets/{bucket_id}/files/k")
            assert down.status_code == 503
            assert down.headers["retry-after"] == "1"
            assert down.json()["error"]["code"] == "index_unavailable"
            own = Postgres(tmp_path / "pg")  # the same data folder, started again
            deadline = time.monotonic() + 20
            while http.get(f"/buckets/{bucket_id}/files/k").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        live.stop()
        own.stop()


@pytest.mark.anyio
async def test_redis_down_falls_back_to_per_gateway_limits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from gateway.http.shared_limit import SharedRateLimiter
    from tests.support.live import free_port

    limiter = SharedRateLimiter(f"redis://127.0.0.1:{free_port()}/0")
    try:
        now = time.time()
        decisions = [await limiter.hit("org:x", 3, now) for _ in range(5)]
    finally:
        await limiter.close()
    assert [d.allowed for d in decisions] == [True, True, True, False, False]
    assert decisions[0].reset == (int(now // 60) + 1) * 60
    warnings = [r for r in caplog.records if "per gateway" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"


def test_a_revocation_on_one_gateway_reaches_the_others_key_caches(cluster: Cluster) -> None:
    with cluster.gateways[0].client(cluster.key) as admin:
        created = admin.post("/keys", json={"name": "short-lived", "scopes": ["buckets:read"]})
        secret, key_id = created.json()["data"]["secret"], created.json()["data"]["id"]
        with cluster.gateways[1].client(secret) as user:
            assert user.get("/buckets").status_code == 200  # now in gateway 1's key cache
            assert admin.delete(f"/keys/{key_id}").status_code == 200
            # the cluster's key cache lasts 30 s: only the NOTIFY can make this a 401
            deadline = time.monotonic() + 10
            while user.get("/buckets").status_code != 401:
                assert time.monotonic() < deadline, "the revocation never reached gateway 1"
                time.sleep(0.05)


def test_migrate_a_single_node_data_dir_into_postgresql_and_s3(
    cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "single").mkdir()
    single = LiveServer(tmp_path / "single" / "data").start()
    shared = b"the same content twice " * 500
    contents = {"a/one.txt": shared, "a/two.txt": shared, "b.bin": bytes(range(256)) * 300}
    try:
        with single.client() as http:
            photos = active_bucket(http, "photos")
            empty = active_bucket(http, "empty")
            for key, content in contents.items():
                assert http.put(
                    f"/buckets/{photos}/files/{key}", content=content, headers=TEXT
                ).is_success
            history = active_bucket(http, "history")
            assert (
                http.patch(f"/buckets/{history}", json={"versioning": "enabled"}).status_code == 200
            )
            for content in (b"first", b"second"):
                assert http.put(
                    f"/buckets/{history}/files/doc", content=content, headers=TEXT
                ).is_success
            assert http.delete(f"/buckets/{history}/files/doc").status_code == 200
            versions = http.get(f"/buckets/{history}/versions").json()["data"]
            assert len(versions) == 3
            odd = active_bucket(http, "odd")
            for key in ODD_KEYS:
                path = f"/buckets/{odd}/files/{odd_path(key)}"
                stored = http.put(path, content=key.encode(), headers=TEXT)
                assert stored.status_code == 201
            hook = http.post(f"/buckets/{photos}/webhooks", json={"url": "https://example.com/h"})
            assert hook.status_code == 201
            before = {
                "org": http.get("/organization").json()["data"],
                "buckets": http.get("/buckets").json()["data"],
                "files": http.get(f"/buckets/{photos}/files").json()["data"],
            }
        access, secret = single.s3_credentials()
    finally:
        single.stop()

    database = cluster.postgres.new_database()
    brand = "mg" + uuid.uuid4().hex[:6]
    arguments = ["--to-index", database, "--to-s3", cluster.weed.endpoint, "--s3-brand", brand]
    credentials = ["--s3-access-key-id", ACCESS_KEY, "--s3-secret-access-key", SECRET_KEY]
    out = single.cli("migrate", *arguments, *credentials)
    files = 5 + len(ODD_KEYS)
    assert f"migrated 1 organizations, 2 keys, 4 buckets and {files} files" in out
    with pytest.raises(RuntimeError, match="not empty"):
        single.cli("migrate", *arguments, *credentials)

    config = TEST_CONFIG + f'[index]\nurl = "{database}"\n' + cluster.weed.bucketd_config(brand)
    (tmp_path / "gateway" / "data").mkdir(parents=True)
    shutil.copy(single.data_dir / "secrets.key", tmp_path / "gateway" / "data")
    gateway = LiveServer(tmp_path / "gateway" / "data", config).start()
    try:
        with gateway.client(single.admin_key) as http:
            assert http.get("/organization").json()["data"] == before["org"]
            assert http.get("/buckets").json()["data"] == before["buckets"]
            assert http.get(f"/buckets/{photos}/files").json()["data"] == before["files"]
            assert http.get(f"/buckets/{empty}/files").json()["data"] == []
            for key, content in contents.items():
                assert http.get(f"/buckets/{photos}/files/{key}").content == content
            assert http.get(f"/buckets/{history}/versions").json()["data"] == versions
            listed = http.get(f"/buckets/{odd}/files", params={"limit": 100}).json()["data"]
            assert [f["key"] for f in listed] == sorted(ODD_KEYS, key=str.encode)
            for key in ODD_KEYS:
                assert http.get(f"/buckets/{odd}/files/{odd_path(key)}").content == key.encode()
            moved = http.get(f"/buckets/{photos}/webhooks").json()["data"]
            assert [h["url"] for h in moved] == ["https://example.com/h"]  # events stay behind
            for version, content in zip(versions[1:], (b"second", b"first"), strict=True):
                read = http.get(
                    f"/buckets/{history}/files/doc", params={"versionId": version["versionId"]}
                )
                assert read.content == content
        s3 = gateway.s3(access, secret)
        listed = s3.list_objects_v2(Bucket="photos")["Contents"]
        assert sorted(o["Key"] for o in listed) == sorted(contents)
        s3.close()
    finally:
        gateway.stop()


def test_sharing_changed_on_one_gateway_holds_on_every_gateway_at_once(cluster: Cluster) -> None:
    """Public reads and signed URLs: nothing a gateway caches outlives a change another
    gateway made (a bucket's sharing is read with the bucket, a policy cached by its text, a
    token's key looked up per use)."""
    with cluster.clients() as (a, b, c):
        bucket_id = active_bucket(a, "shared-" + uuid.uuid4().hex[:8])
        assert (
            a.put(f"/buckets/{bucket_id}/files/k.txt", content=b"k", headers=TEXT).status_code
            == 201
        )
        public_url = f"{cluster.gateways[1].url}/v1/buckets/{bucket_id}/files/k.txt"
        assert web.get(public_url).status_code == 401
        assert a.patch(f"/buckets/{bucket_id}", json={"public": True}).status_code == 200
        assert web.get(public_url).content == b"k"
        assert b.patch(f"/buckets/{bucket_id}", json={"public": False}).status_code == 200
        assert web.get(public_url).status_code == 401
        made = a.post("/keys", json={"name": "signer", "scopes": ["files:read"]}).json()["data"]
        with cluster.gateways[0].client(made["secret"]) as signer:
            signed = signer.post(f"/buckets/{bucket_id}/sign/k.txt", json={"expiresIn": 60})
        url = signed.json()["data"]["url"].replace(cluster.gateways[0].url, cluster.gateways[1].url)
        assert web.get(url).content == b"k"
        assert c.delete(f"/keys/{made['id']}").status_code == 200
        assert web.get(url).status_code == 401


def test_three_gateways_deliver_every_event_once_under_load(cluster: Cluster) -> None:
    """Writes through every gateway at once; one gateway (the lease holder) delivers, each
    event exactly once here (at least once in general), none lost, in order per key."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.receiver import Receiver

    receiver = Receiver().start()
    try:
        with cluster.clients() as (a, b, c):
            bucket_id = active_bucket(a, "events-" + uuid.uuid4().hex[:8])
            made = a.post(f"/buckets/{bucket_id}/webhooks", json={"url": receiver.url})
            assert made.status_code == 201, made.text
            clients = [a, b, c]

            def write(n: int) -> None:
                answer = clients[n % 3].put(
                    f"/buckets/{bucket_id}/files/k{n % 20}", content=b"x", headers=TEXT
                )
                assert answer.status_code == 201, answer.text

            writes = 200
            with ThreadPoolExecutor(12) as pool:
                list(pool.map(write, range(writes)))
            records = receiver.wait_for(writes, timeout=60)
        time.sleep(0.5)
        records = receiver.records()
        ids = [r["bucketd"]["eventId"] for r in records]
        assert len(ids) == len(set(ids)) == writes
        for key in {r["s3"]["object"]["key"] for r in records}:
            order = [
                r["s3"]["object"]["sequencer"] for r in records if r["s3"]["object"]["key"] == key
            ]
            assert order == sorted(order)
    finally:
        receiver.stop()
