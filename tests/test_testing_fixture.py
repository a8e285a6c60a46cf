"""`bucketd.testing` from an unrelated project's test suite: pytest finds the fixtures by
itself (the pytest11 plugin), the boto3 client they yield works on a real server, and every
test starts from the same clean state (issue 35 point 2) while the server starts once."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bucketd.testing import running_bucketd
from tests.support import web

pytestmark = pytest.mark.slow  # a pytest run of its own, starting a server

README = Path(__file__).resolve().parent.parent / "README.md"
COPIES = 40

CONFTEST = """
import pytest


@pytest.fixture(scope="session")
def looker(bucketd_server):
    s3 = bucketd_server.s3()
    yield s3
    s3.close()


@pytest.fixture(autouse=True)
def buckets_at_start(bucketd_reset, looker):
    '''What each test finds: the server it talks to, and its buckets and their files.'''
    names = sorted(b["Name"] for b in looker.list_buckets()["Buckets"])
    files = sum(looker.list_objects_v2(Bucket=name)["KeyCount"] for name in names)
    with open("seen.txt", "a") as seen:
        seen.write(f"{bucketd_reset.endpoint} {','.join(names)} {files}\\n")
"""

APP_TESTS = """
from datetime import UTC, datetime, timedelta

import boto3


def test_my_app_stores_a_photo(bucketd_s3):
    bucketd_s3.put_object(Bucket="logs", Key="cat.jpg", Body=b"meow")
    assert bucketd_s3.get_object(Bucket="logs", Key="cat.jpg")["Body"].read() == b"meow"


def test_my_own_client_from_the_settings(bucketd_server):
    s3 = boto3.client(
        "s3",
        endpoint_url=bucketd_server.endpoint,
        aws_access_key_id=bucketd_server.access_key_id,
        aws_secret_access_key=bucketd_server.secret_access_key,
        region_name=bucketd_server.region,
    )
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["archive", "logs"]


def test_a_locked_version_and_a_deleted_declared_bucket(bucketd_s3):
    bucketd_s3.create_bucket(Bucket="records", ObjectLockEnabledForBucket=True)
    bucketd_s3.put_object(
        Bucket="records",
        Key="invoice.pdf",
        Body=b"%PDF",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=datetime.now(UTC) + timedelta(days=365),
    )
    bucketd_s3.delete_bucket(Bucket="archive")
"""


def _readme_example() -> str:
    """The README's pytest example, as written."""
    text = README.read_text("utf-8")
    start = text.index("## In CI and in your tests")
    example = re.search(r"```python\n(def test_.*?)```", text[start:], re.S)
    assert example is not None
    return example.group(1)


def test_the_readme_example_in_forty_tests_passes_on_one_server(tmp_path: Path) -> None:
    example = _readme_example()
    assert "bucketd_s3.create_bucket(" in example  # made again in every copy
    copies = [example.replace("def test_", f"def test_{number}_", 1) for number in range(COPIES)]
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_readme.py").write_text("\n\n".join(copies))
    (tmp_path / "test_app.py").write_text(APP_TESTS)
    environ = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env={**environ, "BUCKETD_TEST_BUCKETS": "logs,archive"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"{COPIES + 3} passed" in ran.stdout, ran.stdout
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    assert len(seen) == COPIES + 3
    endpoints = {line.split()[0] for line in seen}
    assert len(endpoints) == 1  # one server for the whole session
    # every test found the declared buckets, empty, and nothing the tests before it made
    assert {line.split(maxsplit=1)[1] for line in seen} == {"archive,logs 0"}


def test_the_server_chooses_its_own_ports_even_when_probes_would_collide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plugin used to probe two free ports one after the other and hand them to the
    server; the kernel can give a just-released port out again, and the server then refused
    to start ("port and s3_port are both ..."), as it did once in a full run. Here every
    probe would answer the same port: the server must still start, on two ports of its own
    that the ready file names."""

    class SamePort(socket.socket):
        def getsockname(self) -> object:
            address = super().getsockname()
            return (address[0], 45321) if isinstance(address, tuple) else address

    monkeypatch.setattr(socket, "socket", SamePort)
    with running_bucketd() as server:
        monkeypatch.undo()
        api, s3 = urlsplit(server.api).port, urlsplit(server.endpoint).port
        assert api and s3 and api != s3
        assert web.get(server.root + "/healthz", timeout=10).status_code == 200
        assert web.get(server.endpoint, timeout=10).status_code in (200, 403)
