"""Webhooks: where a bucket's events go, and the state of every delivery.

A webhook's secret is made here, shown once, and kept sealed (it signs every delivery). Its
URL may reach only public addresses unless the server's `events.allowed_hosts` lists the host
or its network: checked when the webhook is saved (for literal addresses and `localhost`)
and again for every address the name resolves to at delivery (`address_allowed`), so a
tenant cannot make bucketd call the services beside it.
"""

from __future__ import annotations

import ipaddress
import random
import secrets
import time
from urllib.parse import urlsplit

from storage.config import EngineConfig
from storage.errors import InvalidInput, NotFound
from storage.index import Index, leases
from storage.index import events as events_scripts
from storage.index import webhooks as scripts
from storage.index.webhooks import Attempt, Delivery, Webhook
from storage.rules import ids
from storage.rules.clock import Clock
from storage.rules.events import PATTERNS, Event
from storage.services.buckets import Buckets

__all__ = ["Attempt", "Delivery", "Webhook", "Webhooks", "address_allowed", "check_url"]
from storage.models import Actor
from storage.sealing import Sealer

LEASE = "webhook-delivery"
MAX_URL = 2048
MAX_AFFIX = 1024


EMBEDDING = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("::ffff:0:0:0/96"))
"""NAT64's well-known prefix and SIIT's IPv4-translated addresses: the last 32 bits are the
IPv4 address a connection reaches."""


