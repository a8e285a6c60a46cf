"""Fixed-window rate limits aligned to the clock minute (`ratelimit.window_seconds`).

In memory by default: one dictionary of counters per window, no I/O per request (several
gateways share their counts in Redis instead: `shared_limit.py`). The window changes for every
identity at the same instant, so the old window's counters are dropped wholesale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Decision:
    limit: int
    remaining: int
    reset: int
    """Unix time in seconds at which the window resets."""
    retry_after: int
    allowed: bool

    def headers(self) -> dict[str, str]:
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset),
        }
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after)
        return headers


def decide(count: int, limit: int, window: int, seconds: int, now: float) -> Decision:
    """The answer to the `count`th request of an identity in window number `window` of
    `seconds` each."""
    reset = (window + 1) * seconds
    return Decision(
        limit=limit,
        remaining=max(0, limit - count),
        reset=reset,
        retry_after=max(1, math.ceil(reset - now)),
        allowed=count <= limit,
    )


NO_LIMIT = 1_000_000_000
"""What the headers say as the limit and what remains of it when no limit counts a request
(a bucket's `anonymousRequestsPerMinute` of 0, the server's `anonymous_rpm` of 0, the
unthrottled key): the contract has every /v1 response carry them, and this is the largest
rate a bucket may set."""


def unlimited(seconds: int, now: float) -> Decision:
    """The headers' answer for a request no limit counts, in the window of `seconds` at `now`."""
    return decide(0, NO_LIMIT, int(now // seconds), seconds, now)


class Limiter(Protocol):
    window_seconds: int

    async def hit(self, identity: str, limit: int, now: float) -> Decision: ...

    async def close(self) -> None: ...


class RateLimiter:
    """Counts in this process: the default, and a shared limiter's fallback."""

    def __init__(self, window_seconds: int = 60) -> None:
        self.window_seconds = window_seconds
        self._window = -1
        self._counts: dict[str, int] = {}

    async def hit(self, identity: str, limit: int, now: float) -> Decision:
        window = int(now // self.window_seconds)
        if window != self._window:
            self._window = window
            self._counts = {}
        count = self._counts.get(identity, 0) + 1
        self._counts[identity] = count
        return decide(count, limit, window, self.window_seconds, now)

    async def close(self) -> None:
        pass
