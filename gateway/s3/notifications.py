"""S3's Get/PutBucketNotificationConfiguration over bucketd's webhooks.

A target is a webhook registered on /v1 (its URL and secret live there), named by the ARN
bucketd gives it: `arn:bucketd:webhook::<organization>:<webhook id>`. A Queue-, Topic- or
CloudFunctionConfiguration naming one sets its events and key filters and enables it; a
PUT replaces the whole configuration, so the bucket's webhooks it does not name are
disabled. GET shows the enabled ones as QueueConfigurations.
"""

from __future__ import annotations

from xml.etree import ElementTree

from starlette.responses import Response

from gateway.api.webhooks import arn
from storage.services.webhooks import Webhook

from . import xml
from .call import S3Call
from .errors import S3Error

KINDS = (
    ("QueueConfiguration", "Queue"),
    ("TopicConfiguration", "Topic"),
    ("CloudFunctionConfiguration", "CloudFunction"),
)


def _invalid(message: str) -> S3Error:
    return S3Error("InvalidArgument", message)


def _filters(element: ElementTree.Element) -> tuple[str, str]:
    prefix = suffix = ""
    for rule in element.findall("Filter/S3Key/FilterRule"):
        name = (xml.text(rule, "Name") or "").lower()
        value = xml.text(rule, "Value", "") or ""
        if name == "prefix":
            prefix = value
        elif name == "suffix":
            suffix = value
        else:
            raise _invalid("a FilterRule's Name is prefix or suffix")
    return prefix, suffix


async def _webhooks(call: S3Call) -> list[Webhook]:
    bucket = await call.target_bucket()
    return await call.engine.webhooks.of_bucket(call.actor, bucket.id, None, 1000)


async def get_notifications(call: S3Call) -> Response:
    body: list[xml.Node] = []
    for hook in await _webhooks(call):
        if not hook.enabled:
            continue
        rules = (
            [("FilterRule", [("Name", "Prefix"), ("Value", hook.prefix)])] if hook.prefix else []
        )
        if hook.suffix:
            rules.append(("FilterRule", [("Name", "Suffix"), ("Value", hook.suffix)]))
        body.append(
            (
                "QueueConfiguration",
                [
                    ("Id", hook.id),
                    ("Queue", arn(hook)),
                    *[("Event", event) for event in hook.events],
                    ("Filter", [("S3Key", rules)]) if rules else ("Filter", None),
                ],
            )
        )
    return xml.response("NotificationConfiguration", body)


async def put_notifications(call: S3Call) -> Response:
    root = await call.read_xml()
    hooks = {arn(hook): hook for hook in await _webhooks(call)}
    wanted: dict[str, dict[str, object]] = {}
    for kind, target_tag in KINDS:
        for element in root.findall(kind):
            target = xml.text(element, target_tag) or ""
            if target not in hooks:
                raise _invalid(
                    f"Unable to validate the following destination configurations: {target} "
                    "is not a webhook of this bucket (register it on /v1 first)"
                )
            if target in wanted:
                raise _invalid(f"{target} is named twice")
            events = [e.text or "" for e in element.findall("Event")]
            prefix, suffix = _filters(element)
            wanted[target] = {"events": events, "prefix": prefix, "suffix": suffix}
    bucket = await call.target_bucket()
    for target, hook in hooks.items():
        changes: dict[str, object] = {"enabled": target in wanted, **wanted.get(target, {})}
        await call.engine.webhooks.update(call.actor, bucket.id, hook.id, changes)
    return Response(b"", 200)
