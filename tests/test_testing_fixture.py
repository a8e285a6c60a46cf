"""`bucketd.testing` from an unrelated project's test suite: pytest finds the fixtures by
itself (the pytest11 plugin), and the boto3 client they yield works on a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pytest run of its own, starting a server

APP_TESTS = """
import boto3


def test_my_app_stores_a_photo(bucketd_s3):
    bucketd_s3.put_object(Bucket="photos", Key="cat.jpg", Body=b"meow")
    assert bucketd_s3.get_object(Bucket="photos", Key="cat.jpg")["Body"].read() == b"meow"


def test_my_own_client_from_the_settings(bucketd_server):
    s3 = boto3.client(
        "s3",
        endpoint_url=bucketd_server.endpoint,
        aws_access_key_id=bucketd_server.access_key_id,
        aws_secret_access_key=bucketd_server.secret_access_key,
        region_name=bucketd_server.region,
    )
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["photos"]
"""


def test_an_unrelated_projects_tests_get_a_real_server(tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text(APP_TESTS)
    environ = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=tmp_path,
        env={**environ, "BUCKETD_TEST_BUCKETS": "photos"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "2 passed" in ran.stdout
