"""SIGKILL at every point of an upload, overwrite and delete; the restart loses nothing.

After each crash and restart: every key is at its old or its new content, never torn or
missing; counters equal what is stored; no temp file and no unreferenced blob remains
(`bucketd check` on the stopped data dir says "consistent").
"""

from __future__ import annotations

import hashlib
import random
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.rawhttp import connect, request_head

pytestmark = pytest.mark.slow  # three server starts per test

OLD = b"old content " * 1000
NEW = b"NEW content " * 2000
TEXT = {"Content-Type": "text/plain"}
BLOB_FILES = "[storage]\ninline_max_bytes = 0\n"
LAYOUTS = {
    "blob-files": BLOB_FILES,
    # Contents up to 64 KiB committed inside the index transaction (docs/performance.md).
    "inline": "[storage]\ninline_max_bytes = 65536\n",
}


@pytest.fixture(params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest) -> str:
    return LAYOUTS[request.param]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Per layout, a stopped data dir holding a bucket with `k` and `gone` at OLD, made once
    and copied for each test (made by a real server, as every test's would be)."""
    made: dict[str, tuple[Path, str]] = {}
    for layout in LAYOUTS.values():
        base = tmp_path_factory.mktemp("crash-template")
        live = LiveServer(base / "data", TEST_CONFIG + layout, durable=True).start()
        with live.client() as http:
            bucket = new_bucket(http, "crash")
            for key in ("k", "gone"):
                response = http.put(
                    f"/buckets/{bucket['id']}/files/{key}", content=OLD, headers=TEXT
                )
                assert response.status_code == 201
        live.stop()
        made[layout] = (live.data_dir, bucket["id"])
    return made


Prepared = tuple[LiveServer, str]


@pytest.fixture
def prepared(
    tmp_path: Path, layout: str, templates: dict[str, tuple[Path, str]]
) -> tuple[LiveServer, str]:
    """A stopped server on a fresh copy of the layout's template data dir, and the bucket."""
    template, bucket_id = templates[layout]
    shutil.copytree(template, tmp_path / "data")
    return LiveServer(tmp_path / "data", TEST_CONFIG + layout, durable=True), bucket_id


def restart_and_check(live: LiveServer, bucket_id: str) -> dict[str, bytes | None]:
    """Restart (start-up clean-up runs), read every key, stop, and run `bucketd check`."""
    live.env = {}
    live.start()
    contents: dict[str, bytes | None] = {}
    try:
        with live.client() as http:
            listed = http.get(f"/buckets/{bucket_id}/files", params={"limit": 100}).json()["data"]
            for item in listed:
                response = http.get(f"/buckets/{bucket_id}/files/{item['key']}")
                assert (
                    response.headers["etag"] == f'"{hashlib.sha256(response.content).hexdigest()}"'
                )
                assert len(response.content) == item["size"]
                contents[item["key"]] = response.content
            bucket = http.get(f"/buckets/{bucket_id}").json()["data"]
            assert bucket["sizeBytes"] == sum(len(c or b"") for c in contents.values())
            assert bucket["fileCount"] == len(contents)
    finally:
        live.stop()
    assert live.cli("check").strip().endswith("consistent")
    return contents


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("put.after_blob=kill", OLD),  # blob durable, index not yet pointing at it
        ("put.in_commit=kill", OLD),  # inside the transaction, before COMMIT
        ("put.after_commit=kill", NEW),  # committed, not yet answered
    ],
)
def test_overwrite_killed_at(prepared: Prepared, layout: str, fault: str, expected: bytes) -> None:
    live, bucket_id = prepared
    live.env = {"BUCKETD_FAULTS": fault}
    live.start()
    with live.client() as http, pytest.raises(httpx.TransportError):
        http.put(f"/buckets/{bucket_id}/files/k", content=NEW, headers=TEXT)
    live.kill()
    contents = restart_and_check(live, bucket_id)
    assert contents["k"] == expected
    assert contents["gone"] == OLD


