"""The HTTP side of webhook delivery, on aiohttp: imported when the first delivery is due
(aiohttp costs every server start a tenth of a second of imports otherwise).

Every address a webhook URL's host resolves to must be allowed, checked by the resolver the
connection uses (`CheckedResolver`), or the delivery is parked at once.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from gateway.delivery.targets import Refused
from storage.config import EventSettings
from storage.services.webhooks import address_allowed


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


@asynccontextmanager
async def session(settings: EventSettings) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(
        limit=settings.concurrency * 2, resolver=CheckedResolver(settings.allowed_hosts)
    )
    timeout = aiohttp.ClientTimeout(total=settings.timeout_seconds)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        yield client


async def post(
    client: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str]
) -> int:
    """POST the event; its status. Raises `Unreachable` (permanent when the address is
    refused) for anything that is not an answer."""
    try:
        async with client.post(url, data=body, headers=headers, allow_redirects=False) as answer:
            await answer.read()
            return answer.status
    except aiohttp.ClientConnectorError as exc:
        raise Unreachable(str(exc)[:500], isinstance(exc.os_error, Refused)) from exc
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise Unreachable(f"{type(exc).__name__}: {exc}"[:500], False) from exc


class Unreachable(Exception):
    def __init__(self, message: str, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent
