"""SQLite connections for the index: one writer with group commit, a few readers.

Every write is a plain function run on the writer connection's thread inside a savepoint;
the writer task gathers the writes that queue up while a commit is in flight and commits
them together, so concurrent uploads share one fsync of the WAL instead of paying one each.
A write's caller is answered only after the COMMIT that holds it returned.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from .errors import IndexUnavailable

logger = logging.getLogger("bucketd.index")
T = TypeVar("T")
WriteFn = Callable[[sqlite3.Connection, list[tuple[str, bool]]], Any]
"""A write: gets the connection and a list to which it appends (blob_id, has_file) releases."""
AfterCommit = Callable[[sqlite3.Connection, list[tuple[str, bool]]], None]

MAX_BATCH = 128
BUSY_TIMEOUT_MS = 10_000
DIRECT_BUSY_TIMEOUT_MS = 1_000


@dataclass
class _Write:
    fn: WriteFn
    future: asyncio.Future[Any]
    released: list[tuple[str, bool]] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None


def _run_on(connection: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> Any:
    """Run `fn` with the raw sqlite3 connection on aiosqlite's thread for that connection.

    aiosqlite has no public call for "run this function on your thread"; a transaction of
    several statements would otherwise cost one thread hop per statement.
    """
    return connection._execute(lambda: fn(connection._conn))  # type: ignore[no-untyped-call]


def _pragmas(fsync: bool) -> list[str]:
    return [
        f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
        "PRAGMA journal_mode = WAL",
        f"PRAGMA synchronous = {'FULL' if fsync else 'OFF'}",
        "PRAGMA foreign_keys = OFF",
    ]


def migrations(dialect: str) -> list[tuple[int, str]]:
    """(version, sql) of every migration shipped for `dialect`, in order."""
    folder = resources.files("storage") / "migrations" / dialect
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text("utf-8")))
    return sorted(found)


def _statements(script: str) -> list[str]:
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip() and not current.strip().startswith("--"):
        statements.append(current.strip())
    return statements


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        applied = current.fetchone()[0]
        known = migrations("sqlite")
        newest = known[-1][0] if known else 0
        if applied > newest:
            raise IndexUnavailable(
                f"the index is at schema version {applied}, newer than this bucketd knows "
                f"({newest}); run the newer bucketd, or restore a backup taken before it"
            )
        for version, script in known:
            if version <= applied:
                continue
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class Database:
    """The SQLite file behind the index."""

    def __init__(
        self,
        writer: aiosqlite.Connection,
        readers: list[aiosqlite.Connection],
        after_commit: AfterCommit,
        direct: sqlite3.Connection,
    ) -> None:
        self._writer = writer
        self._readers = readers
        self._direct = direct
        self._next_reader = itertools.cycle(readers)
        self._after_commit = after_commit
        self.observe: Callable[[float], None] | None = None
        """Called with the seconds each write waited for its durable commit (metrics)."""
        self._queue: asyncio.Queue[_Write] = asyncio.Queue()
        self._task = asyncio.create_task(self._write_loop(), name="sqlite-writer")

    @classmethod
    async def open(
        cls, path: Path, fsync: bool, after_commit: AfterCommit, readers: int = 2
    ) -> Database:
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await aiosqlite.connect(path, isolation_level=None)
        try:
            for pragma in _pragmas(fsync):
                await writer.execute(pragma)
            await _run_on(writer, _migrate)
        except BaseException:
            await writer.close()  # its thread would keep the process alive
            raise
        reader_connections = []
        for _ in range(readers):
            reader = await aiosqlite.connect(path, isolation_level=None)
            for pragma in _pragmas(fsync):
                await reader.execute(pragma)
            reader_connections.append(reader)
        direct = sqlite3.connect(path, isolation_level=None)
        for pragma in _pragmas(fsync):
            direct.execute(pragma.replace(str(BUSY_TIMEOUT_MS), str(DIRECT_BUSY_TIMEOUT_MS)))
        return cls(writer, reader_connections, after_commit, direct)

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        for connection in [self._writer, *self._readers]:
            await connection.close()
        self._direct.close()

    def read_now(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A point read on the event loop's own thread.

        An indexed lookup in WAL mode takes microseconds and never waits for the writer;
        handing it to a thread and back costs far more than running it. Scans go through
        `read`, on reader threads.
        """
        try:
            return fn(self._direct)
        except sqlite3.OperationalError as exc:
            raise IndexUnavailable(f"the index cannot be read: {exc}") from exc

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            result: T = await _run_on(next(self._next_reader), fn)
        except sqlite3.OperationalError as exc:
            raise IndexUnavailable(f"the index cannot be read: {exc}") from exc
        return result

    async def write(self, fn: WriteFn) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        await self._queue.put(_Write(fn, future))
        try:
            return await future
        finally:
            if self.observe is not None:
                self.observe(time.perf_counter() - started)

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await _run_on(self._writer, functools.partial(self._commit_batch, batch=batch))
            except BaseException as exc:  # the whole batch failed to commit
                for write in batch:
                    write.error = write.error or _as_unavailable(exc)
                if isinstance(exc, asyncio.CancelledError):
                    _settle(batch)
                    raise
            _settle(batch)

    def _commit_batch(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for write in batch:
                conn.execute("SAVEPOINT w")
                try:
                    write.result = write.fn(conn, write.released)
                    conn.execute("RELEASE w")
                except Exception as exc:
                    conn.execute("ROLLBACK TO w")
                    conn.execute("RELEASE w")
                    write.error = _as_unavailable(exc)
                    write.released.clear()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        released = [r for write in batch for r in write.released]
        if released:
            try:
                self._after_commit(conn, released)
            except Exception:  # committed already; leftovers are collected at start-up
                logger.exception("releasing unreferenced blobs failed")


def snapshot(source: Path, target: Path) -> None:
    """A consistent copy of a live database through SQLite's online backup API (readers and
    the writer of the running server carry on meanwhile)."""
    target.unlink(missing_ok=True)
    with sqlite3.connect(source) as live, sqlite3.connect(target) as copy:
        live.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        live.backup(copy)
    with open(target, "rb+") as handle:
        os.fsync(handle.fileno())


def _as_unavailable(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        return IndexUnavailable(f"the index cannot be written: {exc}")
    return exc


def _settle(batch: list[_Write]) -> None:
    for write in batch:
        if write.future.done():
            continue
        if write.error is not None:
            write.future.set_exception(write.error)
        else:
            write.future.set_result(write.result)
