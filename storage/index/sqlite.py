"""The SQLite driver: runs transaction scripts on one writer with group commit, a few readers.

Every write script runs on the writer connection's thread inside a savepoint; the writer
task gathers the writes that queue up while a commit is in flight and commits them
together, so concurrent uploads share one fsync of the WAL instead of paying one each. A
write's caller is answered only after the COMMIT that holds it returned. Row locks mean
nothing here (one writer) and are ignored.

Several processes may share the file (the workers of `bucketd serve --workers N`, the CLI
beside a server): each batch takes an exclusive `flock` on `<index>-writer` before BEGIN
IMMEDIATE, so a process waiting to commit is woken by the kernel the moment the other
commits, instead of polling in SQLite's busy handler (sleeps of 1, 2, 5, 10 ms and more).
Notifications reach other processes through `share_notes`.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import itertools
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import aiosqlite

from ..errors import IndexUnavailable
from ..faults import Faults
from .maintenance import BLOB_FILES, reapable, with_files
from .migrations import pending
from .sql import Duplicate, Effects, Query, Reaper, Script, take_effect

logger = logging.getLogger("bucketd.index")
T = TypeVar("T")
P = ParamSpec("P")

MAX_BATCH = 128
BUSY_TIMEOUT_MS = 10_000
DIRECT_BUSY_TIMEOUT_MS = 1_000


def _execute(conn: sqlite3.Connection, query: Query) -> Any:
    if query.fetch == "lock":
        return False  # one writer: nothing changes under a write transaction
    cursor = conn.execute(query.sql, query.args)
    if query.fetch == "one":
        return cursor.fetchone()
    if query.fetch == "all":
        return cursor.fetchall()
    if query.fetch == "value":
        row = cursor.fetchone()
        return None if row is None else row[0]
    return cursor.rowcount


def drive(
    conn: sqlite3.Connection, script: Script[T], faults: Faults, effects: Effects | None = None
) -> T:
    """Run a script to its end on `conn` (in whatever transaction the caller holds)."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = script.throw(error) if error is not None else script.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result
        answer, error = None, None
        if type(op) is not Query:
            take_effect(op, faults, effects)
            continue
        try:
            answer = _execute(conn, op)
        except sqlite3.IntegrityError as exc:
            if not op.unique or "UNIQUE" not in str(exc):
                raise
            error = Duplicate(str(exc))


@dataclass
class _Write:
    script: Script[Any]
    future: asyncio.Future[Any]
    effects: Effects = field(default_factory=Effects)
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


