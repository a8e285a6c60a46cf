"""Webhook delivery: the one gateway holding the cluster's lease hands new events to the
webhooks that want them and posts each, signed, at least once and in order per key;
failures are retried with exponential backoff and jitter, then parked as failed.

The signature is Stripe's scheme: `Bucketd-Signature: t=<unix time>,v1=<hex
HMAC-SHA256(secret, "<t>.<body>")>`; a receiver recomputes it and refuses old timestamps
(docs/api.md has the code). Every address the URL's host resolves to must be allowed
(`storage/webhooks.address_allowed`), checked by the resolver the connection uses, or the
delivery is parked at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from cryptography.exceptions import InvalidTag

from storage.config import EventSettings
from storage.engine import Engine
from storage.events import Event, message
from storage.webhooks import Attempt, Delivery, Webhook, address_allowed

logger = logging.getLogger("bucketd.webhooks")
LEASE_SECONDS = 10.0
IDLE_SECONDS = 0.5
"""How long an idle deliverer waits for new events (a commit wakes it sooner) and retries
coming due."""
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


class Refused(OSError):
    """The URL's host is, or resolves to, an address no webhook may reach."""


class CheckedResolver(AbstractResolver):
    """Resolves as aiohttp does, then refuses a name with any address webhooks may not reach:
    the connection is made to the very addresses checked (no second lookup to rebind)."""

    def __init__(self, allowed: list[str]) -> None:
        self._inner = DefaultResolver()
        self._allowed = allowed

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        if host not in self._allowed:
            for item in found:
                if not address_allowed(item["host"], self._allowed):
                    raise Refused(
                        f"{host} resolves to {item['host']}, which webhooks may not reach"
                    )
        return found

    async def close(self) -> None:
        await self._inner.close()


def check_literal(url: str, allowed: list[str]) -> None:
    """Refused when the URL's host is an address webhooks may not reach (names are checked
    by the resolver, as they are connected to)."""
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return
    if host not in allowed and not address_allowed(host, allowed):
        raise Refused(f"{host} is an address webhooks may not reach")


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
        connector = aiohttp.TCPConnector(
            limit=self._settings.concurrency * 2,
            resolver=CheckedResolver(self._settings.allowed_hosts),
        )
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
                        await self._wait(IDLE_SECONDS)
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
        self, client: aiohttp.ClientSession, webhook: Webhook, delivery: Delivery, event: Event
    ) -> Attempt:
        try:
            secret = self._engine.webhooks.secret_of(webhook)
        except InvalidTag:
            unsealable = "this gateway cannot unseal the webhook's secret: its secrets.key differs"
            logger.error("%s (webhook %s)", unsealable, webhook.id)
            return self._engine.webhooks.attempt(delivery, None, unsealable)
        body = json.dumps(message(event, webhook.id), separators=(",", ":")).encode()
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Bucketd-Event-Id": event.event_id,
            "Bucketd-Event-Name": event.name,
            "Bucketd-Webhook-Id": webhook.id,
            "Bucketd-Signature": signature(secret, timestamp, body),
        }
        status: int | None = None
        error: str | None = None
        permanent = False
        try:
            check_literal(webhook.url, self._settings.allowed_hosts)
            async with client.post(
                webhook.url, data=body, headers=headers, allow_redirects=False
            ) as answer:
                status = answer.status
                await answer.read()
            if not 200 <= status < 300:
                error = f"the receiver answered {status}"
        except Refused as exc:
            error, permanent = str(exc), True
        except aiohttp.ClientConnectorError as exc:
            error, permanent = str(exc)[:500], isinstance(exc.os_error, Refused)
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        return self._engine.webhooks.attempt(delivery, status, error, permanent)


def event_created(event: Event) -> float:
    """When the event was written (its `at`, to the millisecond)."""
    return datetime.fromisoformat(event.at.replace("Z", "+00:00")).timestamp()
