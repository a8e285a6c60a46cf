"""The storage engine: the one object the gateway talks to, a facade over one service per
area. Each service is built from the index and the backend and imports no other layer.

| attribute | service | what it owns |
|---|---|---|
| `orgs` | `organizations.Organizations` | organizations and their plans |
| `keys` | `keys.Keys` | API keys and S3 credentials |
| `buckets` | `buckets.Buckets` | buckets; `provisioning.Provisioning` makes them |
| `files` | `files.Files` | uploads against the limits, reads, lists, copies, renames |
| `multipart` | `uploads.MultipartUploads` | the S3 protocol's multipart uploads |
| `maintenance` | `maintenance.Maintenance` | totals, garbage collection, checks |
| `scrub` | `scrub.Scrub` | every content re-hashed against its SHA-256 |
| `lifecycle` | `lifecycle.Lifecycle` | buckets' lifecycle rules, applied once per cluster |
| `events` | `event_log.EventLog` | the outbox read back: events after a point, waiting for more |
| `webhooks` | `webhooks.Webhooks` | webhooks and the state of their deliveries |
| `snapshots` | `snapshots.Snapshots` | snapshots of buckets and of the server, restores, forks |

Every call that touches tenant data takes the `Actor` it acts for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from storage.backends.commits import BlobCommits, Commits
from storage.backends.local.blobs import LocalBackend
from storage.backends.local.parts import DiskParts, PartStore
from storage.backends.null import NullBackend, NullCommits, claim_data_dir, refuse_null_data_dir
from storage.backends.s3.commits import ObjectCommits
from storage.rules.access import Access
from storage.rules.clock import Clock
from storage.services.buckets import Buckets
from storage.services.event_log import EventLog
from storage.services.files import Files
from storage.services.keys import Keys
from storage.services.lifecycle import Lifecycle
from storage.services.maintenance import Maintenance
from storage.services.organizations import Organizations
from storage.services.provisioning import Provisioning
from storage.services.scrub import Scrub
from storage.services.snapshots import Snapshots
from storage.services.uploads import MultipartUploads
from storage.services.webhooks import Webhooks

from .config import EngineConfig, PlanTable
from .encryption import MasterKeys
from .errors import BackendUnavailable, InvalidInput, StorageError
from .faults import Faults
from .index import Index, NoFiles, open_index
from .tasks import Tasks

logger = logging.getLogger("bucketd.engine")
JANITOR_GRACE_SECONDS = 60.0
REAP_RETRY_SECONDS = 1.0
"""How soon a reap that met another process's hold on the blob is tried again."""


async def _open_storage(
    config: EngineConfig, executor: ThreadPoolExecutor, faults: Faults, tasks: Tasks, clock: Clock
) -> tuple[Index, Commits, PartStore]:
    """The index and the backend, joined by the commit strategy of the backend's kind, and
    where multipart parts wait (the data dir; the cluster, so any gateway takes any part)."""
    if config.storage.backend == "null":
        claim_data_dir(config)
        nothing = NullBackend(executor)
        index = await open_index(config, nothing, faults)
        discarding = NullCommits(index, nothing, faults, 0, clock)
        return index, discarding, DiskParts(config.data_dir, config.storage.fsync, executor, faults)
    refuse_null_data_dir(config.data_dir)
    if config.storage.backend == "local":
        blobs = LocalBackend(config.data_dir, config.storage.fsync, executor, faults)
        index = await open_index(config, blobs, faults)
        commits = BlobCommits(index, blobs, faults, config.storage.inline_max_bytes, clock)
        return index, commits, DiskParts(config.data_dir, config.storage.fsync, executor, faults)
    if config.storage.backend == "s3":
        from storage.backends.s3.parts import (
            ClusterParts,  # aiobotocore is heavy: loaded for s3 only
        )
        from storage.backends.s3.store import S3Backend

        objects = await S3Backend.open(config.storage.s3, executor, faults)
        try:
            index = await open_index(config, NoFiles(), faults)
        except BaseException:
            await objects.close()
            raise
        lease = config.storage.s3.write_lease_seconds
        on_cluster = ObjectCommits(index, objects, faults, tasks, clock, lease)
        return index, on_cluster, ClusterParts(objects, executor)
    raise InvalidInput(f"unknown storage backend {config.storage.backend!r}")


