"""Provisioning buckets as leased jobs: exactly one gateway works on each bucket.

Creating a bucket claims its job at once; the claim is a lease in the index, so a job whose
gateway died (or a previous run's) is taken over once the lease runs out.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from storage.backends.protocol import Backend
from storage.config import EngineConfig
from storage.errors import StorageError
from storage.index import Index, buckets
from storage.models import Bucket
from storage.rules.clock import iso_to_unix
from storage.tasks import Tasks

logger = logging.getLogger("bucketd.engine")
POLL_SECONDS = 1.0


class Provisioning:
    def __init__(self, index: Index, backend: Backend, config: EngineConfig, tasks: Tasks) -> None:
        self._index = index
        self._backend = backend
        self._config = config
        self._tasks = tasks
        self.gateway_id = uuid.uuid4().hex
        """Names this process in the leases it holds."""

    async def claim(self, bucket_id: str | None = None) -> bool:
        """Claim a bucket to provision (that one, or any whose lease ran out) and start on
        it; False when there was none to claim."""
        now = time.time()
        delay_setting = self._config.provisioning_delay_seconds
        until = now + delay_setting + self._config.provisioning_lease_seconds
        bucket = await self._index.run(
            buckets.claim_provisioning, self.gateway_id, now, until, bucket_id, self._config.uploads
        )
        if bucket is None:
            return False
        # The bucket just made here waits the whole delay; one taken over waits what is
        # left of it (creation times are whole seconds: that rest is at most a second long).
        made_here = bucket_id is not None
        delay = (
            delay_setting if made_here else delay_setting - (now - iso_to_unix(bucket.created_at))
        )
        delay = max(0.0, delay)
        self._tasks.spawn(self._provision(bucket, delay))
        return True

    async def provision_now(self, bucket_id: str) -> None:
        """Provision the bucket before returning, with no delay (buckets made at start-up
        must be active before the server says it is ready)."""
        now = time.time()
        until = now + self._config.provisioning_lease_seconds
        bucket = await self._index.run(
            buckets.claim_provisioning, self.gateway_id, now, until, bucket_id, self._config.uploads
        )
        if bucket is not None:
            await self._provision(bucket, 0.0)

    async def _provision(self, bucket: Bucket, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            await self._backend.provision_bucket(bucket)
        except Exception as exc:
            logger.warning("provisioning bucket %s failed: %s", bucket.id, exc)
            reason = str(exc) or type(exc).__name__
            await self._index.run(buckets.set_bucket_status, bucket.id, "failed", reason)
            return
        await self._index.run(buckets.set_bucket_status, bucket.id, "active", None)

    async def release_previous_run(self) -> None:
        """Drop every claim: the process calling this is the only one on the index."""
        await self._index.run(buckets.release_claims)

    async def run(self) -> None:
        """Take over provisioning that no live gateway holds: a previous run's (released by
        `release_previous_run`), or, on a shared index (polled each second), that of a
        gateway or worker that died."""
        if not self._config.shared:
            while await self.claim():
                pass
            return
        while True:
            try:
                while await self.claim():
                    pass
            except StorageError as exc:
                logger.warning("claiming buckets to provision failed: %s", exc)
            await asyncio.sleep(POLL_SECONDS)
