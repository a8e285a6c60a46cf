"""The webhook calls and the event stream's frames, built once for both clients
(`aio_webhooks.py` and its synchronous twin `webhooks.py` only send them)."""

from __future__ import annotations

import json
from typing import Any

from . import webhook_shapes as shapes
from .calls import Call, bucket_path, data, nothing
from .models import Page, decode

Record = tuple[str, dict[str, Any]]
"""(event id, S3 event record)."""


def hooks_path(bucket_id: str) -> str:
    return f"{bucket_path(bucket_id)}/webhooks"


def create_call(
    bucket_id: str, url: str, events: list[str] | None, prefix: str, suffix: str, enabled: bool
) -> Call[shapes.Webhook]:
    body = shapes.CreateWebhook(
        url=url, events=events or ["s3:*"], prefix=prefix, suffix=suffix, enabled=enabled
    )
    return Call(
        "POST",
        hooks_path(bucket_id),
        lambda r: decode(data(r), shapes.Webhook),
        body=body,
        idempotent=False,
    )


def update_call(bucket_id: str, webhook_id: str, enabled: bool) -> Call[None]:
    return Call(
        "PATCH",
        f"{hooks_path(bucket_id)}/{webhook_id}",
        nothing,
        body=shapes.UpdateWebhook(enabled=enabled),
    )


def delete_call(bucket_id: str, webhook_id: str) -> Call[None]:
    return Call("DELETE", f"{hooks_path(bucket_id)}/{webhook_id}", nothing)


def list_call(bucket_id: str) -> Call[Page[shapes.Webhook]]:
    return Call("GET", hooks_path(bucket_id), lambda r: Page.from_json(r.json(), shapes.Webhook))


def deliveries_call(
    bucket_id: str, webhook_id: str, status: str | None
) -> Call[Page[shapes.Delivery]]:
    return Call(
        "GET",
        f"{hooks_path(bucket_id)}/{webhook_id}/deliveries",
        lambda r: Page.from_json(r.json(), shapes.Delivery),
        {"status": status} if status else {},
    )


def redeliver_call(bucket_id: str, webhook_id: str, event_id: str | None) -> Call[int]:
    return Call(
        "POST",
        f"{hooks_path(bucket_id)}/{webhook_id}/redeliver",
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