def master_keys(config: EngineConfig) -> MasterKeys | None:
    """The configured master keys (`storage.master_key`), or None when there are none."""
    if not config.storage.master_key:
        return None
    try:
        return MasterKeys.load(config.storage.master_key, config.storage.previous_master_keys)
    except (ValueError, OSError) as exc:
        raise InvalidInput(f"storage.master_key / previous_master_keys: {exc}") from None


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        index: Index,
        commits: Commits,
        executor: ThreadPoolExecutor,
        faults: Faults,
        tasks: Tasks,
        parts: PartStore,
        clock: Clock,
    ) -> None:
        self.config = config
        self.clock = clock
        self.faults = faults
        """The test-only fault points (`faults.py`): the configured ones, or an in-process
        test's (`Faults.arm`)."""
        self._index = index
        self._commits = commits
        self._executor = executor
        self._tasks = tasks
        backend = commits.backend
        self.plans = PlanTable(config.plans)
        self.orgs = Organizations(index, config, self.plans, clock)
        self.provisioning = Provisioning(index, backend, config, tasks)
        self.buckets = Buckets(index, backend, config, self.orgs, self.provisioning, commits, clock)
        self.keys = Keys(index, config, self.orgs, self.buckets, tasks, clock)
        self.files = Files(
            *(index, config, self.orgs, self.buckets, commits, executor, faults, clock),
            master_keys(config),
        )
        self.access = Access(self.files)
        self.multipart = MultipartUploads(index, self.buckets, self.files, parts)
        self.maintenance = Maintenance(index, commits, self.multipart)
        on_cluster = commits.backend if isinstance(commits, ObjectCommits) else None
        snapshots_location = None if on_cluster is None else on_cluster.snapshots_location
        contents = config.storage.backend != "null"
        self.scrub = Scrub(index, self.files, executor, snapshots_location, contents)
        self.lifecycle = Lifecycle(index, commits, self.multipart, config.lifecycle, self.clock)
        self.events = EventLog(index, self.buckets, tasks)
        self.webhooks = Webhooks(index, config, self.buckets, clock)
        self.snapshots = Snapshots(
            index,
            commits,
            config,
            self.orgs,
            self.buckets,
            self.multipart,
            clock,
            snapshots_location,
        )

    @classmethod
    async def open(
        cls, config: EngineConfig, *, collect_garbage: bool = True, clock: Clock | None = None
    ) -> Engine:
        """Open the index and backend; clean leftovers of a crash. `clock`: the server's,
        shared by its workers (`storage.rules.clock`); else one of this engine's own."""
        executor = ThreadPoolExecutor(config.storage.io_threads, thread_name_prefix="bucketd-io")
        faults = Faults(config.faults)
        faults.hit("engine.open")  # a start-up that takes its time, for the signal tests
        tasks = Tasks()
        clock = clock or Clock()
        index, commits, parts = await _open_storage(config, executor, faults, tasks, clock)
        try:
            engine = cls(config, index, commits, executor, faults, tasks, parts, clock)
        except BaseException:  # a bad setting (a missing master key file): let go of what is open
            await index.close()
            await commits.backend.close()
            executor.shutdown(wait=True)
            raise
        if collect_garbage:
            try:
                report = await engine.maintenance.collect_garbage()
            except BackendUnavailable as exc:  # the janitor tries again
                logger.warning("start-up clean-up skipped: %s", exc)
                return engine
            except BaseException:
                await engine.close()
                raise
            if report.temp_files or report.blobs:
                logger.info(
                    "start-up clean-up removed %d temp files and %d unreferenced blobs",
                    report.temp_files,
                    report.blobs,
                )
        return engine

    async def release_previous_run(self) -> None:
        """Take back what a previous run left claimed (provisioning, the lifecycle lease) and
        settle its interrupted writes: for a process alone on the index, at start-up."""
        await self.provisioning.release_previous_run()
        await self.lifecycle.release_previous_run()
        await self._commits.heal(time.time())

    async def check_ready(self) -> None:
        """Raise IndexUnavailable or BackendUnavailable unless both answer now."""
        await self.orgs.count()
        await self._commits.backend.check()

    def start_background(self, jobs: bool = True) -> None:
        """Listen for commits with events and retry reaps that met another process's hold;
        with `jobs`, also provision buckets no live gateway is working on, settle
        interrupted writes, scrub and apply lifecycle rules (one worker of a data dir
        runs them; every gateway of a cluster does, under leases)."""
        self.events.listen()
        self._tasks.spawn(self._retry_reaps())
        if not jobs:
            return
        self._tasks.spawn(self._start_jobs())

    async def _start_jobs(self) -> None:
        if not self.config.shared:
            await self.release_previous_run()
        self._tasks.spawn(self.provisioning.run())
        self._tasks.spawn(self._janitor())
        scrub = self.config.scrub
        if scrub.interval_seconds > 0 and self.config.storage.backend != "null":
            self._tasks.spawn(self.scrub.forever(scrub.interval_seconds, scrub.bytes_per_second))
        if self.config.lifecycle.interval_seconds > 0:
            self._tasks.spawn(self.lifecycle.forever())

    async def _retry_reaps(self) -> None:
        while True:
            await asyncio.sleep(REAP_RETRY_SECONDS)
            try:
                await self._commits.retry_reaps()
            except StorageError as exc:
                logger.warning("reaping blobs another process held failed: %s", exc)

    async def _janitor(self) -> None:
        """Every pass settles interrupted writes past any deadline (a previous run's were
        settled at start-up), expires abandoned multipart uploads and removes part folders
        no upload owns (a bucket deleted with its uploads, another gateway's abort)."""
        uploads = self.config.uploads
        grace = uploads.deadline_seconds + JANITOR_GRACE_SECONDS
        while True:
            cutoff = time.time() - grace
            try:
                await self._commits.heal(cutoff)
                expired = await self.multipart.expire(uploads.multipart_expiry_seconds)
                if expired:
                    logger.info("expired %d abandoned multipart uploads", expired)
                await self.multipart.collect_garbage(temp_files=False)
            except StorageError as exc:
                logger.warning("cleaning up interrupted and abandoned uploads failed: %s", exc)
            except Exception:  # a bug met by one pass must not end the passes after it
                logger.exception("cleaning up interrupted and abandoned uploads failed")
            await asyncio.sleep(uploads.cleanup_interval_seconds)

    def share_notes(self, publish: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """Hand this process's commit notifications (channel, payload) to `publish` as well,
        for the other processes on the index; the function returned takes theirs."""
        return self._index.driver.share_notes(publish)

    async def close(self) -> None:
        await self._tasks.cancel_all()
        await self._index.close()
        await self._commits.backend.close()
        self._executor.shutdown(wait=True)
