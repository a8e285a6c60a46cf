"""The /v1 shapes of webhooks and their deliveries (the rest are in `shapes.py`)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import UNSET, Meta, UnsetType, field

from .contract import EVENT_PATTERNS
from .fields import Count, FileKey, Timestamp, documented
from .shapes import Request, Shape

__all__ = ["CreateWebhook", "Delivery", "Redeliver", "Redelivered", "UpdateWebhook", "Webhook"]

EventPattern = Annotated[str, documented(enum=list(EVENT_PATTERNS))]
EventPatterns = Annotated[
    list[EventPattern],
    documented(minItems=1),
    Meta(description="S3's event names and wildcards, e.g. s3:ObjectCreated:*"),
]


class Webhook(Shape, frozen=True, tag_field="object", tag="webhook", omit_defaults=True):
    """Where a bucket's events are sent, signed with its secret."""

    id: str
    bucket_id: str
    url: str
    events: EventPatterns
    prefix: str
    suffix: str
    enabled: bool
    created_at: Timestamp
    arn: Annotated[
        str, Meta(description="Its name as a target of S3's PutBucketNotificationConfiguration")
    ]
    secret: str | None = None
    """Only on the webhook just created: the one time its signing secret is shown."""


class Delivery(Shape, frozen=True, tag_field="object", tag="delivery"):
    """One event sent (or to be sent) to a webhook."""

    id: Annotated[str, Meta(description="The event's id (evt_...), also sent with it")]
    key: FileKey
    event_name: str | None
    """The event's name while the event is kept (null once it has been pruned)."""
    status: Annotated[str, documented(enum=["pending", "delivered", "failed"])]
    attempts: Count
    last_status: int | None
    """The receiver's last HTTP status (null: no answer)."""
    last_error: str | None
    next_attempt_at: Timestamp | None
    first_attempt_at: Timestamp
    done_at: Timestamp | None


class CreateWebhook(Request):
    codes: ClassVar[dict[str, str]] = {"url": "invalid_url"}
    url: Annotated[str, Meta(description="http(s); only public hosts unless the server allows")]
    events: EventPatterns = field(default_factory=lambda: ["s3:*"])
    prefix: Annotated[str, Meta(description="Only keys starting with this")] = ""
    suffix: Annotated[str, Meta(description="Only keys ending with this")] = ""
    enabled: bool = True


class UpdateWebhook(Request):
    """Fields left out are left as they are; re-enabling skips what happened while off."""

    codes: ClassVar[dict[str, str]] = CreateWebhook.codes
    url: str | UnsetType = UNSET
    events: EventPatterns | UnsetType = UNSET
    prefix: str | UnsetType = UNSET
    suffix: str | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET


class Redeliver(Request):
    """Send a delivery again: the one of `eventId`, or (without it) every failed one."""

    codes: ClassVar[dict[str, str]] = {"eventId": "invalid_event_id"}
    event_id: Annotated[str, Meta(pattern=r"^evt_[0-9]{16}$")] | None = None


class Redelivered(Shape, frozen=True, tag_field="object", tag="redelivery"):
    count: Annotated[Count, Meta(description="How many deliveries are pending again")]
