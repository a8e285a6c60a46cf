"""Plan quotas (402) and exact usage, also under concurrent writers."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.live import LiveServer, new_bucket
from tests.support.names import BACKENDS, unique_name, with_backend
from tests.support.orgs import ALL_SCOPES, make_key, make_org
from tests.support.rawhttp import connect, read_response, request_head

CONFIG = """
[plans.free]
requests_per_minute = 1000000
max_buckets = 2
max_storage_bytes = 1000
max_snapshots = 5
[plans.pro]
requests_per_minute = 1000000
max_storage_bytes = 20000
"""
TEXT = {"Content-Type": "text/plain"}


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    config = with_backend(request, request.param, CONFIG)
    server = LiveServer(tmp_path_factory.mktemp("quota") / "data", config).start()
    yield server
    server.stop()


def usage(http: httpx.Client) -> dict:
    return http.get("/organization").json()["data"]["usage"]


def listed_bytes(http: httpx.Client) -> int:
    total = 0
    for bucket in http.get("/buckets", params={"limit": 100}).json()["data"]:
        cursor = None
        while True:
            params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
            body = http.get(f"/buckets/{bucket['id']}/files", params=params).json()
            total += sum(f["size"] for f in body["data"])
            cursor = body["meta"]["nextCursor"]
            if cursor is None:
                break
    return total


def test_bucket_quota(live: LiveServer) -> None:
    with live.client(make_key(live, make_org(live, "free"), ALL_SCOPES)) as http:
        first = new_bucket(http, "one")
        new_bucket(http, "two")
        refused = http.post("/buckets", json={"name": "three", "region": "us-east-1"})
        assert refused.status_code == 402
        assert refused.json()["error"]["code"] == "quota_exceeded"
        assert usage(http)["buckets"] == 2
        http.delete(f"/buckets/{first['id']}")
        assert (
            http.post("/buckets", json={"name": "three", "region": "us-east-1"}).status_code == 201
        )


def test_storage_quota(live: LiveServer) -> None:
    secret = make_key(live, make_org(live, "free"), ALL_SCOPES)
    with live.client(secret) as http:
        bucket = new_bucket(http, "store")
        files = f"/buckets/{bucket['id']}/files"
        assert http.put(f"{files}/a", content=b"a" * 600, headers=TEXT).status_code == 201
        with connect(live.url) as sock:  # refused by Content-Length before a byte is sent
            sock.sendall(
                request_head(
                    "PUT",
                    f"/v1{files}/b",
                    {
                        "Authorization": f"Bearer {secret}",
                        "Content-Type": "text/plain",
                        "Content-Length": "500",
                    },
                )
            )
            response = read_response(sock)
        assert response.status == 402 and response.json()["error"]["code"] == "quota_exceeded"

        def chunks() -> Iterator[bytes]:
            for _ in range(5):
                yield b"b" * 100

        streamed = http.put(f"{files}/b", content=chunks(), headers=TEXT)
        assert streamed.status_code == 402
        assert http.get(f"{files}/b").status_code == 404
        assert (
            http.put(f"{files}/a", content=b"c" * 900, headers=TEXT).status_code == 201
        )  # 900 - 600
        assert http.put(f"{files}/b", content=b"d" * 101, headers=TEXT).status_code == 402
        assert http.put(f"{files}/b", content=b"d" * 100, headers=TEXT).status_code == 201
        assert usage(http)["storedBytes"] == 1000
        assert (
            http.put(f"{files}/b", content=b"e" * 50, headers=TEXT).status_code == 201
        )  # shrinking is fine
        assert http.delete(f"{files}/a").status_code == 200
        assert usage(http) == {"buckets": 1, "storedBytes": 50, "files": 1, "snapshotBytes": 0}
        assert live.temp_files() == []


def test_snapshots_and_forks_are_no_way_around_the_quota(live: LiveServer) -> None:
    """What only snapshots hold counts, each content once; a fork is a bucket of the plan
    and holds its contents at full size; a restore that would grow past the quota is
    refused and changes nothing (free plan: 2 buckets, 1000 bytes)."""
    with live.client(make_key(live, make_org(live, "free"), ALL_SCOPES)) as http:
        bucket = new_bucket(http, unique_name("snapq"))
        files = f"/buckets/{bucket['id']}/files"

        def take() -> str:
            made = http.post(f"/buckets/{bucket['id']}/snapshots")
            assert made.status_code == 201, made.text
            return str(made.json()["data"]["id"])

        empty = take()
        assert http.put(f"{files}/x", content=b"x" * 600, headers=TEXT).status_code == 201
        with_x, again = take(), take()
        assert http.delete(f"{files}/x").status_code == 200
        assert usage(http)["snapshotBytes"] == 600  # named by two snapshots, counted once
        assert http.put(f"{files}/y", content=b"y" * 401, headers=TEXT).status_code == 402
        assert http.put(f"{files}/y", content=b"y" * 300, headers=TEXT).status_code == 201
        take()  # y, which the bucket still holds: nothing more counted

        fork = http.post(f"/snapshots/{with_x}/fork", json={"name": unique_name("forkq")})
        assert fork.status_code == 201, fork.text
        assert usage(http) == {"buckets": 2, "storedBytes": 900, "files": 2, "snapshotBytes": 0}
        third = http.post(f"/snapshots/{empty}/fork", json={"name": unique_name("forkq")})
        assert (third.status_code, third.json()["error"]["code"]) == (402, "quota_exceeded")

        grown = http.post(f"/snapshots/{with_x}/restore")  # 600 + 600 in the two buckets
        assert (grown.status_code, grown.json()["error"]["code"]) == (402, "quota_exceeded")
        assert [f["key"] for f in http.get(files).json()["data"]] == ["y"]
        forked = fork.json()["data"]["id"]
        assert http.delete(f"/buckets/{forked}", params={"force": "true"}).status_code == 200
        assert http.post(f"/snapshots/{again}/restore").status_code == 200
        assert usage(http) == {"buckets": 1, "storedBytes": 600, "files": 1, "snapshotBytes": 300}
        assert http.put(f"{files}/z", content=b"z" * 101, headers=TEXT).status_code == 402

        take()  # the fifth: as many as the plan keeps
        sixth = http.post(f"/buckets/{bucket['id']}/snapshots")
        assert (sixth.status_code, sixth.json()["error"]["code"]) == (402, "quota_exceeded")
        assert http.delete(f"/snapshots/{empty}").status_code == 204
        take()  # room again


def test_usage_is_exact_under_concurrent_writers(live: LiveServer) -> None:
    secret = make_key(live, make_org(live, "pro"), ALL_SCOPES)
    with live.client(secret) as http:
        buckets = [new_bucket(http, f"conc-{i}")["id"] for i in range(2)]

    def worker(seed: int) -> list[int]:
        rng = random.Random(seed)
        statuses = []
        with live.client(secret) as http:
            for _ in range(25):
                bucket = rng.choice(buckets)
                key = f"k{rng.randrange(8)}"
                action = rng.random()
                if action < 0.55:
                    body = bytes([rng.randrange(256)]) * rng.randrange(0, 1500)
                    response = http.put(
                        f"/buckets/{bucket}/files/{key}", content=body, headers=TEXT
                    )
                elif action < 0.75:
                    response = http.delete(f"/buckets/{bucket}/files/{key}")
                elif action < 0.9:
                    response = http.patch(
                        f"/buckets/{bucket}/files/{key}", json={"key": f"k{rng.randrange(8)}"}
                    )
                else:
                    response = http.get(f"/buckets/{bucket}/files")
                statuses.append(response.status_code)
        return statuses

    with ThreadPoolExecutor(16) as pool:
        statuses = [s for result in pool.map(worker, range(16)) for s in result]
    assert set(statuses) <= {200, 201, 402, 404, 409}, set(statuses)
    assert 402 in statuses or sum(1 for s in statuses if s == 201) > 0
    with live.client(secret) as http:
        stored = usage(http)["storedBytes"]
        assert stored == listed_bytes(http)
        assert stored <= 20000
        total_files = sum(http.get(f"/buckets/{b}").json()["data"]["fileCount"] for b in buckets)
        assert usage(http)["files"] == total_files


def test_plan_limits_shown(live: LiveServer) -> None:
    with live.client(make_key(live, make_org(live, "free"), ["files:read"])) as http:
        org = http.get("/organization").json()["data"]
        assert org["plan"] == "free"
        assert org["limits"] == {
            "requestsPerMinute": 1000000,
            "maxBuckets": 2,
            "maxStorageBytes": 1000,
        }


def test_usage_survives_a_restart(tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "data", CONFIG).start()
    with server.client() as http:
        bucket = new_bucket(http, "persist")
        http.put(f"/buckets/{bucket['id']}/files/x", content=b"12345", headers=TEXT)
    server.kill()
    server.start()
    try:
        with server.client() as http:
            time.sleep(0.1)
            assert usage(http) == {"buckets": 1, "storedBytes": 5, "files": 1, "snapshotBytes": 0}
    finally:
        server.stop()