def migrate(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        for version, script in pending("sqlite", current.fetchone()[0]):
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class SQLiteDriver:
    """The SQLite file behind the index."""

    def __init__(
        self,
        writer: aiosqlite.Connection,
        readers: list[aiosqlite.Connection],
        direct: sqlite3.Connection,
        reaper: Reaper,
        faults: Faults,
        lock_fd: int,
    ) -> None:
        self._lock_fd = lock_fd
        self._publish: Callable[[str, str], None] | None = None
        self._writer = writer
        self._readers = readers
        self._direct = direct
        self._next_reader = itertools.cycle(readers)
        self._reaper = reaper
        self._faults = faults
        self._listeners: dict[str, list[Callable[[str], None]]] = {}
        self._observe: Callable[[float], None] | None = None
        self._queue: asyncio.Queue[_Write] = asyncio.Queue()
        self._task = asyncio.create_task(self._write_loop(), name="sqlite-writer")

    @classmethod
    async def open(
        cls, path: Path, fsync: bool, reaper: Reaper, faults: Faults, readers: int = 2
    ) -> SQLiteDriver:
        path.parent.mkdir(parents=True, exist_ok=True)
        private(path)
        writer = await aiosqlite.connect(path, isolation_level=None)
        try:
            for pragma in _pragmas(fsync):
                await writer.execute(pragma)
            await _run_on(writer, migrate)
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
        lock_fd = os.open(path.with_name(path.name + "-writer"), os.O_RDWR | os.O_CREAT, 0o644)
        return cls(writer, reader_connections, direct, reaper, faults, lock_fd)

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        for connection in [self._writer, *self._readers]:
            await connection.close()
        self._direct.close()
        os.close(self._lock_fd)

    def observe_writes(self, observe: Callable[[float], None]) -> None:
        self._observe = observe

    async def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Notifications of this process's commits, and of the processes that share theirs
        (`share_notes`): a revocation by the CLI reaches a server when its key cache
        expires."""
        self._listeners.setdefault(channel, []).append(callback)

    def share_notes(self, publish: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """Hand this process's notifications (channel, payload) to `publish` as well; the
        function returned hands another process's to this one's listeners."""
        self._publish = publish
        return self._notify

    def _notify(self, channel: str, payload: str) -> None:
        for callback in self._listeners.get(channel, ()):
            callback(payload)

    async def point(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """A point read on the event loop's own thread.

        An indexed lookup in WAL mode takes microseconds and never waits for the writer;
        handing it to a thread and back costs far more than running it. Scans go through
        `read`, on reader threads.
        """
        try:
            return drive(self._direct, script(*args, **kwargs), self._faults)
        except sqlite3.OperationalError as exc:
            raise IndexUnavailable(f"the index cannot be read: {exc}") from exc

    async def read(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        def run(conn: sqlite3.Connection) -> T:
            return drive(conn, script(*args, **kwargs), self._faults)

        try:
            result: T = await _run_on(next(self._next_reader), run)
        except sqlite3.OperationalError as exc:
            raise IndexUnavailable(f"the index cannot be read: {exc}") from exc
        return result

    async def write(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        await self._queue.put(_Write(script(*args, **kwargs), future))
        try:
            return await future
        finally:
            if self._observe is not None:
                self._observe(time.perf_counter() - started)

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < MAX_BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await _run_on(self._writer, functools.partial(self._commit_batch, batch=batch))
            except BaseException as exc:  # the whole batch failed to commit
                for write in batch:
                    write.error = write.error or as_unavailable(exc)
                if isinstance(exc, asyncio.CancelledError):
                    self._settle(batch)
                    raise
            self._settle(batch)

    def _commit_batch(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._commit_locked(conn, batch)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        released = with_files([blob for write in batch for blob in write.effects.released])
        if released:
            try:
                with self._reaper.claim(released) as claim:
                    claim.reap(drive(conn, reapable(claim.blob_ids), self._faults))
            except Exception:  # committed already; leftovers are collected at start-up
                logger.exception("releasing unreferenced blobs failed")

    def _commit_locked(self, conn: sqlite3.Connection, batch: list[_Write]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for write in batch:
                conn.execute("SAVEPOINT w")
                try:
                    write.result = drive(conn, write.script, self._faults, write.effects)
                    conn.execute("RELEASE w")
                except Exception as exc:
                    conn.execute("ROLLBACK TO w")
                    conn.execute("RELEASE w")
                    write.error = as_unavailable(exc)
                    write.effects = Effects()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _settle(self, batch: list[_Write]) -> None:
        for write in batch:
            if write.future.done():
                continue
            if write.error is not None:
                write.future.set_exception(write.error)
                continue
            write.future.set_result(write.result)
            for note in write.effects.notes:
                self._notify(note.channel, note.payload)
                if self._publish is not None:
                    self._publish(note.channel, note.payload)


def private(path: Path) -> None:
    """Make the database file (or take an existing one) readable by its owner alone
    (0600): it holds key hashes and sealed secrets. SQLite gives its -wal and -shm the
    database's mode."""
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.chmod(path, 0o600)


def snapshot(source: Path, target: Path) -> None:
    """A consistent copy of a live database through SQLite's online backup API (readers and
    the writer of the running server carry on meanwhile), as one file."""
    target.unlink(missing_ok=True)
    private(target)
    with closing(sqlite3.connect(source)) as live, closing(sqlite3.connect(target)) as copy:
        live.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        live.backup(copy)
        # A copy in rollback-journal mode: reading it leaves no -wal or -shm beside it (the
        # server puts it back in WAL mode when it opens it).
        copy.execute("PRAGMA journal_mode = DELETE")
    with open(target, "rb+") as handle:
        os.fsync(handle.fileno())


Table = tuple[list[str], list[tuple[Any, ...]]]
"""A table's column names and rows."""


def dump_tables(path: Path, tables: tuple[str, ...]) -> dict[str, Table]:
    """Every row of `tables` of an index file, read-only (`bucketd migrate`)."""
    dumped = {}
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        for table in tables:
            cursor = conn.execute(f"SELECT * FROM {table}")
            columns = [description[0] for description in cursor.description]
            dumped[table] = (columns, cursor.fetchall())
    return dumped


def stored_blob_ids(path: Path) -> set[str]:
    """The blobs kept as files that an index file (a backup snapshot) points at, read without
    opening it as a live index (no migrations, no writer)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return {row[0] for row in conn.execute(BLOB_FILES).fetchall()}


def as_unavailable(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        return IndexUnavailable(f"the index cannot be written: {exc}")
    return exc
