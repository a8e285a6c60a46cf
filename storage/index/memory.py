"""The index held in memory (`index.url = "sqlite://:memory:"`): one SQLite connection to a
private in-memory database, every transaction script run to its end on the event loop's
thread, one at a time, so none interleaves with another. The same scripts, migrations and
effects as `sqlite.py`; nothing of it outlives the process. What it is for: a clean state
per test that costs no file, no thread and no server (tests/support/engines.py)."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from ..faults import Faults
from .maintenance import reapable, with_files
from .sql import Effects, Reaper, Script
from .sqlite import as_unavailable, drive, migrate

logger = logging.getLogger("bucketd.index")
P = ParamSpec("P")
T = TypeVar("T")


class MemoryDriver:
    def __init__(self, reaper: Reaper, faults: Faults) -> None:
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA foreign_keys = OFF")
        migrate(self._conn)
        self._reaper = reaper
        self._faults = faults
        self._listeners: dict[str, list[Callable[[str], None]]] = {}
        self._publish: Callable[[str, str], None] | None = None
        self._observe: Callable[[float], None] | None = None

    async def point(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        return drive(self._conn, script(*args, **kwargs), self._faults)

    async def read(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        return drive(self._conn, script(*args, **kwargs), self._faults)

    async def write(self, script: Callable[P, Script[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        started = time.perf_counter()
        effects = Effects()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = drive(self._conn, script(*args, **kwargs), self._faults, effects)
            self._conn.execute("COMMIT")
        except BaseException as exc:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            converted = as_unavailable(exc)
            if converted is exc:
                raise
            raise converted from exc
        finally:
            if self._observe is not None:
                self._observe(time.perf_counter() - started)
        self._reap(effects)
        for note in effects.notes:
            for callback in self._listeners.get(note.channel, ()):
                callback(note.payload)
            if self._publish is not None:
                self._publish(note.channel, note.payload)
        return result

    def _reap(self, effects: Effects) -> None:
        released = with_files(effects.released)
        if not released:
            return
        try:
            with self._reaper.claim(released) as claim:
                claim.reap(drive(self._conn, reapable(claim.blob_ids), self._faults))
        except Exception:  # committed already; leftovers are collected at start-up
            logger.exception("releasing unreferenced blobs failed")

    async def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        self._listeners.setdefault(channel, []).append(callback)

    def share_notes(self, publish: Callable[[str, str], None]) -> Callable[[str, str], None]:
        self._publish = publish

        def deliver(channel: str, payload: str) -> None:
            for callback in self._listeners.get(channel, ()):
                callback(payload)

        return deliver

    def observe_writes(self, observe: Callable[[float], None]) -> None:
        self._observe = observe

    async def close(self) -> None:
        self._conn.close()
