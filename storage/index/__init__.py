"""The metadata index: every SQL statement of bucketd, written once for every database.

Each operation is a transaction script in the module of its area (`accounts`, `buckets`,
`files`, `versions`, `uploads`, `leases`, `reservations`, `maintenance`), declared `point`,
`read` or `write`; the engine runs it with `Index.run(script, *args)`. A driver does the I/O:
`sqlite.py` (the embedded default: one writer with group commit, readers on WAL) or
`postgres.py` (several gateways: a pool, row locks, retries, NOTIFY). Scripts speak in
records and domain errors, and each write is one transaction: counters change in the same
transaction as the rows they count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from ..config import EngineConfig
from ..faults import Faults
from . import (
    accounts,
    buckets,
    events,
    files,
    leases,
    maintenance,
    reservations,
    restores,
    snapshots,
    uploads,
    versions,
    webhooks,
)
from .buckets import BucketChanges
from .sql import KINDS, NoFiles, Reaper, Script

__all__ = [
    "BucketChanges",
    "Index",
    "NoFiles",
    "Reaper",
    "accounts",
    "buckets",
    "events",
    "files",
    "leases",
    "maintenance",
    "open_index",
    "reservations",
    "restores",
    "snapshots",
    "uploads",
    "versions",
    "webhooks",
]

T = TypeVar("T")
P = ParamSpec("P")


class Driver(Protocol):
    """Runs transaction scripts against one database."""

    async def point(self, script: Callable[P, Script[T]], *a: P.args, **k: P.kwargs) -> T: ...
    async def read(self, script: Callable[P, Script[T]], *a: P.args, **k: P.kwargs) -> T: ...
    async def write(self, script: Callable[P, Script[T]], *a: P.args, **k: P.kwargs) -> T: ...

    async def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call `callback` with the payload of every notification on `channel` committed by
        any process, until cancelled (returns at once where only this process notifies)."""

    def share_notes(self, publish: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """Hand this process's notifications (channel, payload) to `publish` too, where
        other processes would not see them; the function returned delivers theirs here."""

    def observe_writes(self, observe: Callable[[float], None]) -> None: ...
    async def close(self) -> None: ...


class Index:
    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self._runners: dict[str, Callable[..., Any]] = {
            "point": driver.point,
            "read": driver.read,
            "write": driver.write,
        }

    async def run(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a script the way it is declared (a point read, a read, or a transaction)."""
        result: T = await self._runners[KINDS[script]](script, *args, **kwargs)
        return result

    async def watch_revocations(self, forget: Callable[[str], None]) -> None:
        """Call `forget` with the id of every key revoked by any process, until cancelled."""
        await self.driver.listen(accounts.REVOCATIONS, forget)

    async def watch_events(self, wake: Callable[[str], None]) -> None:
        """Call `wake` with the organization of every commit with events, until cancelled."""
        await self.driver.listen(events.EVENTS, wake)

    def observe_writes(self, observe: Callable[[float], None]) -> None:
        """Have `observe` called with the seconds each write waited for its commit."""
        self.driver.observe_writes(observe)

    async def close(self) -> None:
        await self.driver.close()


async def open_index(config: EngineConfig, reaper: Reaper, faults: Faults) -> Index:
    """The SQLite index in the data dir (the default), PostgreSQL for several gateways, or
    one held in memory (tests: a clean state that costs nothing)."""
    driver: Driver
    if config.index.postgres:
        from .postgres import PostgresDriver

        driver = await PostgresDriver.open(config.index.url, reaper, faults, config.index.pool_size)
    elif config.index.in_memory:
        from .memory import MemoryDriver

        driver = MemoryDriver(reaper, faults)
    else:
        from .sqlite import SQLiteDriver

        path = config.index.sqlite_path(config.data_dir)
        driver = await SQLiteDriver.open(path, config.storage.fsync, reaper, faults)
    return Index(driver)
