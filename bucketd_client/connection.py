"""The synchronous twin of aio_connection.py, generated from it by
contrib/unasync_client.py (`make client`): edit aio_connection.py, not this file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self, TypeVar

import httpx

from . import calls
from .calls import DEFAULT_RETRY, Attempts, Call, Retry
from .models import PageFetch

T = TypeVar("T")


class Connection:
    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        retry: Retry | None = DEFAULT_RETRY,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base, secret = calls.credentials(url, key, os.environ)
        self._retry = retry
        self._http = httpx.Client(
            base_url=base,
            headers={"Authorization": f"Bearer {secret}", "User-Agent": "bucketd-client"},
            timeout=timeout,
            transport=transport,
            verify=calls.tls_context(os.environ),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # sending

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: object = None,
        headers: dict[str, str] | None = None,
        content: Callable[[], Iterator[bytes]] | None = None,
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
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = attempts.delay(None)
                if wait is None:
                    raise calls.unreachable(exc) from exc
                time.sleep(wait)
                continue
            wait = attempts.delay(response)
            if wait is None:
                break
            response.close()
            time.sleep(wait)
        if response.status_code >= 400:
            response.read()
            response.close()
            calls.raise_for_error(response)
        return response

    def _call(self, call: Call[T]) -> T:
        response = self._send(
            call.method,
            call.path,
            params=dict(call.params),
            json=call.json,
            idempotent=call.idempotent,
        )
        return call.parse(response)

    def _pages(self, fetch: PageFetch[T]) -> Iterator[T]:
        cursor: str | None = None
        while True:
            page = fetch(cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
