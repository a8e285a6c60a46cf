"""Webhook delivery: the one gateway holding the cluster's lease hands new events to the
webhooks that want them and posts each, signed, at least once and in order per key;
failures are retried with exponential backoff and jitter, then parked as failed.

The signature is Stripe's scheme: `Bucketd-Signature: t=<unix time>,v1=<hex
HMAC-SHA256(secret, "<t>.<body>")>`; a receiver recomputes it and refuses old timestamps
(docs/api.md has the code). Every address the URL's host resolves to must be allowed
(`storage/webhooks.address_allowed`), checked by the resolver the connection uses
(`posting.py`), or the delivery is parked at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from gateway.delivery.targets import Refused, check_literal
from storage.config import EventSettings
from storage.engine import Engine
from storage.errors import SecretUnsealable
from storage.rules.events import Event, message
from storage.services.webhooks import Attempt, Delivery, Webhook

logger = logging.getLogger("bucketd.webhooks")
LEASE_SECONDS = 10.0
IDLE_SECONDS = 0.5
"""How long a deliverer with enabled webhooks waits for new events (a commit wakes it
sooner) and retries coming due; the least time between two passes of one without."""
PRUNE_SECONDS = 60.0
USER_AGENT = "bucketd-webhooks/1"

Settled = list[tuple[str, float | None]]
"""A settled batch's attempts: each one's outcome (delivered, pending, failed) and, when
delivered, its lag in seconds from the event's commit."""
Wait = Callable[[float], Awaitable[None]]
"""Until the next commit with events, or that many seconds."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


class Deliverer:
    def __init__(
        self,
        engine: Engine,
        settings: EventSettings,
        record: Callable[[Settled], None],
        wait: Wait,
    ) -> None:
        self._engine = engine
        self._settings = settings
        self._record = record
        self._wait = wait
        self.owner = uuid.uuid4().hex

    async def forever(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            client: Any = None
            renew_at, held, pruned_at = 0.0, False, 0.0
            await self._engine.webhooks.reclaim()
            while True:
                try:
                    now = time.monotonic()
                    if now >= renew_at:
                        held = await self._engine.webhooks.claim(self.owner, LEASE_SECONDS)
                        renew_at = now + LEASE_SECONDS / 3
                    if not held:
                        await asyncio.sleep(LEASE_SECONDS / 3)
                        continue
                    if now >= pruned_at + PRUNE_SECONDS:
                        pruned_at = now
                        await self._engine.webhooks.prune()
                    enabled = await self._engine.webhooks.hand_out()
                    due = await self._engine.webhooks.due(self._settings.concurrency * 4)
                    if due:
                        if client is None:
                            from gateway.delivery import posting as delivery_http

                            client = await stack.enter_async_context(
                                delivery_http.session(self._settings)
                            )
                        await self._deliver_all(client, due)
                    elif enabled:  # woken by the next commit with events
                        await self._wait(IDLE_SECONDS)
                    else:
                        await self._idle(now, renew_at)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("webhook delivery pass failed; trying again")
                    await asyncio.sleep(1.0)

    async def _idle(self, passed_at: float, renew_at: float) -> None:
        """With no webhook enabled, wait for what can give the next pass work: a commit with
        events (a new webhook's first delivery is of an event committed after it; one
        enabled again skips what was written while it was off), the earliest pending
        delivery (a disabled webhook's retries) coming due, or the lease's renewal; then no
        sooner than `IDLE_SECONDS` after the last pass, so a stream of commits costs no more
        passes than polling every `IDLE_SECONDS` did. An idle gateway used to make those two
        queries twice a second in its delivery process, for nothing."""
        timeout = renew_at - time.monotonic()
        due_at = await self._engine.webhooks.next_due()
        if due_at is not None:
            timeout = min(timeout, due_at - time.time())
        if timeout > 0:
            await self._wait(timeout)
        await asyncio.sleep(max(0.0, passed_at + IDLE_SECONDS - time.monotonic()))

    async def _deliver_all(self, client: Any, due: list[tuple[Webhook, Delivery, Event]]) -> None:
        gate = asyncio.Semaphore(self._settings.concurrency)

        async def one(webhook: Webhook, delivery: Delivery, event: Event) -> Attempt:
            async with gate:
                return await self._deliver(client, webhook, delivery, event)

        attempts = await asyncio.gather(*(one(*item) for item in due))
        await self._engine.webhooks.settle(list(attempts))
        now = time.time()
        self._record(
            [
                (
                    attempt.status,
                    max(0.0, now - event_created(event)) if attempt.status == "delivered" else None,
                )
                for attempt, (_, _, event) in zip(attempts, due, strict=True)
            ]
        )

    async def _deliver(
        self, client: Any, webhook: Webhook, delivery: Delivery, event: Event
    ) -> Attempt:
        from gateway.delivery.posting import Unreachable, post

        try:
            secret = self._engine.webhooks.secret_of(webhook)
        except SecretUnsealable:
            unsealable = "this gateway cannot unseal the webhook's secret: its secrets.key differs"
            logger.error("%s (webhook %s)", unsealable, webhook.id)
            return self._engine.webhooks.attempt(delivery, None, unsealable)
        body = json.dumps(message(event, webhook.id), separators=(",", ":")).encode()
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Bucketd-Event-Id": event.event_id,
            "Bucketd-Organization-Id": event.org_id,
            "Bucketd-Event-Name": event.name,
            "Bucketd-Webhook-Id": webhook.id,
            "Bucketd-Signature": signature(secret, timestamp, body),
        }
        status: int | None = None
        error: str | None = None
        permanent = False
        try:
            check_literal(webhook.url, self._settings.allowed_hosts)
            status = await post(client, webhook.url, body, headers)
            if not 200 <= status < 300:
                error = f"the receiver answered {status}"
        except Refused as exc:
            error, permanent = str(exc), True
        except Unreachable as exc:
            error, permanent = str(exc), exc.permanent
        return self._engine.webhooks.attempt(delivery, status, error, permanent)


def event_created(event: Event) -> float:
    """When the event was written (its `at`, to the millisecond)."""
    return datetime.fromisoformat(event.at.replace("Z", "+00:00")).timestamp()
