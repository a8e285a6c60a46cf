"""The rate limit of requests without a valid key, on both listeners.

They are counted per client address (the proxy's word for it behind `trusted_proxies`,
`forwarded.py`; an IPv6 client by its /64, `counted_as`): at the server's
`ratelimit.anonymous_rpm`, or, for a request that names a bucket whose owner set
`anonymousRequestsPerMinute`, at that rate and in a count of its own for that bucket (so a
busy public bucket neither spends the address's budget elsewhere nor is spent by it). 0 is
no limit. Only a request that carries no credential at all is the bucket's: one whose key or
signature failed is counted at the server's rate, so that no bucket's owner lifts the limit
on guessing keys. Requests whose address nobody could name (a trusted proxy said `unknown`)
share one count.

A bucket's rate is remembered for `key_cache_seconds` (as keys are): otherwise every public
download would read its bucket twice, here and in its handler (on SQLite 0.1 ms of waiting
for the index's thread each time, on PostgreSQL a round trip). A change made on any gateway
so reaches every gateway within that time.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Awaitable, Callable

from gateway.http.ratelimit import Decision, Limiter
from storage.engine import Engine
from storage.errors import BucketNotFound, StorageError
from storage.models import Bucket

UNKNOWN = "unknown"
"""The address of requests whose client nobody named."""
REMEMBERED = 10_000
"""Buckets whose rate is remembered at most; past it the memory starts afresh (requests
naming ever new buckets cannot grow it)."""

Own = tuple[str, int] | None
"""A bucket's id and its own rate; None: it has none (or is not there)."""


IPV6_PREFIX = 64
"""An IPv6 client is counted by its /64: the block a host is given (SLAAC, privacy
addresses) and may send from any address of, so counted by the whole address it would
take a new one for each request and never meet the limit."""


def counted_as(address: str | None) -> str:
    """The address a request is counted under: an IPv4 address as it is, an IPv6 one as
    its /64 (an IPv4-mapped one as its IPv4), UNKNOWN for none."""
    if not address:
        return UNKNOWN
    if ":" not in address:
        return address
    try:
        parsed = ipaddress.IPv6Address(address.partition("%")[0])
    except ValueError:
        return address
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(ipaddress.IPv6Network((parsed, IPV6_PREFIX), strict=False))


class AnonymousLimit:
    def __init__(
        self, engine: Engine, limiter: Limiter, per_minute: int, cache_seconds: float
    ) -> None:
        self._engine = engine
        self._limiter = limiter
        self.per_minute = per_minute
        """The server's rate (`ratelimit.anonymous_rpm`), replaced on SIGHUP (`reload.py`)."""
        self._cache_seconds = cache_seconds
        self._known: dict[tuple[str, str], tuple[float, Own]] = {}

    async def hit(
        self,
        address: str | None,
        now: float,
        bucket_id: str | None = None,
        bucket_name: str | None = None,
    ) -> Decision | None:
        """Count a request without a valid key from `address` that names the bucket
        `bucket_id` (/v1) or `bucket_name` (S3, the bucket holding that name across the
        server; neither for a request whose credential failed); None when no limit applies
        to it."""
        address = counted_as(address)
        own = None
        if bucket_id is not None:
            own = await self._own(("id", bucket_id), self._engine.buckets.get_any)
        elif bucket_name is not None:
            own = await self._own(("name", bucket_name), self._engine.buckets.shared)
        if own is None:
            limit, identity = self.per_minute, f"addr:{address}"
        else:
            limit, identity = own[1], f"addr:{address}:{own[0]}"
        if limit == 0:
            return None
        return await self._limiter.hit(identity, limit, now)

    async def _own(self, name: tuple[str, str], find: Callable[[str], Awaitable[Bucket]]) -> Own:
        """The rate of the bucket `find` finds by `name[1]`, remembered. A bucket that is not
        there has none; an index that does not answer leaves the server's rate, remembering
        nothing (the request itself then fails as it would have)."""
        now = time.monotonic()
        known = self._known.get(name)
        if known is not None and known[0] > now:
            return known[1]
        try:
            bucket = await find(name[1])
        except BucketNotFound:
            own: Own = None
        except StorageError:
            return None
        else:
            own = None if bucket.anonymous_rpm is None else (bucket.id, bucket.anonymous_rpm)
        if len(self._known) >= REMEMBERED:
            self._known.clear()
        self._known[name] = (now + self._cache_seconds, own)
        return own
