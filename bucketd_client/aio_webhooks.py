"""Webhooks and the live stream of events: `client.webhooks` of `AsyncClient`. The
synchronous twin (webhooks.py) is generated from this module by `make client`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, TypeVar

import httpx

from . import webhook_shapes as shapes
from .calls import Call
from .models import Page
from .webhook_calls import (
    Frames,
    Record,
    create_call,
    delete_call,
    deliveries_call,
    list_call,
    redeliver_call,
    stream_params,
    update_call,
)

T = TypeVar("T")


class AsyncSender(Protocol):
    """What of its client this needs (the client is one)."""

    async def _call(self, call: Call[T]) -> T: ...

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
    ) -> httpx.Response: ...


class AsyncWebhooks:
    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def create(
        self,
        bucket_id: str,
        url: str,
        events: list[str] | None = None,
        prefix: str = "",
        suffix: str = "",
        enabled: bool = True,
    ) -> shapes.Webhook:
        """A webhook of the bucket's events from now on; its `secret` is shown this once."""
        call = create_call(bucket_id, url, events, prefix, suffix, enabled)
        return await self._client._call(call)

    async def set_enabled(self, bucket_id: str, webhook_id: str, enabled: bool) -> None:
        """Turn a webhook off (its events are no longer queued) or on again (from now on)."""
        await self._client._call(update_call(bucket_id, webhook_id, enabled))

    async def delete(self, bucket_id: str, webhook_id: str) -> None:
        await self._client._call(delete_call(bucket_id, webhook_id))

    async def of_bucket(self, bucket_id: str) -> Page[shapes.Webhook]:
        return await self._client._call(list_call(bucket_id))

    async def deliveries(
        self, bucket_id: str, webhook_id: str, status: str | None = None
    ) -> Page[shapes.Delivery]:
        """The newest deliveries first (`status`: pending, delivered or failed)."""
        return await self._client._call(deliveries_call(bucket_id, webhook_id, status))

    async def redeliver(self, bucket_id: str, webhook_id: str, event_id: str | None = None) -> int:
        """Send a delivery again (`event_id`), or every failed one; how many."""
        return await self._client._call(redeliver_call(bucket_id, webhook_id, event_id))

    async def stream(
        self,
        bucket_id: str | None = None,
        types: list[str] | None = None,
        prefix: str = "",
        after: str | None = None,
    ) -> AsyncIterator[Record]:
        """(event id, S3 event record) of every event from now on (or after `after`), as
        they happen; resumes after a dropped connection from the last one seen."""
        params = stream_params(bucket_id, types, prefix)
        while True:
            headers = {"Last-Event-ID": after} if after else {}
            response = await self._client._send(
                "GET", "/v1/events", params=params, headers=headers, stream=True
            )
            frames = Frames()
            try:
                async for line in response.aiter_lines():
                    found = frames.line(line)
                    if found is not None:
                        after = found[0]
                        yield found
            except (OSError, ValueError, httpx.TransportError):
                pass
            finally:
                await response.aclose()
