"""Events: what changed in a bucket, as S3's event notifications say it, in pure functions.

Every change to a file is one event, written in the transaction that makes the change
(`index/events.py`): created (`ObjectCreated:Put`, `:Post`, `:Copy`,
`:CompleteMultipartUpload`; a restored version is a copy), removed (`ObjectRemoved:Delete`,
`:DeleteMarkerCreated`) or expired by a lifecycle rule (`LifecycleExpiration:Delete`,
`:DeleteMarkerCreated`). A rename is what S3 would make of it: the old key removed and the new
one created by a copy, two events in one transaction. Deleting a bucket with its files
(`force`) writes none: the bucket's events end with it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from bucketd_client.contract import EVENT_NAMES, EVENT_PATTERNS
from storage.rules.validation import whole_number

PUT = "ObjectCreated:Put"
POST = "ObjectCreated:Post"
COPY = "ObjectCreated:Copy"
COMPLETE = "ObjectCreated:CompleteMultipartUpload"
DELETE = "ObjectRemoved:Delete"
MARKER = "ObjectRemoved:DeleteMarkerCreated"
EXPIRED = "LifecycleExpiration:Delete"
EXPIRED_MARKER = "LifecycleExpiration:DeleteMarkerCreated"
NAMES = (PUT, POST, COPY, COMPLETE, DELETE, MARKER, EXPIRED, EXPIRED_MARKER)
PATTERNS = EVENT_PATTERNS
"""What a webhook may subscribe to, in S3's spelling."""
if NAMES != EVENT_NAMES:
    raise RuntimeError("storage.rules.events.NAMES and the wire contract's EVENT_NAMES differ")
Cause = str
"""Who removed a file: `ObjectRemoved` (a request) or `LifecycleExpiration` (a rule)."""


def removal(cause: Cause, marker: bool) -> str:
    """The name of a removal by `cause`: a delete marker written, or a version deleted."""
    return f"{cause}:{'DeleteMarkerCreated' if marker else 'Delete'}"


def event_id(number: int) -> str:
    return f"evt_{number:016d}"


def event_number(text: str) -> int | None:
    """The number an event id (evt_ and digits) shows, or None for another text."""
    return whole_number(text.removeprefix("evt_"))


@dataclass(frozen=True)
class Event:
    seq: int
    org_id: str
    bucket_id: str
    bucket_name: str
    region: str
    key: str
    name: str
    size: int
    etag: str | None
    version_id: str | None
    at: str
    number: int
    """Its number in its organization: what its id shows (`seq`, the outbox's order across
    the server, is never shown, so no tenant learns from it how much the others write)."""

    @property
    def event_id(self) -> str:
        """Stable across deliveries and restarts: receivers de-duplicate on it."""
        return event_id(self.number)

    def matches(self, patterns: list[str], prefix: str = "", suffix: str = "") -> bool:
        return (
            self.key.startswith(prefix)
            and self.key.endswith(suffix)
            and any(fnmatch.fnmatchcase("s3:" + self.name, p) for p in patterns)
        )


def message(event: Event, configuration_id: str = "") -> dict[str, Any]:
    """The event as S3 sends one (`Records` of one record), with bucketd's own ids."""
    obj: dict[str, Any] = {
        "key": quote_plus(event.key, safe="/"),
        "size": event.size,
        "sequencer": f"{event.number:016X}",
    }
    if event.etag:
        obj["eTag"] = event.etag
    if event.version_id:
        obj["versionId"] = event.version_id
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": event.region,
                "eventTime": event.at,
                "eventName": event.name,
                "userIdentity": {"principalId": event.org_id},
                "requestParameters": {"sourceIPAddress": ""},
                "responseElements": {},
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": configuration_id,
                    "bucket": {
                        "name": event.bucket_name,
                        "ownerIdentity": {"principalId": event.org_id},
                        "arn": f"arn:aws:s3:::{event.bucket_name}",
                    },
                    "object": obj,
                },
                "bucketd": {
                    "eventId": event.event_id,
                    "bucketId": event.bucket_id,
                    "organizationId": event.org_id,
                },
            }
        ]
    }
