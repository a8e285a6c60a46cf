"""The PostgreSQL driver (asyncpg), for several gateways over one database.

Scripts are the SQLite driver's; what differs is concurrency: PostgreSQL has many writers.
Row locks asked for by a script become `FOR UPDATE` (`SKIP LOCKED`), a statement that may
hit a unique constraint runs in a savepoint of its own, and a transaction PostgreSQL aborts
as a deadlock or a serialization failure is run again from the start.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import asyncpg

from ..errors import IndexUnavailable
from ..faults import Faults
from .maintenance import reapable, with_files
from .migrations import pending
from .sql import Duplicate, Effects, Query, Reaper, Script, take_effect

T = TypeVar("T")
P = ParamSpec("P")
Conn = Any
"""An asyncpg connection (asyncpg ships no type hints)."""

RETRIES = 5
LISTEN_RETRY_SECONDS = 1.0
MIGRATION_LOCK = 0x6275636B  # "buck": one gateway migrates at a time
_PLACEHOLDER = re.compile(r"\?")
_LOCKS = {"": "", "update": " FOR UPDATE", "skip": " FOR UPDATE SKIP LOCKED"}
_DOWN = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError)
_RETRY = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


@functools.lru_cache(maxsize=1024)
def dialect(sql: str, lock: str = "") -> str:
    """A script's SQL in PostgreSQL's: `$1, $2, ...` placeholders and the row lock."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql) + _LOCKS[lock]


def _unavailable(exc: BaseException) -> IndexUnavailable:
    return IndexUnavailable(f"the PostgreSQL index is unavailable: {exc}")


async def _execute(conn: Conn, query: Query) -> Any:
    sql = dialect(query.sql, query.lock)
    if query.fetch == "one":
        row = await conn.fetchrow(sql, *query.args)
        return None if row is None else tuple(row)
    if query.fetch == "all":
        return [tuple(row) for row in await conn.fetch(sql, *query.args)]
    if query.fetch == "value":
        return await conn.fetchval(sql, *query.args)
    if query.fetch == "lock":
        await conn.execute(sql, *query.args)
        return True  # other gateways may have committed while this waited for the lock
    status: str = await conn.execute(sql, *query.args)
    return int(status.rsplit(" ", 1)[-1])


async def drive(conn: Conn, script: Script[T], faults: Faults, effects: Effects | None = None) -> T:
    """Run a script to its end on `conn` (in whatever transaction the caller holds)."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = script.throw(error) if error is not None else script.send(answer)
        except StopIteration as done:
            for note in effects.notes if effects else ():  # delivered when it commits
                await conn.execute("SELECT pg_notify($1, $2)", note.channel, note.payload)
            result: T = done.value
            return result
        answer, error = None, None
        if type(op) is not Query:
            take_effect(op, faults, effects)
        elif not op.unique:
            answer = await _execute(conn, op)
        else:
            try:
                async with conn.transaction():
                    answer = await _execute(conn, op)
            except asyncpg.UniqueViolationError as exc:
                error = Duplicate(str(exc))


async def _migrate(conn: Conn) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        applied = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
        for version, script in pending("postgres", applied):
            await conn.execute(script)
            await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)


class PostgresDriver:
    def __init__(self, pool: Any, url: str, reaper: Reaper, faults: Faults) -> None:
        self._pool = pool
        self._url = url
        self._reaper = reaper
        self._faults = faults
        self._observe: Callable[[float], None] | None = None
        self._listeners: dict[str, list[Callable[[str], None]]] = {}

    @classmethod
    async def open(
        cls, url: str, reaper: Reaper, faults: Faults, pool_size: int = 10
    ) -> PostgresDriver:
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=pool_size, timeout=10)
        except (TimeoutError, *_DOWN) as exc:
            raise _unavailable(exc) from exc
        try:
            async with pool.acquire() as conn:
                await _migrate(conn)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, url, reaper, faults)

    async def close(self) -> None:
        await self._pool.close()

    def observe_writes(self, observe: Callable[[float], None]) -> None:
        self._observe = observe

    def share_notes(self, publish: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """NOTIFY reaches every process already: nothing to hand on."""
        return lambda channel, payload: None

    async def _with_connection(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        try:
            async with self._pool.acquire() as conn:
                return await work(conn)
        except _DOWN as exc:
            raise _unavailable(exc) from exc

    async def read(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._with_connection(
            lambda conn: drive(conn, script(*args, **kwargs), self._faults)
        )

    point = read

    async def write(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """One transaction, run again if PostgreSQL aborts it as a deadlock; then the blobs
        it released are handed to the reaper."""
        started = time.perf_counter()
        for attempt in range(RETRIES):
            effects = Effects()
            try:
                async with self._pool.acquire() as conn:
                    async with conn.transaction():
                        result = await drive(conn, script(*args, **kwargs), self._faults, effects)
                    with self._reaper.claim(with_files(effects.released)) as claim:
                        claim.reap(await drive(conn, reapable(claim.blob_ids), self._faults))
                for note in effects.notes:  # this process at once; the others by LISTEN
                    for callback in self._listeners.get(note.channel, ()):
                        callback(note.payload)
                break
            except _RETRY:
                if attempt == RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
            except _DOWN as exc:
                raise _unavailable(exc) from exc
        if self._observe is not None:
            self._observe(time.perf_counter() - started)
        return result

    async def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """LISTEN on a connection of its own (delivered when the notifying transaction
        commits, whichever gateway made it), until cancelled; reconnect after losing it.
        This process's own notifications reach `callback` as soon as they commit. One
        connection serves every callback of a channel: a second `listen` returns at once."""
        callbacks = self._listeners.setdefault(channel, [])
        callbacks.append(callback)
        if len(callbacks) > 1:
            return

        def deliver(*args: Any) -> None:
            for each in callbacks:
                each(args[-1])

        while True:
            try:
                conn = await asyncpg.connect(self._url)
            except (TimeoutError, *_DOWN):
                await asyncio.sleep(LISTEN_RETRY_SECONDS)
                continue
            try:
                await conn.add_listener(channel, deliver)
                while not conn.is_closed():
                    await asyncio.sleep(LISTEN_RETRY_SECONDS)
                    await conn.execute("SELECT 1")
            except _DOWN:
                pass
            finally:
                await conn.close()

    async def load(self, tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]) -> None:
        """Copy whole tables in, in one transaction, into an index that holds nothing yet
        (`bucketd migrate`)."""

        async def copy(conn: Conn) -> None:
            async with conn.transaction():
                if await conn.fetchval("SELECT COUNT(*) FROM organizations"):
                    raise IndexUnavailable("the target index is not empty; migrate into a new one")
                for table, (columns, rows) in tables.items():
                    await conn.copy_records_to_table(table, records=rows, columns=columns)

        await self._with_connection(copy)
