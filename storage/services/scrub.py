"""The deep scrub: every file's content hashed again and compared with the SHA-256 the index
holds (its content address on local disk), so bit rot, a truncated blob or an object
changed behind bucketd's back is found and named by bucket and key.

Run in full by `bucketd check --deep`; in the background, off unless `scrub.interval_seconds`
is set, throttled to `scrub.bytes_per_second`. A blob shared by several files (dedupe) is
read once and its verdict applied to each of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor

from storage.errors import BackendUnavailable, FileNotFound, StorageError
from storage.index import Index, maintenance
from storage.models import FileRecord
from storage.services.files import Files

logger = logging.getLogger("bucketd.scrub")
PAGE = 500


class Scrub:
    def __init__(self, index: Index, files: Files, executor: Executor) -> None:
        self._index = index
        self._files = files
        self._executor = executor
        self.found: Counter[str] = Counter()
        """Files found bad by the last complete pass, by kind: `corrupt`, `missing`."""
        self.passes = 0
        """Complete passes since the process started."""
        self.checked = 0
        """Files checked since the process started."""
        self._observers: list[Callable[[Scrub], None]] = []

    def observe(self, observer: Callable[[Scrub], None]) -> None:
        """Have `observer` called after each page of a pass and at its end."""
        self._observers.append(observer)

    async def run(self, bytes_per_second: float = 0.0) -> list[str]:
        """One pass over every stored version of every file; the problems, one line each
        (empty: all sound)."""
        problems: list[str] = []
        found: Counter[str] = Counter()
        verdicts: dict[str, str | None] = {}
        throttle = _Throttle(bytes_per_second)
        after: tuple[str, str, str] | None = None
        while True:
            page = await self._index.run(maintenance.files_after, after, PAGE)
            for bucket_name, record in page:
                if record.blob_id not in verdicts:
                    verdicts[record.blob_id] = await self._verdict(record, throttle)
                self.checked += 1
                problem = verdicts[record.blob_id]
                if problem is not None:
                    found[problem] += 1
                    problems.append(
                        f"bucket {bucket_name} ({record.bucket_id}): {record.key!r}: {problem} "
                        f"(blob {record.blob_id})"
                    )
            if len(page) < PAGE:
                self.found = found
                self.passes += 1
            for observer in self._observers:
                observer(self)
            if len(page) < PAGE:
                return problems
            last = page[-1][1]
            after = (last.bucket_id, last.key, last.s3_version_id)

    async def _verdict(self, record: FileRecord, throttle: _Throttle) -> str | None:
        """None when the content hashes to the record's SHA-256; else what is wrong."""
        digest = hashlib.sha256()
        size = 0
        loop = asyncio.get_running_loop()
        try:
            async for chunk in await self._files.open(record, 0, record.size):
                await loop.run_in_executor(self._executor, digest.update, chunk)
                size += len(chunk)
                await throttle.pace(len(chunk))
        except FileNotFound:
            return "missing"
        except BackendUnavailable as exc:
            if "shorter" in exc.message:
                return "corrupt"
            raise
        if size != record.size or digest.hexdigest() != record.sha256:
            return "corrupt"
        return None

    async def forever(self, interval: float, bytes_per_second: float) -> None:
        """Background passes, `interval` seconds apart, each throttled."""
        while True:
            await asyncio.sleep(interval)
            started = time.monotonic()
            try:
                problems = await self.run(bytes_per_second)
            except StorageError as exc:
                logger.warning("the scrub stopped: %s", exc)
                continue
            for problem in problems:
                logger.error("scrub: %s", problem)
            logger.info(
                "scrub pass: %d problems in %.1f s", len(problems), time.monotonic() - started
            )


class _Throttle:
    """Sleeps so reads average at most `rate` bytes a second (0: no limit)."""

    def __init__(self, rate: float) -> None:
        self._rate = rate
        self._started = time.monotonic()
        self._bytes = 0

    async def pace(self, size: int) -> None:
        if self._rate <= 0:
            return
        self._bytes += size
        ahead = self._bytes / self._rate - (time.monotonic() - self._started)
        if ahead > 0:
            await asyncio.sleep(ahead)
