"""What every call of `AsyncClient` goes through: one pooled HTTP connection set, the
retries, the errors, the pages. The synchronous `Connection` (connection.py) is generated
from this module by `make client` (unasync)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Self, TypeVar

import anyio
import httpx

from . import calls
from .calls import DEFAULT_RETRY, Attempts, Call, Retry
from .models import AsyncPageFetch

T = TypeVar("T")


class AsyncConnection:
    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        retry: Retry | None = DEFAULT_RETRY,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base, secret = calls.credentials(url, key, os.environ)
        self._retry = retry
        self._http = httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {secret}", "User-Agent": "bucketd-client"},
            timeout=timeout,
            transport=transport,
            verify=calls.tls_context(os.environ),
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # sending

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: object = None,
        headers: dict[str, str] | None = None,
        content: Callable[[], AsyncIterator[bytes]] | None = None,
        idempotent: bool = True,
        stream: bool = False,
    ) -> httpx.Response:
        attempts = Attempts(self._retry, idempotent)
        while True:
            request = self._http.build_request(
                method,
                path,
                params=params,
                json=json,
                headers=headers,
                content=None if content is None else content(),
            )
            try:
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = attempts.delay(None)
                if wait is None:
                    raise calls.unreachable(exc) from exc
                await anyio.sleep(wait)
                continue
            wait = attempts.delay(response)
            if wait is None:
                break
            await response.aclose()
            await anyio.sleep(wait)
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            calls.raise_for_error(response)
        return response

    async def _call(self, call: Call[T]) -> T:
        response = await self._send(
            call.method,
            call.path,
            params=dict(call.params),
            json=call.json,
            idempotent=call.idempotent,
        )
        return call.parse(response)

    async def _pages(self, fetch: AsyncPageFetch[T]) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            page = await fetch(cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
