"""A real bucketd for an application's tests: `pytest` finds these fixtures by itself once
bucketd is installed (a `pytest11` plugin), like moto's mocks but a real server on loopback.

    def test_upload(bucketd_s3):
        bucketd_s3.create_bucket(Bucket="photos")
        bucketd_s3.put_object(Bucket="photos", Key="cat.jpg", Body=b"...")

- `bucketd_server` (session): one `bucketd serve` on free ports with a temporary data dir
  and its own S3 credential; buckets named in `BUCKETD_TEST_BUCKETS` (comma-separated)
  exist from the start. Its `.endpoint`, `.access_key_id`, `.secret_access_key`,
  `.region` and `.api` (the /v1 URL) configure any client.
- `bucketd_s3`: a boto3 S3 client of it (boto3 is the application's own dependency).
- `running_bucketd(...)`: the same as a context manager, outside pytest.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REGION = "us-east-1"


@dataclass(frozen=True)
class BucketdServer:
    api: str
    endpoint: str
    access_key_id: str
    secret_access_key: str
    data_dir: Path
    region: str = REGION

    def s3(self, **config: Any) -> Any:
        """A boto3 S3 client of this server (path-style addressing)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, **config),
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running_bucketd(
    buckets: list[str] | tuple[str, ...] = (),
    data_dir: Path | None = None,
    timeout: float = 30.0,
) -> Iterator[BucketdServer]:
    """`bucketd serve` until the block ends: free ports, a temporary data dir unless one is
    given, S3 credentials of its own, `buckets` made before it is ready."""
    with tempfile.TemporaryDirectory(prefix="bucketd-test-") as scratch:
        base = Path(scratch)
        data = data_dir or base / "data"
        ready = base / "ready.json"
        access, secret = "test" + secrets.token_hex(4), secrets.token_urlsafe(24)
        environ = {
            **os.environ,
            "BUCKETD_ACCESS_KEY_ID": access,
            "BUCKETD_SECRET_ACCESS_KEY": secret,
            "BUCKETD_BUCKETS": ",".join(buckets),
            "BUCKETD_ACCESS_LOG": "false",
        }
        log = open(base / "bucketd.log", "ab")  # noqa: SIM115 (closed below)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway",
                "dev",
                "--data-dir",
                str(data),
                "--port",
                str(_free_port()),
                "--s3-port",
                str(_free_port()),
                "--ready-file",
                str(ready),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        try:
            deadline = time.monotonic() + timeout
            while not ready.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "bucketd did not start: " + (base / "bucketd.log").read_text()
                    )
                time.sleep(0.02)
            urls = json.loads(ready.read_text())
            yield BucketdServer(urls["api"] + "/v1", urls["s3"], access, secret, data)
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


@pytest.fixture(scope="session")
def bucketd_server() -> Iterator[BucketdServer]:
    buckets = [b.strip() for b in os.environ.get("BUCKETD_TEST_BUCKETS", "").split(",")]
    with running_bucketd([b for b in buckets if b]) as server:
        yield server


@pytest.fixture
def bucketd_s3(bucketd_server: BucketdServer) -> Iterator[Any]:
    client = bucketd_server.s3()
    yield client
    client.close()
