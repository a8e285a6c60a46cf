"""The deep scrub: every file's content hashed again and compared with the SHA-256 the index
holds (its content address on local disk), so bit rot, a truncated blob or an object
changed behind bucketd's back is found and named by bucket and key.

Contents only snapshots hold are re-hashed too, after the buckets' (on the S3 backend a
snapshot's contents are copies of its own, in the snapshots' cluster bucket).

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
from dataclasses import replace

from storage import encryption
from storage.errors import BackendUnavailable, FileNotFound, NotSupported, StorageError
from storage.index import Index, maintenance
from storage.models import FileRecord
from storage.services.files import Files

logger = logging.getLogger("bucketd.scrub")
PAGE = 500


class Scrub:
    def __init__(
        self,
        index: Index,
        files: Files,
        executor: Executor,
        snapshots_location: str | None,
        contents: bool = True,
    ) -> None:
        self._index = index
        self._contents = contents
        """False on the null backend: no content was kept, so none can be checked."""
        self._snapshots_location = snapshots_location
        """Where the backend keeps snapshots' own contents (the S3 backend's copies)."""
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
        """One pass over every stored version of every file, then over the contents only
        snapshots hold; the problems, one line each (empty: all sound)."""
        if not self._contents:
            raise NotSupported("the null storage backend keeps no contents: nothing to scrub")
        found: Counter[str] = Counter()
        verdicts: dict[str, str | None] = {}
        throttle = _Throttle(bytes_per_second)
        problems = await self._buckets_pass(found, verdicts, throttle)
        problems += await self._snapshots_pass(found, verdicts, throttle)
        self.found = found
        self.passes += 1
        for observer in self._observers:
            observer(self)
        return problems

    async def _buckets_pass(
        self, found: Counter[str], verdicts: dict[str, str | None], throttle: _Throttle
    ) -> list[str]:
        problems: list[str] = []
        after: tuple[str, str, str] | None = None
        while True:
            page = await self._index.run(maintenance.files_after, after, PAGE)
            for bucket_name, record in page:
                problem = await self._check(record, found, verdicts, throttle)
                if problem is not None:
                    problems.append(
                        f"bucket {bucket_name} ({record.bucket_id}): {record.key!r}: {problem} "
                        f"(blob {record.blob_id})"
                    )
            if len(page) < PAGE:
                return problems
            for observer in self._observers:
                observer(self)
            last = page[-1][1]
            after = (last.bucket_id, last.key, last.s3_version_id)

    async def _snapshots_pass(
        self, found: Counter[str], verdicts: dict[str, str | None], throttle: _Throttle
    ) -> list[str]:
        """The versions snapshots name whose content no bucket version names (those were
        judged, and any problem named, by the buckets' pass): each content read once."""
        problems: list[str] = []
        judged = set(verdicts)
        after: tuple[str, str, str] | None = None
        while True:
            page = await self._index.run(maintenance.snapshot_files_after, after, PAGE)
            for snapshot_id, bucket_name, record in page:
                if record.blob_id in judged:
                    continue
                located = replace(record, location=self._snapshots_location)
                problem = await self._check(located, found, verdicts, throttle)
                if problem is not None:
                    problems.append(
                        f"snapshot {snapshot_id} of bucket {bucket_name} ({record.bucket_id}): "
                        f"{record.key!r}: {problem} (blob {record.blob_id})"
                    )
            if len(page) < PAGE:
                return problems
            for observer in self._observers:
                observer(self)
            snapshot_id, _, last = page[-1]
            after = (snapshot_id, last.key, last.s3_version_id)

    async def _check(
        self,
        record: FileRecord,
        found: Counter[str],
        verdicts: dict[str, str | None],
        throttle: _Throttle,
    ) -> str | None:
        """The record's problem (its content judged once per pass), counted in `found`."""
        if record.blob_id not in verdicts:
            verdicts[record.blob_id] = await self._verdict(record, throttle)
        self.checked += 1
        problem = verdicts[record.blob_id]
        if problem is not None:
            found[problem] += 1
        return problem

    async def _verdict(self, record: FileRecord, throttle: _Throttle) -> str | None:
        """None when the content hashes to the record's SHA-256; else what is wrong. An
        encrypted content is checked as stored (its packages, which its SHA-256 names):
        no key is needed, and each package's own tag is the decryption's business."""
        stored = encryption.stored_size(record)
        digest = hashlib.sha256()
        size = 0
        loop = asyncio.get_running_loop()
        try:
            async for chunk in await self._files.open_stored(record, 0, stored):
                await loop.run_in_executor(self._executor, digest.update, chunk)
                size += len(chunk)
                await throttle.pace(len(chunk))
        except FileNotFound:
            return "missing"
        except BackendUnavailable as exc:
            if "shorter" in exc.message:
                return "corrupt"
            raise
        if size != stored or digest.hexdigest() != record.sha256:
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
