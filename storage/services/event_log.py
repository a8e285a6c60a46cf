"""Reading the outbox: an organization's (or a bucket's) events after a point, and waiting
for the next ones, for the live stream. A commit with events wakes every waiter of this
process (and, over PostgreSQL, of every gateway) at once; a waiter also looks again after
its timeout, so a missed wake-up costs at most that."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from storage.index import Index
from storage.index import events as scripts
from storage.models import Actor
from storage.rules.events import Event
from storage.services.buckets import Buckets
from storage.tasks import Tasks


class EventLog:
    def __init__(self, index: Index, buckets: Buckets, tasks: Tasks) -> None:
        self._index = index
        self._buckets = buckets
        self._tasks = tasks
        self._waiters: dict[str | None, set[asyncio.Event]] = {}
        """By organization (None: woken by every organization's commits)."""
        self._listening = False
        self._followers: list[Callable[[str], None]] = []

    def _wake(self, org_id: str) -> None:
        for waiter in (*self._waiters.get(org_id, ()), *self._waiters.get(None, ())):
            waiter.set()
        for follow in self._followers:
            follow(org_id)

    def follow(self, callback: Callable[[str], None]) -> None:
        """Call `callback` with the organization of every commit with events (`listen`
        must be on)."""
        self._followers.append(callback)

    def listen(self) -> None:
        """Be woken by every commit with events (once per process)."""
        if not self._listening:
            self._listening = True
            self._tasks.spawn(self._index.watch_events(self._wake))

    async def after(
        self, actor: Actor, bucket_id: str | None, after: int, limit: int
    ) -> list[Event]:
        """Events after `after`, oldest first: of a bucket, or of the organization (a key
        restricted to one bucket sees that bucket's only)."""
        if bucket_id is not None:
            await self._buckets.get(actor, bucket_id)
        else:
            bucket_id = actor.bucket_id
        return await self._index.run(scripts.events_after, actor.org_id, bucket_id, after, limit)

    async def seq_after(self, org_id: str, number: int) -> int:
        """Where to read an organization's events from to resume after its event `number`
        (the number its id shows)."""
        return await self._index.run(scripts.seq_after_number, org_id, number)

    async def latest(self) -> int:
        """The newest event's seq (0 when there is none): where "from now on" starts."""
        return await self._index.run(scripts.last_seq)

    async def wait(self, timeout: float, org_id: str | None = None) -> None:
        """Until the next commit with events (of `org_id`'s, when given), or `timeout`
        seconds."""
        waiter = asyncio.Event()
        waiting = self._waiters.setdefault(org_id, set())
        waiting.add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), timeout)
        finally:
            waiting.discard(waiter)
            if not waiting:
                self._waiters.pop(org_id, None)