@pytest.mark.parametrize("fault", ["put.after_blob=kill", "put.in_commit=kill"])
def test_new_key_killed_before_commit_is_absent(
    prepared: Prepared, layout: str, fault: str
) -> None:
    live, bucket_id = prepared
    live.env = {"BUCKETD_FAULTS": fault}
    live.start()
    with live.client() as http, pytest.raises(httpx.TransportError):
        http.put(f"/buckets/{bucket_id}/files/fresh", content=NEW, headers=TEXT)
    live.kill()
    contents = restart_and_check(live, bucket_id)
    assert "fresh" not in contents and contents["k"] == OLD


def test_delete_killed_in_commit_keeps_the_file(prepared: Prepared, layout: str) -> None:
    live, bucket_id = prepared
    live.env = {"BUCKETD_FAULTS": "delete.in_commit=kill"}
    live.start()
    with live.client() as http, pytest.raises(httpx.TransportError):
        http.delete(f"/buckets/{bucket_id}/files/gone")
    live.kill()
    contents = restart_and_check(live, bucket_id)
    assert contents["gone"] == OLD


def test_killed_before_the_body_ends(prepared: Prepared, layout: str) -> None:
    live, bucket_id = prepared
    live.start()
    with connect(live.url) as sock:
        sock.sendall(
            request_head(
                "PUT",
                f"/v1/buckets/{bucket_id}/files/k",
                {
                    "Authorization": f"Bearer {live.admin_key}",
                    "Content-Type": "text/plain",
                    "Content-Length": str(8 * 1024 * 1024),
                },
            )
        )
        sock.sendall(b"x" * (3 * 1024 * 1024))  # past the first 1 MiB buffer: a temp file exists
        time.sleep(0.3)
        live.kill()
    assert list((live.data_dir / "tmp").iterdir())  # the crash did leave a temp file
    contents = restart_and_check(live, bucket_id)
    assert contents["k"] == OLD


def test_killed_under_concurrent_load(prepared: Prepared, layout: str) -> None:
    """Many writers of a few keys; SIGKILL at a random moment; once more on what the first
    kill left."""
    live, bucket_id = prepared
    contents_by_hash = {hashlib.sha256(OLD).hexdigest(): OLD}
    repeats = 40000 if layout == BLOB_FILES else 1500  # inline: contents that fit in the index
    for round_ in range(2):
        live.start()
        stop = threading.Event()

        def writer(
            seed: int, stop: threading.Event = stop, round_: int = round_, repeats: int = repeats
        ) -> None:
            rng = random.Random(seed)
            with live.client() as http:
                while not stop.is_set():
                    body = (
                        f"round {round_} writer {seed} value {rng.random()} ".encode()
                        * rng.randrange(1, repeats)
                    )
                    contents_by_hash[hashlib.sha256(body).hexdigest()] = body
                    key = rng.choice(["k", "gone", "a", "b", "c"])
                    try:
                        if rng.random() < 0.8:
                            http.put(
                                f"/buckets/{bucket_id}/files/{key}", content=body, headers=TEXT
                            )
                        else:
                            http.delete(f"/buckets/{bucket_id}/files/{key}")
                    except httpx.TransportError:
                        return

        threads = [threading.Thread(target=writer, args=(round_ * 100 + i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(random.uniform(0.5, 1.5))
        live.kill()
        stop.set()
        for thread in threads:
            thread.join()
        contents = restart_and_check(live, bucket_id)
        for key, content in contents.items():
            assert content is not None
            assert hashlib.sha256(content).hexdigest() in contents_by_hash, f"{key} is torn"


def test_every_acknowledged_upload_survives_a_kill(prepared: Prepared, layout: str) -> None:
    live, bucket_id = prepared
    live.start()
    acknowledged: dict[str, bytes] = {}
    with live.client() as http:
        for i in range(60):
            body = f"acknowledged {i}".encode() * (1 + i * 50)
            if (
                http.put(
                    f"/buckets/{bucket_id}/files/ack-{i}", content=body, headers=TEXT
                ).status_code
                == 201
            ):
                acknowledged[f"ack-{i}"] = body
    live.kill()
    contents = restart_and_check(live, bucket_id)
    for key, body in acknowledged.items():
        assert contents[key] == body
