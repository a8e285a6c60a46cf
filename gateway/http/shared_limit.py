"""A rate limiter shared by every gateway, in Redis.

One round trip per request: INCR of the identity's counter for the current window and
EXPIRE, pipelined. The counter's key names the window, so windows change for every gateway
at the same instant and old counters expire by themselves. When Redis cannot be reached the
gateway falls back to its own in-process limiter (each gateway then enforces the limit on
its own share of the traffic) and says so once in its log; it tries Redis again after
`RETRY_SECONDS`.
"""

from __future__ import annotations

import logging

import redis.asyncio as redis
from redis.exceptions import RedisError

from gateway.http.ratelimit import Decision, RateLimiter, decide

logger = logging.getLogger("bucketd.ratelimit")
RETRY_SECONDS = 5.0
TIMEOUT_SECONDS = 0.25


class SharedRateLimiter:
    def __init__(self, url: str, window_seconds: int = 60) -> None:
        self._redis = redis.from_url(
            url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        self.window_seconds = window_seconds
        self._fallback = RateLimiter(window_seconds)
        self._down_until = 0.0

    async def hit(self, identity: str, limit: int, now: float) -> Decision:
        if now < self._down_until:
            return await self._fallback.hit(identity, limit, now)
        window = int(now // self.window_seconds)
        key = f"bucketd:ratelimit:{window}:{identity}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, 2 * self.window_seconds)
                count, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            if self._down_until == 0.0:
                logger.warning(
                    "Redis is unreachable (%s): rate limits are counted per gateway until it "
                    "answers again",
                    exc,
                )
            self._down_until = now + RETRY_SECONDS
            return await self._fallback.hit(identity, limit, now)
        if self._down_until:
            logger.warning("Redis answers again: rate limits are shared across gateways")
            self._down_until = 0.0
        return decide(int(count), limit, window, self.window_seconds, now)

    async def close(self) -> None:
        await self._redis.aclose()