def _carried(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 one reaches through (mapped, 6to4, NAT64, compatible)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if any(ip in net for net in EMBEDDING) or int(ip) >> 32 == 0:  # also ::a.b.c.d
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def address_allowed(address: str, allowed: list[str]) -> bool:
    """Whether a delivery may connect to `address` (an IP): public (and so is any IPv4
    address it carries), or listed."""
    ip = ipaddress.ip_address(address)
    for entry in allowed:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    public = [ip, *_carried(ip)]
    return all(a.is_global and not a.is_multicast for a in public)


def url_host(url: str) -> str:
    """The host a webhook URL connects to, as the HTTP client will see it: IDNA (UTS-46)
    maps full-width digits, circled digits and ideographic dots to ASCII, so
    `①②⑦.0.0.1` is the address 127.0.0.1, never a name (InvalidInput: no valid host)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:  # a bracketed host that is no IPv6 address
        raise InvalidInput("the webhook URL's host is not a valid address") from None
    if host.replace(".", "").isalnum() and host.replace(".", "").isascii():
        _refuse_numeric(host)
    if not host.isascii():
        import idna  # what yarl, aiohttp's URL parser, maps hosts with

        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            raise InvalidInput("the webhook URL's host is not a valid name") from None
    return host.lower()


def _refuse_numeric(host: str) -> None:
    """A host of digits (and hex) that is no canonical address, `2130706433`, `0177.0.0.1`,
    `0x7f.1`, `127.1`, is what some resolvers read as an address: refused, not resolved."""
    labels = host.rstrip(".").split(".")
    numeric = all(
        label.isdigit() or (label.lower().startswith("0x") and label[2:].isalnum())
        for label in labels
    )
    if not numeric:
        return
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        raise InvalidInput("the webhook URL's host is a number, not an address or a name") from None


def check_url(url: object, allowed: list[str]) -> str:
    """An http(s) URL whose host, where it is an address (or localhost), may be reached."""
    if not isinstance(url, str) or not 1 <= len(url) <= MAX_URL:
        raise InvalidInput(f"a webhook URL is 1 to {MAX_URL} characters")
    host = url_host(url)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidInput("a webhook URL is http:// or https:// with a host")
    if host in allowed:
        return url
    if host.rstrip(".") == "localhost" or host.rstrip(".").endswith(".localhost"):
        raise InvalidInput("the webhook URL's host is not allowed (events.allowed_hosts)")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return url  # a name: its addresses are checked at each delivery
    if not address_allowed(host, allowed):
        raise InvalidInput("the webhook URL's host is not allowed (events.allowed_hosts)")
    return url


def check_patterns(events: object) -> list[str]:
    if not isinstance(events, list) or not events or not all(e in PATTERNS for e in events):
        raise InvalidInput(f"events is a non-empty list of: {', '.join(PATTERNS)}")
    return list(dict.fromkeys(events))


def check_affix(value: object, name: str) -> str:
    if not isinstance(value, str) or len(value.encode()) > MAX_AFFIX:
        raise InvalidInput(f"{name} is at most {MAX_AFFIX} bytes")
    return value


class Webhooks:
    def __init__(self, index: Index, config: EngineConfig, buckets: Buckets, clock: Clock) -> None:
        self._index = index
        self._clock = clock
        self._config = config
        self._buckets = buckets
        self._sealer_instance: Sealer | None = None

    def _sealer(self) -> Sealer:
        if self._sealer_instance is None:
            self._sealer_instance = Sealer.for_data_dir(self._config.data_dir)
        return self._sealer_instance

    def secret_of(self, webhook: Webhook) -> str:
        return self._sealer().open(webhook.secret_sealed, webhook.id)

    async def create(
        self,
        actor: Actor,
        bucket_id: str,
        url: object,
        events: object,
        prefix: object = "",
        suffix: object = "",
        enabled: bool = True,
    ) -> tuple[Webhook, str]:
        """A webhook of the bucket's events from now on, and its signing secret (shown
        once)."""
        bucket = await self._buckets.get(actor, bucket_id)
        webhook_id = ids.new_id(self._config.id_prefix)
        secret = "whsec_" + secrets.token_urlsafe(32)
        webhook = Webhook(
            id=webhook_id,
            org_id=bucket.org_id,
            bucket_id=bucket.id,
            url=check_url(url, self._config.events.allowed_hosts),
            events=check_patterns(events),
            prefix=check_affix(prefix, "prefix"),
            suffix=check_affix(suffix, "suffix"),
            enabled=enabled,
            secret_sealed=self._sealer().seal(secret, webhook_id),
            created_at=self._clock.iso(),
            last_seq=0,
        )
        return await self._index.run(scripts.insert_webhook, webhook), secret

    async def get(self, actor: Actor, bucket_id: str, webhook_id: str) -> Webhook:
        await self._buckets.get(actor, bucket_id)
        found = await self._index.run(scripts.get_webhook, webhook_id)
        if found is None or found.bucket_id != bucket_id:
            raise NotFound("webhook not found")
        return found

    async def of_bucket(
        self, actor: Actor, bucket_id: str, after: str | None, limit: int
    ) -> list[Webhook]:
        bucket = await self._buckets.get(actor, bucket_id)
        return await self._index.run(scripts.list_webhooks, bucket.org_id, bucket_id, after, limit)

    async def update(
        self, actor: Actor, bucket_id: str, webhook_id: str, changes: dict[str, object]
    ) -> Webhook:
        """Change `url`, `events`, `prefix`, `suffix` or `enabled`."""
        await self.get(actor, bucket_id, webhook_id)
        checked: dict[str, object] = {}
        if "url" in changes:
            checked["url"] = check_url(changes["url"], self._config.events.allowed_hosts)
        if "events" in changes:
            checked["events"] = check_patterns(changes["events"])
        for name in ("prefix", "suffix"):
            if name in changes:
                checked[name] = check_affix(changes[name], name)
        if "enabled" in changes:
            checked["enabled"] = bool(changes["enabled"])
        await self._index.run(scripts.update_webhook, webhook_id, checked)
        return await self.get(actor, bucket_id, webhook_id)

    async def delete(self, actor: Actor, bucket_id: str, webhook_id: str) -> None:
        await self.get(actor, bucket_id, webhook_id)
        await self._index.run(scripts.delete_webhook, webhook_id)

    async def deliveries(
        self,
        actor: Actor,
        bucket_id: str,
        webhook_id: str,
        status: str | None,
        before: int | None,
        limit: int,
    ) -> list[Delivery]:
        await self.get(actor, bucket_id, webhook_id)
        if status not in (None, "pending", "delivered", "failed"):
            raise InvalidInput("status is pending, delivered or failed")
        return await self._index.run(scripts.deliveries_of, webhook_id, status, before, limit)

    async def redeliver(
        self, actor: Actor, bucket_id: str, webhook_id: str, number: int | None
    ) -> int:
        """Send a delivery again (that of the event numbered `number`; every failed one
        with None); how many."""
        await self.get(actor, bucket_id, webhook_id)
        count = await self._index.run(scripts.redeliver, webhook_id, number, time.time())
        if number is not None and count == 0:
            raise NotFound("no such delivery, or it is pending, or its event is gone")
        return count

    # The delivery queue, for the one gateway holding the lease (gateway/delivery/sender.py).

    async def reclaim(self) -> None:
        """At start-up, where this process is the index's only user (SQLite), drop the lease
        a killed predecessor left: nobody else can hold it."""
        if not self._config.index.postgres:
            await self._index.run(leases.release_lease, LEASE, None)

    async def claim(self, owner: str, seconds: float) -> bool:
        """Take or renew the cluster's delivery lease for `seconds`; whether `owner` has it."""
        now = time.time()
        return await self._index.run(leases.claim_lease, LEASE, owner, now, now + seconds)

    async def hand_out(self, batch: int = 500) -> int:
        """Give every enabled webhook the deliveries of the events written since it last
        looked; how many webhooks are enabled."""
        enabled = await self._index.run(scripts.enabled_webhooks)
        for webhook in enabled:
            while await self._index.run(scripts.hand_out, webhook, time.time(), batch) == batch:
                again = await self._index.run(scripts.get_webhook, webhook.id)
                if again is None:
                    break
                webhook = again
        return len(enabled)

    async def due(self, limit: int) -> list[tuple[Webhook, Delivery, Event]]:
        """Deliveries to attempt now, oldest first, at most one per webhook and key."""
        found = await self._index.run(scripts.due, time.time(), limit)
        hooks: dict[str, Webhook | None] = {}
        out = []
        for delivery, event in found:
            if delivery.webhook_id not in hooks:
                hooks[delivery.webhook_id] = await self._index.run(
                    scripts.get_webhook, delivery.webhook_id
                )
            webhook = hooks[delivery.webhook_id]
            if webhook is not None:
                out.append((webhook, delivery, event))
        return out

    async def next_due(self) -> float | None:
        """When (`time.time()`) the earliest pending delivery comes due; None when none is
        pending."""
        return await self._index.run(scripts.next_due)

    def attempt(
        self,
        delivery: Delivery,
        status: int | None,
        error: str | None,
        permanent: bool = False,
    ) -> Attempt:
        """What an attempt makes of a delivery: delivered (no `error`), retried after a
        backoff with jitter, or parked as failed once `events.retry_seconds` have passed
        since the first attempt (at once when the failure is `permanent`)."""
        settings = self._config.events
        now = time.time()
        if error is None:
            return Attempt(delivery.webhook_id, delivery.seq, "delivered", now, status, None)
        delay = settings.retry_first_seconds * 2 ** min(delivery.attempts, 20)
        next_at = now + delay * random.uniform(0.5, 1.0)
        expired = next_at - delivery.first_at > settings.retry_seconds
        outcome = "failed" if permanent or expired else "pending"
        return Attempt(delivery.webhook_id, delivery.seq, outcome, next_at, status, error)

    async def settle(self, attempts: list[Attempt]) -> None:
        """Record a batch of attempts in one transaction."""
        await self._index.run(scripts.settle, attempts, time.time())

    async def prune(self) -> int:
        """Forget events past their retention that every webhook has had, and the settled
        deliveries of events already gone."""
        before = time.time() - self._config.events.retention_seconds
        removed = await self._index.run(events_scripts.prune_events, before)
        await self._index.run(scripts.prune_deliveries, before)
        return removed
