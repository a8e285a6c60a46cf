"""The errors a newcomer meets name the fix: a missing or wrong key, a wrong region, a
bucket not active yet, a CLI that cannot reach its server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, free_port


@pytest.fixture(scope="module")
def slow_buckets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose new buckets stay provisioning for a minute."""
    live = LiveServer(
        tmp_path_factory.mktemp("newcomer") / "data",
        "provisioning_delay_seconds = 60.0\n" + TEST_CONFIG,
    ).start()
    yield live
    live.stop()


def test_a_missing_or_wrong_key_says_where_keys_come_from(slow_buckets: LiveServer) -> None:
    missing = web.get(slow_buckets.url + "/v1/buckets").json()["error"]["message"]
    assert "admin.key" in missing and "Basic" in missing
    wrong = web.get(
        slow_buckets.url + "/v1/buckets", headers={"Authorization": "Bearer svc_" + "a" * 43}
    ).json()["error"]["message"]
    assert "bucketd keys create" in wrong


def test_a_wrong_region_names_the_right_one(slow_buckets: LiveServer) -> None:
    client = slow_buckets.s3(region="eu-central-9")
    with pytest.raises(ClientError) as refused:
        client.list_buckets()
    message = refused.value.response["Error"]["Message"]
    assert "'eu-central-9' is wrong; expecting 'us-east-1'" in message


def test_a_bucket_not_active_yet_says_how_to_watch_it(slow_buckets: LiveServer) -> None:
    with slow_buckets.client() as http:
        made = http.post("/buckets", json={"name": "not-yet", "region": "us-east-1"})
        bucket_id = made.json()["data"]["id"]
        refused = http.put(
            f"/buckets/{bucket_id}/files/k", content=b"x", headers={"Content-Type": "text/plain"}
        )
    assert refused.status_code == 409
    assert f"GET /v1/buckets/{bucket_id}" in refused.json()["error"]["message"]


def test_a_cli_that_cannot_reach_its_server_names_the_url_and_the_setting(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    ran = subprocess.run(
        [sys.executable, "-m", "gateway", "buckets", "list", "--url", url, "--key", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 1
    assert f"cannot reach {url}/" in ran.stderr and "BUCKETD_URL" in ran.stderr


def test_the_cli_says_its_version() -> None:
    from importlib import metadata

    ran = subprocess.run(
        [sys.executable, "-m", "gateway", "--version"], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0 and ran.stdout == f"bucketd {metadata.version('bucketd')}\n"
