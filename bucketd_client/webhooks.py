"""The synchronous twin of aio_webhooks.py, generated from it by
contrib/unasync_client.py (`make client`): edit aio_webhooks.py, not this file."""

from __future__ import annotations

from collections.abc import Iterator
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


class Sender(Protocol):
    """What of its client this needs (the client is one)."""

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
        call = create_call(bucket_id, url, events, prefix, suffix, enabled)
        return self._client._call(call)

    def set_enabled(self, bucket_id: str, webhook_id: str, enabled: bool) -> None:
        """Turn a webhook off (its events are no longer queued) or on again (from now on)."""
        self._client._call(update_call(bucket_id, webhook_id, enabled))

    def delete(self, bucket_id: str, webhook_id: str) -> None:
        self._client._call(delete_call(bucket_id, webhook_id))

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
