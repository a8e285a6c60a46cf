"""Webhook endpoints: /v1/buckets/{bucket_id}/webhooks[/{webhook_id}[/deliveries...]]."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import webhook_shapes as shapes
from gateway.api.pagination import id_cursor, parse_limit
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.envelope import created, ok, page, written
from gateway.http.errors import bad_request
from gateway.http.inputs import given, read_json
from storage.rules.clock import unix_to_iso
from storage.rules.events import event_id, event_number
from storage.services.webhooks import Delivery, Webhook


def arn(webhook: Webhook) -> str:
    """How S3's notification configuration names the webhook as a target."""
    return f"arn:bucketd:webhook::{webhook.org_id}:{webhook.id}"


def webhook_shape(webhook: Webhook, secret: str | None = None) -> shapes.Webhook:
    return shapes.Webhook(
        id=webhook.id,
        bucket_id=webhook.bucket_id,
        url=webhook.url,
        events=webhook.events,
        prefix=webhook.prefix,
        suffix=webhook.suffix,
        enabled=webhook.enabled,
        created_at=webhook.created_at,
        arn=arn(webhook),
        secret=secret,
    )


def _number(text: str) -> int:
    number = event_number(text)
    if number is None or not text.startswith("evt_"):
        raise bad_request("an event id is evt_ and digits", "invalid_event_id")
    return number


def delivery_shape(delivery: Delivery) -> shapes.Delivery:
    pending = delivery.status == "pending"
    return shapes.Delivery(
        id=event_id(delivery.number),
        key=delivery.key,
        event_name=delivery.name,
        status=delivery.status,
        attempts=delivery.attempts,
        last_status=delivery.last_status,
        last_error=delivery.last_error,
        next_attempt_at=unix_to_iso(delivery.next_at) if pending else None,
        first_attempt_at=unix_to_iso(delivery.first_at),
        done_at=None if delivery.done_at is None else unix_to_iso(delivery.done_at),
    )


async def create_webhook(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.CreateWebhook)
    webhook, secret = await ctx.engine.webhooks.create(
        principal.actor,
        request.path_params["bucket_id"],
        body.url,
        body.events,
        body.prefix,
        body.suffix,
        body.enabled,
    )
    return created(webhook_shape(webhook, secret))


async def list_webhooks(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    limit = parse_limit(request.query_params)
    after = id_cursor(request.query_params, "webhooks", ctx.settings.id_prefix)
    found = await ctx.engine.webhooks.of_bucket(
        principal.actor, request.path_params["bucket_id"], after, limit + 1
    )
    more = len(found) > limit
    return page([webhook_shape(w) for w in found[:limit]], found[limit - 1].id if more else None)


async def get_webhook(request: Request, principal: Principal) -> Response:
    webhook = await context(request).engine.webhooks.get(
        principal.actor, request.path_params["bucket_id"], request.path_params["webhook_id"]
    )
    return ok(webhook_shape(webhook))


async def update_webhook(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.UpdateWebhook)
    changes = given(body)
    webhook = await ctx.engine.webhooks.update(
        principal.actor,
        request.path_params["bucket_id"],
        request.path_params["webhook_id"],
        changes,
    )
    return written("webhook", webhook.id)


async def delete_webhook(request: Request, principal: Principal) -> Response:
    webhook_id = request.path_params["webhook_id"]
    await context(request).engine.webhooks.delete(
        principal.actor, request.path_params["bucket_id"], webhook_id
    )
    return written("webhook", webhook_id)


async def list_deliveries(request: Request, principal: Principal) -> Response:
    """Newest first; `status` filters; the cursor is the last event id shown."""
    limit = parse_limit(request.query_params)
    cursor = request.query_params.get("cursor")
    found = await context(request).engine.webhooks.deliveries(
        principal.actor,
        request.path_params["bucket_id"],
        request.path_params["webhook_id"],
        request.query_params.get("status"),
        _number(cursor) if cursor else None,
        limit + 1,
    )
    more = len(found) > limit
    shown = found[:limit]
    return page([delivery_shape(d) for d in shown], event_id(shown[-1].number) if more else None)


async def redeliver(request: Request, principal: Principal) -> Response:
    """Send one delivery again, or every failed one."""
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.Redeliver)
    count = await ctx.engine.webhooks.redeliver(
        principal.actor,
        request.path_params["bucket_id"],
        request.path_params["webhook_id"],
        None if body.event_id is None else _number(body.event_id),
    )
    return ok(shapes.Redelivered(count=count))
