"""S3 object ownership: Put/Get/DeleteBucketOwnershipControls, in AWS's XML shapes. The
setting is the bucket's `object_ownership` (`storage/rules/ownership.py` says what each
value means here); a bucket without one answers OwnershipControlsNotFoundError, as S3 does
for a bucket whose controls were deleted."""

from __future__ import annotations

from starlette.responses import Response

from . import xml
from .call import S3Call
from .errors import S3Error


async def get_ownership(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    if bucket.object_ownership is None:
        raise S3Error(
            "OwnershipControlsNotFoundError",
            "The bucket ownership controls were not found",
            404,
        )
    rule: list[xml.Node] = [("ObjectOwnership", bucket.object_ownership)]
    return xml.response("OwnershipControls", [("Rule", rule)])


async def put_ownership(call: S3Call) -> Response:
    root = await call.read_xml()
    rules = root.findall("Rule")
    value = xml.text(rules[0], "ObjectOwnership") if len(rules) == 1 else None
    if root.tag != "OwnershipControls" or value is None:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed.")
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"object_ownership": value.strip()})
    return Response(b"", 200)


async def delete_ownership(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"object_ownership": None})
    return Response(b"", 204)
