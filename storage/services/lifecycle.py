"""The lifecycle worker: applies every bucket's lifecycle rules, once per cluster.

Each pass is a leased job (`index/leases.py`): with several gateways on one index, the one
holding the lease runs it and the others wait for the next pass. A pass walks each bucket's
versions in key order, newest first within a key, decides with `lifecycle_rules`, and
applies each decision as its own transaction, guarded so it never touches what changed
since it was judged: a current version is expired only while it is still current (by its
upload time and ETag), versions are removed by their own id, and a version under retention
or legal hold is never removed (the index refuses it, as it refuses any delete).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from storage.backends.commits import Commits
from storage.config import LifecycleSettings
from storage.errors import FileNotFound, ObjectLocked, PreconditionFailed, StorageError
from storage.index import Index, buckets, leases, uploads, version_listing
from storage.models import DeleteCondition, FileRecord
from storage.rules import lifecycle_rules as rules_of
from storage.rules.clock import Clock, iso_to_unix
from storage.rules.lifecycle_rules import Rule
from storage.rules.tags import decode_tags
from storage.services.uploads import MultipartUploads

logger = logging.getLogger("bucketd.lifecycle")
LEASE = "lifecycle"
PAGE = 1000


@dataclass
class Report:
    """What one pass did."""

    expired: int = 0
    """Current versions deleted (or hidden behind a delete marker)."""
    noncurrent: int = 0
    """Noncurrent versions and delete markers removed for good."""
    markers: int = 0
    """Delete markers left alone, removed."""
    aborted: int = 0
    """Incomplete multipart uploads aborted."""
    locked: int = 0
    """Versions a rule would have removed, kept by their retention or legal hold."""
    failed: int = 0
    """Buckets whose rules could not be applied (logged, skipped until the next pass)."""


class Lifecycle:
    def __init__(
        self,
        index: Index,
        commits: Commits,
        multipart: MultipartUploads,
        settings: LifecycleSettings,
        clock: Clock,
    ) -> None:
        self._index = index
        self._clock = clock
        self._commits = commits
        self._multipart = multipart
        self._settings = settings
        self.owner = uuid.uuid4().hex
        self.passes = 0
        self.failures = 0
        """Passes, and buckets (or whole passes) that failed, since the process started."""
        self._observers: list[Callable[[Lifecycle], None]] = []

    def observe(self, observer: Callable[[Lifecycle], None]) -> None:
        """Have `observer` called after each pass, failed or not."""
        self._observers.append(observer)

    async def release_previous_run(self) -> None:
        """Drop the lease: the process calling this is the only one on the index."""
        await self._index.run(leases.release_lease, LEASE, None)

    async def forever(self) -> None:
        """A pass every `interval_seconds`, when this gateway holds the lease."""
        interval = self._settings.interval_seconds
        while True:
            try:
                now = time.time()
                if await self._index.run(
                    leases.claim_lease, LEASE, self.owner, now, now + max(2 * interval, 30.0)
                ):
                    report = await self.run_pass()
                    if report != Report():
                        logger.info("lifecycle pass: %s", report)
            except StorageError as exc:
                self.failures += 1
                logger.warning("the lifecycle pass failed: %s", exc)
            except Exception:  # the worker serves every organization: it must go on
                self.failures += 1
                logger.exception("the lifecycle pass failed")
            for observer in self._observers:
                observer(self)
            await asyncio.sleep(interval)

    async def run_pass(self, now: float | None = None) -> Report:
        """Apply every bucket's rules as of `now` (default: the server's clock, which test
        mode moves; the lease's times stay on the system's, being durations)."""
        report = Report()
        for bucket_id, column in await self._index.run(buckets.lifecycle_buckets):
            try:
                rules = rules_of.decode_rules(column)
                if rules:
                    moment = self._clock.time() if now is None else now
                    await self._bucket(bucket_id, rules, moment, report)
            except Exception:  # one bucket's rules never stop the others'
                report.failed += 1
                self.failures += 1
                logger.exception("lifecycle: the rules of bucket %s failed", bucket_id)
        self.passes += 1
        return report

    async def _bucket(
        self, bucket_id: str, rules: tuple[Rule, ...], now: float, report: Report
    ) -> None:
        day = self._settings.day_seconds
        prefixes = sorted({rule.prefix for rule in rules if rule.enabled})
        for prefix in _outermost(prefixes):
            key_marker, version_marker = "", ""
            group: list[FileRecord] = []
            while True:
                page = await self._index.run(
                    version_listing.list_versions,
                    bucket_id,
                    prefix,
                    "",
                    key_marker,
                    version_marker,
                    PAGE,
                    False,
                )
                for record, latest in page.versions:
                    if latest or (group and group[0].key != record.key):
                        await self._key(bucket_id, group, rules, now, day, report)
                        group = []
                    group.append(record)
                if not page.truncated or page.next_key is None:
                    break
                key_marker, version_marker = page.next_key, page.next_version or ""
            await self._key(bucket_id, group, rules, now, day, report)
        for upload_id, key, created in await self._index.run(uploads.bucket_uploads, bucket_id):
            if rules_of.aborts_upload(rules, key, _after(created), now, day):
                await self._multipart.drop(upload_id)
                report.aborted += 1

    async def _key(
        self,
        bucket_id: str,
        group: list[FileRecord],
        rules: tuple[Rule, ...],
        now: float,
        day: float,
        report: Report,
    ) -> None:
        """Apply the rules to one key's versions, newest first (the first is current)."""
        if not group:
            return
        current = group[0]
        key = current.key
        kept = 0
        for newer, (position, record) in zip(group, enumerate(group[1:]), strict=False):
            size = None if record.delete_marker else record.size
            tags = None if record.delete_marker else decode_tags(record.tags)
            since = _after(newer.uploaded_at)
            if rules_of.expires_noncurrent(
                rules, key, size, since, position, now, day, tags
            ) and await self._remove(bucket_id, record, report):
                report.noncurrent += 1
            else:
                kept += 1
        if current.delete_marker:
            if (
                kept == 0
                and rules_of.removes_lone_marker(rules, key)
                and await self._remove(bucket_id, current, report)
            ):
                report.markers += 1
            return
        uploaded = _after(current.uploaded_at)
        tags = decode_tags(current.tags)
        if rules_of.expires_current(rules, key, current.size, uploaded, now, day, tags):
            try:
                await self._commits.delete(
                    bucket_id,
                    key,
                    condition=DeleteCondition(
                        if_match=current.etag, modified_at=iso_to_unix(current.uploaded_at)
                    ),
                    cause="LifecycleExpiration",
                )
                report.expired += 1
            except (FileNotFound, PreconditionFailed):
                pass

    async def _remove(self, bucket_id: str, record: FileRecord, report: Report) -> bool:
        try:
            await self._commits.remove_version(
                bucket_id,
                record.key,
                record.version_id,
                self._clock.time(),
                cause="LifecycleExpiration",
            )
        except ObjectLocked:
            report.locked += 1
            return False
        except FileNotFound:
            return False
        return True


def _after(stamp: str) -> float:
    """The end of the second a timestamp names: the index keeps times to the second, rounded
    down, and a day counted from the end of that second never ends early."""
    return iso_to_unix(stamp) + 1.0


def _outermost(prefixes: list[str]) -> list[str]:
    """The prefixes no other one contains (sorted input): each key is walked once."""
    kept: list[str] = []
    for prefix in prefixes:
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return kept
