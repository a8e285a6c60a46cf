"""Many clients at once, checked afterwards: bytes, ETags, counters and references agree."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import BACKENDS, unique_name, with_backend

TEXT = {"Content-Type": "application/octet-stream"}


def body_for(seed: int, rng: random.Random) -> bytes:
    """A content that names itself, so a download can be checked on its own."""
    head = f"seed={seed};".encode()
    return head + bytes([seed % 251]) * rng.choice([0, 10, 1000, 70_000, 1_500_000])


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    """A server of the test's own, so it can be stopped and checked at the end."""
    live = LiveServer(tmp_path / "data", with_backend(request, request.param, TEST_CONFIG))
    live.start()
    yield live
    live.stop()


def test_mixed_concurrent_load_ends_consistent(server: LiveServer) -> None:
    with server.client() as http:
        bucket = new_bucket(http, unique_name("busy"))
    base = f"/buckets/{bucket['id']}/files"
    written: dict[str, bytes] = {}
    statuses: list[int] = []

    def client(worker: int) -> None:
        rng = random.Random(worker)
        with server.client(timeout=60) as http:
            for step in range(12):
                seed = worker * 1000 + step
                action = rng.random()
                key = rng.choice(["same", "same", f"own-{worker}", f"shared-{rng.randrange(5)}"])
                if action < 0.6:
                    body = body_for(seed, rng)
                    written[hashlib.sha256(body).hexdigest()] = body
                    response = http.put(f"{base}/{key}", content=body, headers=TEXT)
                elif action < 0.72:
                    response = http.delete(f"{base}/{key}")
                elif action < 0.84:
                    response = http.patch(
                        f"{base}/{key}", json={"key": f"moved-{rng.randrange(5)}"}
                    )
                elif action < 0.92:
                    response = http.get(f"{base}", params={"limit": 100})
                else:
                    response = http.get(f"{base}/{key}")
                    if response.status_code == 200:
                        assert hashlib.sha256(response.content).hexdigest() in written
                statuses.append(response.status_code)

    with ThreadPoolExecutor(50) as pool:
        list(pool.map(client, range(50)))
    assert set(statuses) <= {200, 201, 404, 409}, sorted(set(statuses))
    assert 500 not in statuses

    with server.client() as http:
        listed = http.get(base, params={"limit": 100}).json()["data"]
        total = 0
        for item in listed:
            response = http.get(f"{base}/{item['key']}")
            digest = hashlib.sha256(response.content).hexdigest()
            assert digest in written, f"{item['key']} holds bytes nobody wrote"
            assert response.headers["etag"] == item["etag"] == f'"{digest}"'
            assert len(response.content) == item["size"]
            total += item["size"]
        data = http.get(f"/buckets/{bucket['id']}").json()["data"]
        assert data["fileCount"] == len(listed) and data["sizeBytes"] == total
    server.stop()  # reference counts against references, blob files against the index
    assert server.cli("check").strip().endswith("consistent")


def test_concurrent_overwrites_of_one_key_leave_one_whole_version(server: LiveServer) -> None:
    with server.client() as http:
        bucket = new_bucket(http, unique_name("race"))
    path = f"/buckets/{bucket['id']}/files/contended"
    bodies = {i: bytes([i]) * (200_000 + i) for i in range(30)}

    def put(i: int) -> int:
        with server.client(timeout=60) as http:
            return http.put(path, content=bodies[i], headers=TEXT).status_code

    with ThreadPoolExecutor(30) as pool:
        assert set(pool.map(put, bodies)) == {201}
    with server.client() as http:
        final = http.get(path)
        assert final.content in bodies.values()
        assert final.headers["etag"] == f'"{hashlib.sha256(final.content).hexdigest()}"'
        assert http.get(f"/buckets/{bucket['id']}").json()["data"]["sizeBytes"] == len(
            final.content
        )
