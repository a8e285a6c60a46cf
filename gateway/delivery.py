"""Webhook delivery: the one gateway holding the cluster's lease hands new events to the
webhooks that want them and posts each, signed, at least once and in order per key;
failures are retried with exponential backoff and jitter, then parked as failed.

The signature is Stripe's scheme: `Bucketd-Signature: t=<unix time>,v1=<hex
HMAC-SHA256(secret, "<t>.<body>")>`; a receiver recomputes it and refuses old timestamps
(docs/api.md has the code). Every address the URL's host resolves to must be allowed
(`storage/webhooks.address_allowed`), or the delivery is parked at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import socket
import time
import uuid
from datetime import datetime
from urllib.parse import urlsplit

import aiohttp

from storage.config import EventSettings
from storage.engine import Engine
from storage.events import Event, message
from storage.index.webhooks import Attempt, Delivery, Webhook
from storage.webhooks import address_allowed

from .metrics import Metrics

logger = logging.getLogger("bucketd.webhooks")
LEASE_SECONDS = 10.0
IDLE_SECONDS = 0.5
"""How long an idle deliverer waits for new events (a commit wakes it sooner) and retries
coming due."""
PRUNE_SECONDS = 60.0
USER_AGENT = "bucketd-webhooks/1"
RESOLVED_SECONDS = 30.0


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


class Refused(Exception):
    """The URL's host resolves to an address no webhook may reach."""


class Unreachable(Exception):
    """The URL's host does not resolve."""


async def check_host(url: str, allowed: list[str], cache: dict[str, float] | None = None) -> None:
    """Refused unless the URL's host is listed or every address it resolves to may be
    reached (a name that resolves to loopback is refused like the address itself). A host
    found fine is not looked up again for `RESOLVED_SECONDS` (in `cache`)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host in allowed or (cache is not None and cache.get(host, 0.0) > time.monotonic()):
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise Unreachable(f"cannot resolve {host}: {exc}") from None
    for _, _, _, _, address in found:
        if not address_allowed(str(address[0]), allowed):
            raise Refused(f"{host} resolves to {address[0]}, which webhooks may not reach")
    if cache is not None:
        cache[host] = time.monotonic() + RESOLVED_SECONDS


class Deliverer:
    def __init__(self, engine: Engine, settings: EventSettings, metrics: Metrics) -> None:
        self._engine = engine
        self._settings = settings
        self._metrics = metrics
        self.owner = uuid.uuid4().hex
        self._resolved: dict[str, float] = {}

    async def forever(self) -> None:
        connector = aiohttp.TCPConnector(limit=self._settings.concurrency * 2)
        timeout = aiohttp.ClientTimeout(total=self._settings.timeout_seconds)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
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
                        await self._deliver_all(client, due)
                    elif enabled:  # woken by the next commit with events
                        await self._engine.events.wait(IDLE_SECONDS)
                    else:  # no webhook: commits are none of its business
                        await asyncio.sleep(IDLE_SECONDS)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("webhook delivery pass failed; trying again")
                    await asyncio.sleep(1.0)

    async def _deliver_all(
        self, client: aiohttp.ClientSession, due: list[tuple[Webhook, Delivery, Event]]
    ) -> None:
        gate = asyncio.Semaphore(self._settings.concurrency)

        async def one(webhook: Webhook, delivery: Delivery, event: Event) -> Attempt:
            async with gate:
                return await self._deliver(client, webhook, delivery, event)

        attempts = await asyncio.gather(*(one(*item) for item in due))
        await self._engine.webhooks.settle(list(attempts))
        now = time.time()
        for attempt, (_, _, event) in zip(attempts, due, strict=True):
            self._metrics.deliveries.labels(attempt.status).inc()
            if attempt.status == "delivered":
                self._metrics.delivery_lag.observe(max(0.0, now - event_created(event)))

    async def _deliver(
        self, client: aiohttp.ClientSession, webhook: Webhook, delivery: Delivery, event: Event
    ) -> Attempt:
        body = json.dumps(message(event, webhook.id), separators=(",", ":")).encode()
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Bucketd-Event-Id": event.event_id,
            "Bucketd-Event-Name": event.name,
            "Bucketd-Webhook-Id": webhook.id,
            "Bucketd-Signature": signature(
                self._engine.webhooks.secret_of(webhook), timestamp, body
            ),
        }
        status: int | None = None
        error: str | None = None
        permanent = False
        try:
            await check_host(webhook.url, self._settings.allowed_hosts, self._resolved)
            async with client.post(
                webhook.url, data=body, headers=headers, allow_redirects=False
            ) as answer:
                status = answer.status
                await answer.read()
            if not 200 <= status < 300:
                error = f"the receiver answered {status}"
        except Refused as exc:
            error, permanent = str(exc), True
        except (aiohttp.ClientError, TimeoutError, Unreachable) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        return self._engine.webhooks.attempt(delivery, status, error, permanent)


def event_created(event: Event) -> float:
    """When the event was written (its `at`, to the millisecond)."""
    return datetime.fromisoformat(event.at.replace("Z", "+00:00")).timestamp()
