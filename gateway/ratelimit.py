"""Fixed-window rate limits aligned to the clock minute, kept in memory.

One dictionary of counters per window; no I/O per request. The window changes for every
identity at the same instant, so the old window's counters are dropped wholesale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WINDOW_SECONDS = 60


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


class RateLimiter:
    def __init__(self) -> None:
        self._window = -1
        self._counts: dict[str, int] = {}

    def hit(self, identity: str, limit: int, now: float) -> Decision:
        window = int(now // WINDOW_SECONDS)
        if window != self._window:
            self._window = window
            self._counts = {}
        count = self._counts.get(identity, 0) + 1
        self._counts[identity] = count
        reset = (window + 1) * WINDOW_SECONDS
        return Decision(
            limit=limit,
            remaining=max(0, limit - count),
            reset=reset,
            retry_after=max(1, math.ceil(reset - now)),
            allowed=count <= limit,
        )
