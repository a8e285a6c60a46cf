"""SIGKILL during a versioned overwrite, a delete-marker write and a lifecycle expiry: after
the restart every version is whole or absent, the counters equal what is stored, and
`bucketd check` says "consistent"."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live import TEST_CONFIG, LiveServer, new_bucket

pytestmark = pytest.mark.slow  # two or three server starts per test

OLD = b"old content " * 1000
NEW = b"NEW content " * 2000
TEXT = {"Content-Type": "text/plain"}
LIFECYCLE = "\n[lifecycle]\nday_seconds = 0.2\ninterval_seconds = 0.2\n"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A stopped data dir with a versioned bucket: `k` at OLD then NEW (OLD noncurrent),
    `one` at OLD."""
    base = tmp_path_factory.mktemp("crash-versions")
    live = LiveServer(base / "data", TEST_CONFIG, durable=True).start()
    with live.client() as http:
        bucket = new_bucket(http, "crash", versioning="enabled")
        for key, content in (("k", OLD), ("k", NEW), ("one", OLD)):
            answer = http.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
            assert answer.status_code == 201
    live.stop()
    return live.data_dir, bucket["id"]


@pytest.fixture
def copied(tmp_path: Path, template: tuple[Path, str]) -> tuple[Path, str]:
    shutil.copytree(template[0], tmp_path / "data")
    return tmp_path / "data", template[1]


def versions_after_restart(live: LiveServer, bucket_id: str) -> dict[str, list[bytes | None]]:
    """Restart without faults or lifecycle passes; every version of every key (newest first,
    None for a delete marker), each read whole and checked against its ETag; the counters
    checked against them; then `bucketd check`."""
    live.env = {"BUCKETD_LIFECYCLE__INTERVAL_SECONDS": "0"}
    live.start()
    found: dict[str, list[bytes | None]] = {}
    try:
        with live.client() as http:
            url = f"/buckets/{bucket_id}"
            listed = http.get(f"{url}/versions", params={"limit": 100}).json()["data"]
            for version in listed:
                content: bytes | None = None
                if not version["deleteMarker"]:
                    answer = http.get(
                        f"{url}/files/{version['key']}", params={"versionId": version["versionId"]}
                    )
                    content = answer.content
                    assert answer.headers["etag"] == f'"{hashlib.sha256(content).hexdigest()}"'
                    assert len(content) == version["size"]
                found.setdefault(version["key"], []).append(content)
            bucket = http.get(url).json()["data"]
            stored = [c for contents in found.values() for c in contents if c is not None]
            assert bucket["fileCount"] == len(stored)
            assert bucket["sizeBytes"] == sum(len(c) for c in stored)
    finally:
        live.stop()
    assert live.cli("check").strip().endswith("consistent")
    return found


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("put.in_commit=kill", [NEW, OLD]),  # the blob is durable, the index not pointing
        ("put.after_commit=kill", [OLD, NEW, OLD]),
    ],
)
def test_versioned_overwrite_killed_at(
    copied: tuple[Path, str], fault: str, expected: list[bytes]
) -> None:
    data_dir, bucket_id = copied
    live = LiveServer(data_dir, TEST_CONFIG, durable=True, env={"BUCKETD_FAULTS": fault})
    live.start()
    with live.client() as http, pytest.raises(httpx.TransportError):
        http.put(f"/buckets/{bucket_id}/files/k", content=OLD, headers=TEXT)
    live.kill()
    found = versions_after_restart(live, bucket_id)
    assert found["k"] == expected and found["one"] == [OLD]


@pytest.mark.parametrize(
    ("fault", "request_version"),
    [("delete.in_commit=kill", False), ("version.in_commit=kill", True)],
)
def test_delete_killed_in_commit_changes_nothing(
    copied: tuple[Path, str], fault: str, request_version: bool
) -> None:
    data_dir, bucket_id = copied
    live = LiveServer(data_dir, TEST_CONFIG, durable=True, env={"BUCKETD_FAULTS": fault})
    live.start()
    with live.client() as http:
        params = {}
        if request_version:
            listed = http.get(f"/buckets/{bucket_id}/versions", params={"key": "k"}).json()
            params = {"versionId": listed["data"][1]["versionId"]}
        with pytest.raises(httpx.TransportError):
            http.delete(f"/buckets/{bucket_id}/files/k", params=params)
    live.kill()
    found = versions_after_restart(live, bucket_id)
    assert found["k"] == [NEW, OLD] and found["one"] == [OLD]


@pytest.mark.parametrize(
    ("fault", "rules"),
    [
        ("delete.in_commit=kill", [{"id": "expire", "prefix": "one", "expirationDays": 1}]),
        ("version.in_commit=kill", [{"id": "old", "prefix": "k", "noncurrentDays": 1}]),
    ],
)
def test_lifecycle_expiry_killed_in_commit_changes_nothing(
    copied: tuple[Path, str], fault: str, rules: list[dict]
) -> None:
    data_dir, bucket_id = copied
    idle = {"BUCKETD_LIFECYCLE__INTERVAL_SECONDS": "0"}  # no pass before the fault is set
    # one process: the fault kills the process it runs in, and a supervisor would restart it
    live = LiveServer(data_dir, TEST_CONFIG + LIFECYCLE, durable=True, env=idle, workers=1)
    live.start()
    with live.client() as http:
        assert http.patch(f"/buckets/{bucket_id}", json={"lifecycle": rules}).status_code == 200
    live.stop()
    live.env = {"BUCKETD_FAULTS": fault}
    try:
        try:
            live.start()
        except RuntimeError:  # the worker's first pass can kill it before it answers
            pass
        assert live.process is not None
        deadline = time.monotonic() + 30
        while live.process.poll() is None:  # the worker's first expiry kills the server
            assert time.monotonic() < deadline, "the lifecycle worker never expired anything"
            time.sleep(0.1)
    finally:
        live.kill()
    found = versions_after_restart(live, bucket_id)
    assert found["k"] == [NEW, OLD] and found["one"] == [OLD]
