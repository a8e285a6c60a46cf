"""Operators' work on the whole store: totals, garbage collection, the consistency check."""

from __future__ import annotations

from collections.abc import Callable

from storage.backends.commits import Commits
from storage.backends.protocol import GcReport
from storage.index import Index, maintenance
from storage.models import StorageStats
from storage.services.uploads import MultipartUploads


class Maintenance:
    def __init__(self, index: Index, commits: Commits, multipart: MultipartUploads) -> None:
        self._index = index
        self._commits = commits
        self._multipart = multipart

    async def stats(self) -> StorageStats:
        """Totals over every organization (operators' metrics, not scoped to an actor)."""
        return await self._index.run(maintenance.stats)

    def observe_index_writes(self, observe: Callable[[float], None]) -> None:
        self._index.observe_writes(observe)

    async def collect_garbage(self) -> GcReport:
        """Remove temp files, unreferenced blobs and parts of uploads nobody knows.
        Only while no upload is in flight."""
        await self._multipart.collect_garbage()
        referenced = await self._index.run(maintenance.blob_ids)
        return await self._commits.backend.collect_garbage(referenced)

    async def check_consistency(self) -> list[str]:
        """Counters against the rows they count, blob files against references, temp files.

        Exact only while no write is in flight (a stopped server, or a quiet one).
        """
        problems = await self._index.run(maintenance.check_consistency)
        problems += await self._commits.problems()
        orphans = await self._multipart.orphans()
        return problems + [f"multipart folder {name} belongs to no upload" for name in orphans]

    def leftovers(self) -> list[str]:
        """Temp files of interrupted writes: removed at the next start or by `gc`."""
        return self._commits.leftovers()
