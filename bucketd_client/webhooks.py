"""Webhooks and the live stream of events, for the synchronous client: `client.webhooks`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol, TypeVar

import httpx

from . import webhook_shapes as shapes
from .calls import Call, bucket_path, data
from .models import Page, decode

T = TypeVar("T")


class Sender(Protocol):
    """What of the client this needs (`Client` is one)."""

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


def _hooks(bucket_id: str) -> str:
    return f"{bucket_path(bucket_id)}/webhooks"


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
        body = shapes.CreateWebhook(
            url=url, events=events or ["s3:*"], prefix=prefix, suffix=suffix, enabled=enabled
        )
        call = Call(
            "POST",
            _hooks(bucket_id),
            lambda r: decode(data(r), shapes.Webhook),
            body=body,
            idempotent=False,
        )
        return self._client._call(call)

    def of_bucket(self, bucket_id: str) -> Page[shapes.Webhook]:
        call = Call("GET", _hooks(bucket_id), lambda r: Page.from_json(r.json(), shapes.Webhook))
        return self._client._call(call)

    def deliveries(
        self, bucket_id: str, webhook_id: str, status: str | None = None
    ) -> Page[shapes.Delivery]:
        """The newest deliveries first (`status`: pending, delivered or failed)."""
        call = Call(
            "GET",
            f"{_hooks(bucket_id)}/{webhook_id}/deliveries",
            lambda r: Page.from_json(r.json(), shapes.Delivery),
            {"status": status} if status else {},
        )
        return self._client._call(call)

    def redeliver(self, bucket_id: str, webhook_id: str, event_id: str | None = None) -> int:
        """Send a delivery again (`event_id`), or every failed one; how many."""
        call = Call(
            "POST",
            f"{_hooks(bucket_id)}/{webhook_id}/redeliver",
            lambda r: decode(data(r), shapes.Redelivered).count,
            body=shapes.Redeliver(event_id=event_id),
        )
        return self._client._call(call)

    def stream(
        self,
        bucket_id: str | None = None,
        types: list[str] | None = None,
        prefix: str = "",
        after: str | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event id, S3 event record) of every event from now on (or after `after`), as
        they happen; resumes after a dropped connection from the last one seen."""
        params = {k: v for k, v in (("bucketId", bucket_id), ("prefix", prefix)) if v}
        if types:
            params["types"] = ",".join(types)
        while True:
            headers = {"Last-Event-ID": after} if after else {}
            response = self._client._send(
                "GET", "/v1/events", params=params, headers=headers, stream=True
            )
            try:
                current: dict[str, str] = {}
                for line in response.iter_lines():
                    if line.startswith(("id: ", "data: ")):
                        name, _, value = line.partition(": ")
                        current[name] = value
                    elif not line and "data" in current:
                        after = current["id"]
                        yield after, json.loads(current["data"])["Records"][0]
                        current = {}
            except (OSError, ValueError):
                pass
            finally:
                response.close()
