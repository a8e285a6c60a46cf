"""The /v1 shapes of snapshots: a bucket's, and the operator's of the whole server (the
rest are in `shapes.py`)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import Meta

from .contract import MAX_SNAPSHOT_NAME
from .fields import BucketName, Timestamp, documented
from .shapes import Request, Shape

__all__ = ["CreateSnapshot", "ForkSnapshot", "RestoreServerSnapshot", "Snapshot"]

Label = Annotated[
    str,
    documented(maxLength=MAX_SNAPSHOT_NAME),
    Meta(description="A label of your choosing (not unique); null: none"),
]


class Snapshot(Shape, frozen=True, tag_field="object", tag="snapshot"):
    """The state of a bucket (every version, delete marker and setting), or with
    `bucketId` null the operator's snapshot of every bucket of the server, as it was at
    `createdAt`. It copies no content: it holds references to what its versions name."""

    id: str
    bucket_id: Annotated[str | None, Meta(description="null: a snapshot of the whole server")]
    bucket_name: Annotated[
        str | None, Meta(description="The bucket's name when it was taken; null: the server's")
    ]
    name: Label | None
    created_at: Timestamp
    file_count: Annotated[int, Meta(ge=0, description="Versions and delete markers it holds")]
    size_bytes: Annotated[int, Meta(ge=0, description="Bytes of the versions it holds")]
    buckets: Annotated[int, Meta(ge=0, description="Buckets it holds: 1, or the server's")]


class CreateSnapshot(Request):
    name: Label | None = None


class ForkSnapshot(Request):
    """A new bucket holding the snapshot's versions and settings, sharing their content."""

    codes: ClassVar[dict[str, str]] = {"name": "invalid_bucket_name", "region": "invalid_region"}
    name: BucketName
    region: Annotated[
        str | None, Meta(description="One of the server's regions; null: the snapshot's bucket's")
    ] = None


class RestoreServerSnapshot(Request):
    drop_locked: Annotated[
        bool,
        Meta(
            description="Drop versions under retention or legal hold instead of refusing "
            "(only on a server in test mode: what the test fixture's reset does)"
        ),
    ] = False
