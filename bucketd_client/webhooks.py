"""Webhooks and the live stream of events: `client.webhooks` on both clients. The calls are
built once here; each client only sends them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol, TypeVar

import httpx

from . import webhook_shapes as shapes
from .calls import Call, bucket_path, data
from .models import Page, decode

T = TypeVar("T")
Record = tuple[str, dict[str, Any]]
"""(event id, S3 event record)."""


class Sender(Protocol):
    """What of the synchronous client this needs (`Client` is one)."""

    def _call(self, call: Call[T]) -> T: ...

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
    ) -> httpx.Response: ...


class AsyncSender(Protocol):
    """What of the asynchronous client this needs (`AsyncClient` is one)."""

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


def _hooks(bucket_id: str) -> str:
    return f"{bucket_path(bucket_id)}/webhooks"


def create_call(
    bucket_id: str, url: str, events: list[str] | None, prefix: str, suffix: str, enabled: bool
) -> Call[shapes.Webhook]:
    body = shapes.CreateWebhook(
        url=url, events=events or ["s3:*"], prefix=prefix, suffix=suffix, enabled=enabled
    )
    return Call(
        "POST",
        _hooks(bucket_id),
        lambda r: decode(data(r), shapes.Webhook),
        body=body,
        idempotent=False,
    )


def list_call(bucket_id: str) -> Call[Page[shapes.Webhook]]:
    return Call("GET", _hooks(bucket_id), lambda r: Page.from_json(r.json(), shapes.Webhook))


def deliveries_call(
    bucket_id: str, webhook_id: str, status: str | None
) -> Call[Page[shapes.Delivery]]:
    return Call(
        "GET",
        f"{_hooks(bucket_id)}/{webhook_id}/deliveries",
        lambda r: Page.from_json(r.json(), shapes.Delivery),
        {"status": status} if status else {},
    )


def redeliver_call(bucket_id: str, webhook_id: str, event_id: str | None) -> Call[int]:
    return Call(
        "POST",
        f"{_hooks(bucket_id)}/{webhook_id}/redeliver",
        lambda r: decode(data(r), shapes.Redelivered).count,
        body=shapes.Redeliver(event_id=event_id),
    )


def stream_params(bucket_id: str | None, types: list[str] | None, prefix: str) -> dict[str, str]:
    params = {k: v for k, v in (("bucketId", bucket_id), ("prefix", prefix)) if v}
    if types:
        params["types"] = ",".join(types)
    return params


class Frames:
    """Server-Sent Events lines in, (event id, record) out."""

    def __init__(self) -> None:
        self.current: dict[str, str] = {}

    def line(self, line: str) -> Record | None:
        if line.startswith(("id: ", "data: ")):
            name, _, value = line.partition(": ")
            self.current[name] = value
        elif not line and "data" in self.current:
            found = self.current["id"], json.loads(self.current["data"])["Records"][0]
            self.current = {}
            return found
        return None


class Webhooks:
    def __init__(self, client: Sender) -> None:
        self._client = client

    def create(
        self,
        bucket_id: str,
        url: str,
        events: list[str] | None = None,
        prefix: str = "",
        suffix: str = "",
        enabled: bool = True,
    ) -> shapes.Webhook:
        """A webhook of the bucket's events from now on; its `secret` is shown this once."""
        return self._client._call(create_call(bucket_id, url, events, prefix, suffix, enabled))

    def of_bucket(self, bucket_id: str) -> Page[shapes.Webhook]:
        return self._client._call(list_call(bucket_id))

    def deliveries(
        self, bucket_id: str, webhook_id: str, status: str | None = None
    ) -> Page[shapes.Delivery]:
        """The newest deliveries first (`status`: pending, delivered or failed)."""
        return self._client._call(deliveries_call(bucket_id, webhook_id, status))

    def redeliver(self, bucket_id: str, webhook_id: str, event_id: str | None = None) -> int:
        """Send a delivery again (`event_id`), or every failed one; how many."""
        return self._client._call(redeliver_call(bucket_id, webhook_id, event_id))

    def stream(
        self,
        bucket_id: str | None = None,
        types: list[str] | None = None,
        prefix: str = "",
        after: str | None = None,
    ) -> Iterator[Record]:
        """(event id, S3 event record) of every event from now on (or after `after`), as
        they happen; resumes after a dropped connection from the last one seen."""
        params = stream_params(bucket_id, types, prefix)
        while True:
            headers = {"Last-Event-ID": after} if after else {}
            response = self._client._send(
                "GET", "/v1/events", params=params, headers=headers, stream=True
            )
            frames = Frames()
            try:
                for line in response.iter_lines():
                    found = frames.line(line)
                    if found is not None:
                        after = found[0]
                        yield found
            except (OSError, ValueError, httpx.TransportError):
                pass
            finally:
                response.close()


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

    async def of_bucket(self, bucket_id: str) -> Page[shapes.Webhook]:
        return await self._client._call(list_call(bucket_id))

    async def deliveries(
        self, bucket_id: str, webhook_id: str, status: str | None = None
    ) -> Page[shapes.Delivery]:
        return await self._client._call(deliveries_call(bucket_id, webhook_id, status))

    async def redeliver(self, bucket_id: str, webhook_id: str, event_id: str | None = None) -> int:
        return await self._client._call(redeliver_call(bucket_id, webhook_id, event_id))

    async def stream(
        self,
        bucket_id: str | None = None,
        types: list[str] | None = None,
        prefix: str = "",
        after: str | None = None,
    ) -> AsyncIterator[Record]:
        """As `Webhooks.stream`, for asyncio."""
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
