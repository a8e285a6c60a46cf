"""The /v1 operations of events: webhooks, their deliveries, and the live stream (part of
the table in `routes.py`)."""

from __future__ import annotations

from bucketd_client import webhook_shapes
from gateway.api import event_stream, webhooks
from gateway.api.operation import CURSOR, LIMIT, Operation, Param

WEBHOOKS = "/buckets/{bucket_id}/webhooks"
WEBHOOK = WEBHOOKS + "/{webhook_id}"

EVENT_OPERATIONS = (
    Operation(
        method="GET",
        path=WEBHOOKS,
        operation_id="listWebhooks",
        action="s3:GetBucketNotification",
        outsiders=False,
        summary="List a bucket's webhooks, ordered by id.",
        handler=webhooks.list_webhooks,
        scope="buckets:read",
        answer="list",
        shape=webhook_shapes.Webhook,
        errors=(400, 404),
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="POST",
        path=WEBHOOKS,
        operation_id="createWebhook",
        action="s3:PutBucketNotification",
        outsiders=False,
        touches=frozenset({"keys"}),
        summary="Send the bucket's events to a URL from now on; the signing secret is shown once.",
        handler=webhooks.create_webhook,
        scope="buckets:write",
        answer="created",
        shape=webhook_shapes.Webhook,
        body=webhook_shapes.CreateWebhook,
        errors=(400, 404, 413),
        links={"bucket_id": "$request.path.bucket_id", "webhook_id": "$response.body#/data/id"},
        link_to=("getWebhook", "updateWebhook", "deleteWebhook", "listDeliveries"),
    ),
    Operation(
        method="GET",
        path=WEBHOOK,
        operation_id="getWebhook",
        action="s3:GetBucketNotification",
        outsiders=False,
        summary="Get a webhook (never its secret).",
        handler=webhooks.get_webhook,
        scope="buckets:read",
        answer="one",
        shape=webhook_shapes.Webhook,
        errors=(404,),
    ),
    Operation(
        method="PATCH",
        path=WEBHOOK,
        operation_id="updateWebhook",
        action="s3:PutBucketNotification",
        outsiders=False,
        touches=frozenset({"keys"}),
        summary="Change a webhook's URL, events, filters or whether it is enabled.",
        handler=webhooks.update_webhook,
        scope="buckets:write",
        answer="written",
        body=webhook_shapes.UpdateWebhook,
        errors=(400, 404, 413),
    ),
    Operation(
        method="DELETE",
        path=WEBHOOK,
        operation_id="deleteWebhook",
        action="s3:PutBucketNotification",
        outsiders=False,
        summary="Delete a webhook and its deliveries.",
        handler=webhooks.delete_webhook,
        scope="buckets:write",
        answer="written",
        errors=(404,),
    ),
    Operation(
        method="GET",
        path=WEBHOOK + "/deliveries",
        operation_id="listDeliveries",
        action="s3:GetBucketNotification",
        outsiders=False,
        touches=frozenset({"keys"}),
        summary="A webhook's deliveries, newest first, with the receiver's status codes.",
        handler=webhooks.list_deliveries,
        scope="buckets:read",
        answer="list",
        shape=webhook_shapes.Delivery,
        errors=(400, 404),
        params=(
            LIMIT,
            CURSOR,
            Param(name="status", schema={"enum": ["pending", "delivered", "failed"]}),
        ),
    ),
    Operation(
        method="POST",
        path=WEBHOOK + "/redeliver",
        operation_id="redeliver",
        action="s3:PutBucketNotification",
        outsiders=False,
        touches=frozenset({"keys"}),
        summary="Send a delivery again (eventId), or every failed one.",
        handler=webhooks.redeliver,
        scope="buckets:write",
        answer="one",
        shape=webhook_shapes.Redelivered,
        body=webhook_shapes.Redeliver,
        errors=(400, 404, 413),
    ),
    Operation(
        method="GET",
        path="/events",
        operation_id="streamEvents",
        summary="The live stream of the organization's (or a bucket's) events, as "
        "Server-Sent Events; resumes after Last-Event-ID.",
        handler=event_stream.stream_events,
        scope="files:read",
        answer="content",
        errors=(400, 404),
        params=(
            Param(name="bucketId"),
            Param(name="types"),
            Param(name="prefix"),
            Param(name="after"),
            Param(name="Last-Event-ID", location="header"),
        ),
        contents={
            "200": "text/event-stream: one `id`/`event`/`data` frame per event, "
            "`data` being S3's event message."
        },
    ),
)
