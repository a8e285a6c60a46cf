from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live import SHARED_CONFIG, LiveServer, new_bucket


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the tests that only need the default limits (pro plan raised)."""
    live = LiveServer(tmp_path_factory.mktemp("shared") / "data", SHARED_CONFIG).start()
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
