"""A real bucketd server in a subprocess on a free loopback port, for tests and benchmarks."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import io
import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support import launch, web

ROOT = Path(__file__).resolve().parent.parent.parent
TEST_CONFIG = """
[plans.pro]
requests_per_minute = 10000000
max_buckets = 1000000
max_storage_bytes = 1125899906842624
"""


SHARED_CONFIG = (
    'cors_origins = ["http://allowed.test:*"]\n'
    + TEST_CONFIG
    + """
[plans.free]
requests_per_minute = 10000000
[ratelimit]
anonymous_rpm = 10000000
[events]
allowed_hosts = ["127.0.0.1"]
retry_first_seconds = 0.1
retry_seconds = 2.0
stream_keepalive_seconds = 2.0
"""
)
"""The session-wide server: no test is throttled by another's unauthenticated requests;
pages at http://allowed.test:<port> may call its /v1 API (the browser tests map that name
to loopback); a changed policy reaches a live stream within 2 s, not 15."""


IN_PROCESS = ("orgs", "keys")
"""Commands `LiveServer.cli` runs in the test process (admin set-up, not the CLI's tests)."""
PORTS = range(20000, 32000)
"""Below Linux's ephemeral range (32768 and up): a port the kernel hands to an outgoing
connection between our check and the server's bind would make the server fail to start."""


def _worker_ports() -> range:
    """This pytest-xdist worker's share of PORTS, so workers never race for a port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw") or 0)
    share = len(PORTS) // count
    return range(PORTS.start + index * share, PORTS.start + (index + 1) * share)


def close_clients(clients: list[Any]) -> None:
    for client in clients:
        client.close()
    clients.clear()


def free_port() -> int:
    """A port free now and not handed out lately (a server binds its two ports only when it
    starts: the same port twice would pass the check and fail the server's listen)."""
    ports = _worker_ports()
    while True:
        port = random.choice(ports)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            _HANDED_OUT.append(port)
            return port


_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=200)


class LiveServer:
    """`bucketd serve` on a data dir; stop() by SIGTERM, kill() by SIGKILL, start() again."""

    def __init__(
        self,
        data_dir: Path,
        config: str = TEST_CONFIG,
        env: dict[str, str] | None = None,
        durable: bool = False,
        root: Path = ROOT,
        workers: int | None = None,
    ):
        """`durable`: fsync as in production. Off by default: a test about anything but
        durability waits for the disk for nothing (a SIGKILL loses nothing fsync would keep;
        the crash tests still run with it). `root`: the source tree to run (the benchmarks
        compare against another revision's). `workers`: `--workers`, by default
        $BUCKETD_TEST_WORKERS or 1 (the suite passes with 2 as well)."""
        self.workers = workers or int(os.environ.get("BUCKETD_TEST_WORKERS", "1"))
        self.data_dir = data_dir
        self.root = root
        self.config_path = data_dir.parent / f"{data_dir.name}.toml"
        self.config_path.write_text(config)
        self.env = ({} if durable else {"BUCKETD_STORAGE__FSYNC": "false"}) | (env or {})
        self.backend = "s3" if 'backend = "s3"' in config else "local"
        brand = re.search(r'brand = "([a-z0-9-]+)"', config)
        self.brand = brand.group(1) + "-" if brand else ""
        self.seaweed: Any = None
        """The SeaweedFS server behind an S3-backed instance, when a test needs to look."""
        self.port = free_port()
        self.s3_port = free_port()
        self.process: launch.Process | None = None
        self._s3_clients: list[Any] = []
        """boto3 clients handed out, closed on stop(): an unclosed one's sockets surface
        later, at a random garbage collection, as a ResourceWarning in some other test."""
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_key(self) -> str:
        return (self.data_dir / "admin.key").read_text().strip()

    def start(self, timeout: float = 20.0) -> LiveServer:
        self.process = launch.start(
            [
                "serve",
                "--port",
                str(self.port),
                "--s3-port",
                str(self.s3_port),
                "--workers",
                str(self.workers),
                "--data-dir",
                str(self.data_dir),
                "--config",
                str(self.config_path),
            ],
            env={**os.environ, **self.env},
            log=self.log_path,
            cwd=self.root,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"bucketd exited ({self.process.returncode}): {self.log_path.read_text()}"
                )
            try:
                if web.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"bucketd did not start: {self.log_path.read_text()}")

    def _wait(self, sig: int) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"bucketd did not exit within 15 s of signal {sig}") from None
        finally:
            self.process = None

    def stop(self) -> None:
        self._wait(signal.SIGTERM)
        close_clients(self._s3_clients)

    def kill(self) -> None:
        self._wait(signal.SIGKILL)

    @property
    def s3_url(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def s3_credentials(
        self,
        org: str | None = None,
        scopes: str = "buckets:read,buckets:write,files:read,files:write",
        *extra: str,
    ) -> tuple[str, str]:
        """(access key id, secret) of new S3 credentials, for the admin key's organization
        unless `org` is given."""
        if org is None:
            headers = {"Authorization": f"Bearer {self.admin_key}"}
            org = web.get(self.url + "/v1/organization", headers=headers).json()["data"]["id"]
        out = self.cli("keys", "create", "--org", org, "--scopes", scopes, "--s3", *extra)
        access, secret = out.strip().splitlines()[-1].split(" ")
        return access, secret

    def s3(
        self,
        access: str | None = None,
        secret: str | None = None,
        region: str = "us-east-1",
        **config: Any,
    ) -> Any:
        """A boto3 client of this server's S3 endpoint (new credentials unless given)."""
        import boto3
        from botocore.config import Config

        if access is None or secret is None:
            access, secret = self.s3_credentials()
        options = {
            "s3": {"addressing_style": "path"},
            "retries": {"total_max_attempts": 1},
            **config,
        }
        client = boto3.client(
            "s3",
            endpoint_url=self.s3_url,
            aws_access_key_id=access,
            aws_secret_access_key=secret,
            region_name=region,
            config=Config(**options),
        )
        self._s3_clients.append(client)
        return client

    def temp_files(self) -> list[Path]:
        tmp = self.data_dir / "tmp"
        return list(tmp.iterdir()) if tmp.exists() else []

    def client(self, key: str | None = None, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.admin_key}"}
        options: dict = {"timeout": 30, **kwargs}
        return web.client(base_url=self.url + "/v1", headers=headers, **options)

    def cli(self, *args: str) -> str:
        """Run a `bucketd` command on this data dir; returns stdout. Making organizations and
        keys runs in this process (the CLI's own code, on the live data dir: a subprocess
        costs a third of a second); every other command is a real `bucketd` process."""
        if args[0] in IN_PROCESS:
            return self._cli_in_process(args)
        result = launch.run(
            [*args, "--data-dir", str(self.data_dir), "--config", str(self.config_path)],
            env={**os.environ, **self.env},
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"bucketd {' '.join(args)} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}"
            )
        return result.stdout

    def _cli_in_process(self, args: tuple[str, ...]) -> str:
        """On a thread of its own: the caller may be inside an event loop (Playwright's)."""
        from gateway.cli import main

        out = io.StringIO()
        saved = dict(os.environ)
        os.environ.update(self.env)
        argv = [*args, "--data-dir", str(self.data_dir), "--config", str(self.config_path)]
        try:
            with (
                contextlib.redirect_stdout(out),
                concurrent.futures.ThreadPoolExecutor(1) as thread,
            ):
                thread.submit(main, argv).result()
        except SystemExit as exc:
            if exc.code:
                raise RuntimeError(f"bucketd {' '.join(args)} failed: {out.getvalue()}") from exc
        finally:
            os.environ.clear()
            os.environ.update(saved)
        return out.getvalue()


def wait_active(client: httpx.Client, bucket_id: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        bucket = client.get(f"/buckets/{bucket_id}").json()["data"]
        if bucket["status"] != "provisioning":
            return bucket
        time.sleep(0.02)
    raise AssertionError(f"bucket {bucket_id} still provisioning")


def new_bucket(client: httpx.Client, name: str, **fields: object) -> dict:
    response = client.post("/buckets", json={"name": name, "region": "us-east-1", **fields})
    assert response.status_code == 201, response.text
    return wait_active(client, response.json()["data"]["id"])
